"""The certified PLD accountant: the library's default.

Every mechanism's privacy loss is discretized twice on a common grid of step ``d``: by
connect-the-dots into a dominating pair (upper bound) and by merge-and-round-down into a
dominated pair (lower bound), see :mod:`tightdp.pld.discretize`. Both are composed by the one
FFT engine (:mod:`tightdp.pld.compose`), whose truncation is accounted for in the direction of
each bound. Remove and add directions are composed separately and the curve is their maximum.

The grid is chosen adaptively: starting from a coarse step, ``d`` shrinks until the certified
bracket is within ``rtol`` (relative) of the upper bound, or the FFT would exceed
``max_points`` (then the tightest bracket found is returned with ``converged=False`` in its
details and a note saying so). Both discretizations have second-order error per step, so
the step needed barely grows with the number of compositions.

For very small delta the composed law is exponentially tilted towards the answer before the
FFT (see :func:`tightdp.pld.compose.compose`), so that values such as 1e-15 are not buried
under floating-point noise of the transform.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as v
from ..pld.compose import MAX_POINTS, ComposedPLD, compose
from ..pld.discretize import connect_the_dots, dominated, loss_range
from .base import Accountant, DeltaResult, EpsilonResult

__all__ = ["PLDAccountant"]

#: below this delta the composition is tilted towards the answer
TILT_BELOW = 1e-9


class PLDAccountant(Accountant):
    """Certified privacy-loss-distribution accountant.

    Parameters
    ----------
    rtol : relative width of the certified bracket to aim for (eps or delta).
    max_points : the largest FFT it may use; beyond it the tightest bracket is reported.

    Examples
    --------
    >>> from tightdp import PLDAccountant, PoissonSubsampled, Gaussian
    >>> acc = PLDAccountant().compose(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000)
    >>> r = acc.epsilon(1e-5)
    >>> r.lower <= 6.1877 <= r.upper
    True
    """

    name = "pld"

    def __init__(self, rtol: float = 1e-3, *, max_points: int = MAX_POINTS):
        super().__init__()
        self.rtol = v.positive("rtol", rtol)
        self.max_points = v.count("max_points", max_points, minimum=64)

    # --- building blocks -------------------------------------------------------------------
    def _directions(self) -> list[int]:
        if all(m.symmetric for m, _ in self.terms):
            return [0]
        return [0, 1]

    def _pieces(self, d: float, upper: bool, direction: int):
        key = ("pieces", d, upper, direction)
        if key not in self._cache:
            k_tot = max(self.total_count, 1)
            log_tail = math.log(1e-40) - math.log(k_tot)
            out = []
            for mech, k in self.terms:
                loss = mech.privacy_losses()[direction]
                rkey = ("range", id(loss))
                if rkey not in self._cache:
                    self._cache[rkey] = (loss_range(loss, log_tail), loss)
                lo, hi = self._cache[rkey][0]
                disc = connect_the_dots if upper else dominated
                out.append((disc(loss, d, lo, hi), k))
            self._cache[key] = out
        return self._cache[key]

    def _composed(self, d: float, upper: bool, direction: int, lam: float = 0.0
                  ) -> ComposedPLD:
        key = ("comp", d, upper, direction, lam)
        if key not in self._cache:
            self._cache[key] = compose(self._pieces(d, upper, direction), lam=lam,
                                       max_points=self.max_points)
        return self._cache[key]

    def _lambda_for(self, d: float, upper: bool, direction: int, eps: float) -> float:
        """Tilt that puts the mean of the tilted composed law at ``eps`` (bisection)."""
        pieces = self._pieces(d, upper, direction)

        def mean(lam: float) -> float:
            tot = 0.0
            for p, k in pieces:
                ys = p.ys
                pos = p.probs > 0
                lw = np.log(p.probs[pos]) + lam * ys[pos]
                w = np.exp(lw - lw.max())
                tot += k * float(np.dot(w, ys[pos]) / w.sum())
            return tot

        if mean(0.0) >= eps:
            return 0.0
        lo, hi = 0.0, 1.0
        while mean(hi) < eps and hi < 1e4:
            lo, hi = hi, hi * 2
        for _ in range(40):
            m = 0.5 * (lo + hi)
            if mean(m) < eps:
                lo = m
            else:
                hi = m
        return lo

    def _initial_step(self) -> float:
        return 1e-2

    def _next_step(self, d: float, width: float, target: float) -> float:
        if not math.isfinite(width) or width <= 0:
            return d / 4
        f = math.sqrt(target / width) * 0.7
        return d * min(max(f, 1.0 / 16), 1.0 / 1.5)

    # --- queries ---------------------------------------------------------------------------
    def _eps_bracket(self, delta: float, d: float) -> tuple[float, float, dict]:
        ups, los = [], []
        info: dict = {}
        for direction in self._directions():
            for upper in (True, False):
                c = self._composed(d, upper, direction)
                e = c.epsilon_bound(delta, upper)
                if delta < TILT_BELOW and math.isfinite(e) and e > 0:
                    lam = self._lambda_for(d, upper, direction, e)
                    if lam > 0:
                        c = self._composed(d, upper, direction, lam)
                        e2 = c.epsilon_bound(delta, upper)
                        info["tilt"] = max(info.get("tilt", 0.0), lam)
                        e = e2
                (ups if upper else los).append(e)
                info["fft_points"] = max(info.get("fft_points", 0), c.probs.size)
        return max(ups), max(los), info

    def epsilon(self, delta: float) -> EpsilonResult:
        """Certified bracket on the smallest eps with delta(eps) <= ``delta``."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, 0.0, 0.0, self.name, True)
        d = self._initial_step()
        best = None
        converged = False
        note = ""
        while True:
            try:
                up, lo, info = self._eps_bracket(delta, d)
            except ValueError as err:
                note = f"stopped refining at grid step {d:.3g}: {err}"
                break
            if best is None or (up - lo) < (best[0] - best[1]):
                best = (up, lo, d, info)
            width = up - lo
            target = self.rtol * up
            if math.isinf(up) and math.isinf(lo):
                converged = True
                break
            if width <= target or width <= 1e-12:
                converged = True
                break
            d = self._next_step(d, width, target)
        if best is None:
            raise ValueError(note)
        up, lo, d_used, info = best
        lo = min(lo, up)
        details = {"grid_step": d_used, "converged": converged,
                   "seconds": time.perf_counter() - t0, **info}
        if not converged and not note:
            note = "bracket wider than rtol"
        return EpsilonResult(up, delta, lo, up, self.name, True, estimate=up, note=note,
                             details=details)

    def _delta_bracket(self, eps: np.ndarray, d: float) -> tuple[np.ndarray, np.ndarray]:
        up = np.zeros_like(eps)
        lo = np.zeros_like(eps)
        for direction in self._directions():
            up = np.maximum(up, self._composed(d, True, direction).delta_bound(eps, True))
            lo = np.maximum(lo, self._composed(d, False, direction).delta_bound(eps, False))
        return up, np.minimum(lo, up)

    def delta(self, eps) -> DeltaResult:
        """Certified bracket on delta(eps) (eps a number or an array)."""
        eps_arr = v.eps_values("eps", eps)
        scalar = eps_arr.ndim == 0
        e = np.atleast_1d(eps_arr).astype(float)
        t0 = time.perf_counter()
        if not self.terms:
            z = np.zeros_like(e)
            out = (0.0 if scalar else z)
            return DeltaResult(out, eps, out, out, self.name, True)
        d = self._initial_step()
        converged = False
        note = ""
        best = None
        while True:
            try:
                up, lo = self._delta_bracket(e, d)
            except ValueError as err:
                note = f"stopped refining at grid step {d:.3g}: {err}"
                break
            best = (up, lo, d)
            width = float(np.max(up - lo))
            rel = float(np.max((up - lo) / np.maximum(up, 1e-300)))
            if rel <= self.rtol or width <= 1e-300:
                converged = True
                break
            d = self._next_step(d, rel, self.rtol)
        if best is None:
            raise ValueError(note)
        up, lo, d_used = best
        details = {"grid_step": d_used, "converged": converged,
                   "seconds": time.perf_counter() - t0}
        if scalar:
            up, lo = float(up[0]), float(lo[0])
        return DeltaResult(up, eps, lo, up, self.name, True, estimate=up, note=note,
                           details=details)
