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
#: delta(eps) queries are refined to rtol for values at least this large
DELTA_FLOOR = 1e-30


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
    def _pieces(self, d: float, upper: bool, direction: int):
        key = ("pieces", d, upper, direction)
        if key not in self._cache:
            k_tot = max(self.total_count, 1)
            log_tail = math.log(1e-40) - math.log(k_tot)
            out = []
            # a canonical order, so that the same multiset of mechanisms gives bit-identical
            # results however it was composed
            for mech, k in sorted(self.terms, key=lambda t: repr(t[0])):
                loss = mech.privacy_losses()[direction]
                rkey = ("range", id(loss))
                if rkey not in self._cache:
                    self._cache[rkey] = (loss_range(loss, log_tail), loss)
                lo, hi = self._cache[rkey][0]
                disc = connect_the_dots if upper else dominated
                out.append((disc(loss, d, lo, hi), k))
            self._cache[key] = out
        return self._cache[key]

    def _composed(self, d: float, upper: bool, direction: int, lam: float = 0.0,
                  log_tail: float = -70.0) -> ComposedPLD:
        key = ("comp", d, upper, direction, lam, log_tail)
        if key in self._cache:
            return self._cache[key]
        c = compose(self._pieces(d, upper, direction), lam=lam, max_points=self.max_points,
                    log_tail=log_tail)
        if lam == 0.0:  # tilted compositions serve one query each: not kept
            self._cache[key] = c
        return c

    def _lambda_for(self, d: float, upper: bool, direction: int, eps: float,
                    with_sd: bool = False):
        """Tilt ``lam >= 0`` that puts the mean of the tilted composed law at ``eps``:
        Newton's method on the composed log-MGF ``K`` (``K'(lam) = eps``), safeguarded by
        bisection; K is convex, so ``K'`` is increasing. Any tilt keeps the bounds valid;
        this one makes them accurate near ``eps``."""
        key = ("lamdata", d, upper, direction)
        if key not in self._cache:
            parts = []
            for p, k in self._pieces(d, upper, direction):
                pos = p.probs > 0
                parts.append((p.ys[pos], np.log(p.probs[pos]), k))
            self._cache[key] = parts
        parts = self._cache[key]

        def moments(lam: float) -> tuple[float, float]:
            m = v2 = 0.0
            for ys, lp, k in parts:
                lw = lp + lam * ys
                w = np.exp(lw - lw.max())
                w /= w.sum()
                mu = float(np.dot(w, ys))
                m += k * mu
                v2 += k * float(np.dot(w, (ys - mu) ** 2))
            return m, v2

        m0, v0 = moments(0.0)
        if m0 >= eps:
            return (0.0, math.sqrt(v0)) if with_sd else 0.0
        lo, hi = 0.0, 1.0
        while moments(hi)[0] < eps and hi < 1e4:
            lo, hi = hi, hi * 2
        lam = 0.5 * (lo + hi)
        for _ in range(60):
            m, var = moments(lam)
            if m < eps:
                lo = lam
            else:
                hi = lam
            step = (eps - m) / var if var > 0 else 0.0
            nxt = lam + step
            if not (lo < nxt < hi):
                nxt = 0.5 * (lo + hi)
            if abs(nxt - lam) <= 1e-10 * max(1.0, lam) or hi - lo <= 1e-12:
                lam = nxt
                break
            lam = nxt
        if with_sd:
            return lam, math.sqrt(max(moments(lam)[1], 0.0))
        return lam

    def _initial_step(self) -> float:
        return 1e-2

    @staticmethod
    def _next_steps(hist_u: list, hist_l: list, width: float, target: float
                    ) -> tuple[float, float]:
        """New grid steps from the refinement history of each side.

        Both discretizations have error ``c d^2`` to leading order. The default shrinks both
        steps by ``sqrt(target / width)`` (with a margin). Once a side has two refinements
        whose difference is consistent with the bracket, its constant ``c`` is fitted and the
        side gets the step that puts its own estimated error within half the target, so the
        side that is already accurate is not refined further. These are estimates that only
        choose the grid: the certificate is the bracket itself.
        """
        joint = min(max(math.sqrt(target / width) * 0.7, 1.0 / 16), 1.0 / 1.5) \
            if math.isfinite(width) and width > 0 else 0.25

        def step(hist: list) -> float:
            d1, v1 = hist[-1]
            if len(hist) < 2:
                return d1 * joint
            d0, v0 = hist[-2]
            ok = all(math.isfinite(x) and x > 0 for x in (v0, v1)) and d0 > d1
            if not ok:
                return d1 * joint
            err = abs(v0 - v1) / (d0 * d0 - d1 * d1) * d1 * d1
            if not err <= 2 * width:
                return d1 * joint
            budget = 0.45 * target
            if err <= budget:
                return d1
            return d1 * min(max(math.sqrt(budget / err) * 0.9, 1.0 / 16), 1.0 / 1.2)

        du, dl = hist_u[-1][0], hist_l[-1][0]
        nu, nl = step(hist_u), step(hist_l)
        if nu == du and nl == dl:  # the estimates claim success but the bracket is too wide
            nu, nl = du * joint, dl * joint
        return nu, nl

    # --- queries ---------------------------------------------------------------------------
    def _eps_bracket(self, delta: float, du: float, dl: float) -> tuple[float, float, dict]:
        ups, los = [], []
        info: dict = {}
        # the window may leave out mass up to a small fraction of the target delta; the bounds
        # account for it either way, this only keeps its effect on the bracket negligible
        log_tail = min(math.log(delta * self.rtol) - math.log(1e3), -20.0)
        for direction in self._directions():
            for upper, d in ((True, du), (False, dl)):
                c = self._composed(d, upper, direction, 0.0, log_tail)
                e = c.epsilon_bound(delta, upper)
                if delta < TILT_BELOW and math.isfinite(e) and e > 0:
                    lam = self._lambda_for(d, upper, direction, e)
                    if lam > 0:
                        c = self._composed(d, upper, direction, lam, log_tail)
                        e = c.epsilon_bound(delta, upper)
                        info["tilt"] = max(info.get("tilt", 0.0), lam)
                (ups if upper else los).append(e)
                info["fft_points"] = max(info.get("fft_points", 0), c.probs.size)
        return max(ups), max(los), info

    def epsilon(self, delta: float) -> EpsilonResult:
        """Certified bracket on the smallest eps with delta(eps) <= ``delta``."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, 0.0, 0.0, self.name, True)
        du = dl = self._initial_step()
        best = None
        converged = False
        note = ""
        hist_u: list = []
        hist_l: list = []
        while True:
            try:
                up, lo, info = self._eps_bracket(delta, du, dl)
            except ValueError as err:
                note = f"stopped refining at grid steps {du:.3g}/{dl:.3g}: {err}"
                break
            if best is None or (up - lo) < (best[0] - best[1]):
                best = (up, lo, (du, dl), info)
            width = up - lo
            target = self.rtol * up
            if (math.isinf(up) and math.isinf(lo)) or width <= target or width <= 1e-12:
                converged = True
                break
            hist_u.append((du, up))
            hist_l.append((dl, lo))
            du, dl = self._next_steps(hist_u, hist_l, width, target)
        if best is None:
            raise ValueError(note)
        up, lo, steps, info = best
        lo = min(lo, up)
        details = {"grid_step_upper": steps[0], "grid_step_lower": steps[1],
                   "converged": converged, "seconds": time.perf_counter() - t0, **info}
        if not converged and not note:
            note = "bracket wider than rtol"
        return EpsilonResult(up, delta, lo, up, self.name, True, estimate=up, note=note,
                             details=details)

    def _delta_bracket(self, eps: np.ndarray, du: float, dl: float
                       ) -> tuple[np.ndarray, np.ndarray]:
        up = np.zeros_like(eps)
        lo = np.zeros_like(eps)
        for direction in self._directions():
            for upper, d in ((True, du), (False, dl)):
                c = self._composed(d, upper, direction)
                val = c.delta_bound(eps, upper)
                # tiny values: recompute from compositions tilted towards them, so that they
                # are not read off the FFT's rounding noise; one tilt serves every eps from
                # its centre up to 8 standard deviations of the tilted law above it
                todo = sorted(np.nonzero((val < TILT_BELOW) & (eps > 0))[0],
                              key=lambda j: eps[j])
                while todo:
                    e0 = float(eps[todo[0]])
                    lam, sd = self._lambda_for(d, upper, direction, e0, with_sd=True)
                    if lam <= 0:
                        todo = todo[1:]
                        continue
                    ct = self._composed(d, upper, direction, lam)
                    near = [j for j in todo if eps[j] <= e0 + 8 * sd + d]
                    val[near] = ct.delta_bound(eps[near], upper)
                    todo = [j for j in todo if j not in set(near)]
                if upper:
                    up = np.maximum(up, val)
                else:
                    lo = np.maximum(lo, val)
        return up, np.minimum(lo, up)

    def delta(self, eps) -> DeltaResult:
        """Certified bracket on delta(eps) (eps a number or an array)."""
        eps_arr = v.eps_values("eps", eps)
        scalar = eps_arr.ndim == 0
        e = np.atleast_1d(eps_arr).astype(float)
        t0 = time.perf_counter()
        if not self.terms:
            out = 0.0 if scalar else np.zeros_like(e)
            return DeltaResult(out, eps, out, out, self.name, True)
        du = dl = self._initial_step()
        converged = False
        note = ""
        best = None
        hist_u: list = []
        hist_l: list = []
        while True:
            try:
                up, lo = self._delta_bracket(e, du, dl)
            except ValueError as err:
                note = f"stopped refining at grid steps {du:.3g}/{dl:.3g}: {err}"
                break
            best = (up, lo, (du, dl))
            # relative precision is asked of values >= DELTA_FLOOR; smaller ones are reported
            # with the (still certified) bracket that comes with it
            relw = np.where(up >= DELTA_FLOOR, (up - lo) / np.maximum(up, 1e-300), 0.0)
            rel = float(np.max(relw))
            if rel <= self.rtol:
                converged = True
                break
            # the worst eps decides; the sides are tracked on that eps
            j = int(np.argmax(relw))
            hist_u.append((du, float(up[j])))
            hist_l.append((dl, float(lo[j])))
            du, dl = self._next_steps(hist_u, hist_l, float(up[j] - lo[j]),
                                      self.rtol * float(up[j]))
        if best is None:
            raise ValueError(note)
        up, lo, steps = best
        details = {"grid_step_upper": steps[0], "grid_step_lower": steps[1],
                   "converged": converged, "seconds": time.perf_counter() - t0}
        if scalar:
            up, lo = float(up[0]), float(lo[0])
        return DeltaResult(up, eps, lo, up, self.name, True, estimate=up, note=note,
                           details=details)
