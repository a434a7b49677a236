"""The Fourier accountant of Koskela, Jälkö and Honkela (AISTATS 2020), as published.

Algorithm 1 of the paper: the density of each mechanism's privacy loss distribution is
sampled on ``n`` equidistant points of ``[-L, L)`` (:func:`tightdp.pld.riemann.riemann`), the
k-fold convolution is computed circularly on that fixed window by FFT, with the half-swap ``D``
and the k-th power taken in the Fourier domain
(:func:`tightdp.pld.compose.compose_fixed_window`; Sec. 5.5 for varying mechanisms),
``delta(eps)`` is the Riemann sum (5.2) and ``eps(delta)`` is found by Newton's method with
the derivative (5.3).

This accountant **approximates**: the truncation to ``[-L, L]``, the periodisation and the
Riemann sums are not bounded rigorously. Every result therefore has ``certified=False``,
``lower = upper = None``, and carries the paper's two error estimates in ``details``:

* ``tail_estimate`` -- the tail-bound estimate (7.3) of the mass beyond ``L``
  (``exp(k q^2 (L/2+1)(L/2) / ((1-q) sigma^2)) e^{-L^2/2}`` for Poisson-subsampled Gaussian
  terms, the exact Chernoff bound ``exp(k lam (lam+1) mu^2/2 - lam L)`` with ``lam = L/2``
  for Gaussian terms, and for other mechanisms the Chernoff bound evaluated with the
  moment generating function of the discretized single-step law);
* ``err_L_n`` -- the discretisation error estimate (7.4), ``err(L, n) = 2 |I_n - I_2n|``
  (computed by running the same algorithm with ``2n`` points on the same ``[-L, L]``).

For ``eps(delta)`` the same estimates are also given in eps units.

Directions: under add/remove adjacency both the remove and the add pair are composed and
the maximum is reported (Koskela et al. 2020, Lemma 5 / Thm. 6).
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as v
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..pld.compose import compose_fixed_window
from ..pld.grid import DiscretePLD
from ..pld.riemann import riemann
from .base import Accountant, DeltaResult, EpsilonResult

__all__ = ["FFTAccountant", "tail_estimate_73"]

#: largest number of grid points accepted (the error estimate doubles it)
MAX_N = 1 << 26

_NOTE = ("Fourier accountant (Koskela, Jälkö, Honkela 2020): an approximation on [-L, L] with "
         "n points, not a certified bound; details give its error estimates (7.3) and (7.4)")


def tail_estimate_73(q: float, sigma: float, count: int, L: float) -> float:
    """Tail-bound estimate (7.3) of Koskela et al. (2020) for ``count`` compositions of the
    Poisson-subsampled Gaussian mechanism with noise multiplier ``sigma`` and rate ``q < 1``:

        exp(k q^2 (L/2 + 1)(L/2) / ((1 - q) sigma^2)) * exp(-L^2 / 2),

    the Chernoff bound at ``lambda = L/2`` with the moment bound of Abadi et al. (2016,
    Lemma 3) whose ``O(q^3 lambda^3 / sigma^3)`` term is neglected (hence an estimate).
    """
    lam = L / 2.0
    return math.exp(min(count * q * q * (lam + 1.0) * lam / ((1.0 - q) * sigma * sigma)
                        - L * L / 2.0, 700.0))


class _Curve:
    """delta(eps) of one composed direction via suffix sums (Riemann sum (5.2))."""

    def __init__(self, pld: DiscretePLD):
        self.ys = pld.ys
        p = pld.probs
        self.inf_mass = pld.inf_mass
        self.s0 = np.zeros(p.size + 1)
        self.s1 = np.zeros(p.size + 1)
        self.s0[:-1] = np.cumsum(p[::-1])[::-1]
        self.s1[:-1] = np.cumsum((p * np.exp(-self.ys))[::-1])[::-1]

    def delta(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(5.2): ``sum_{x_l > eps} (1 - e^{eps - x_l}) C_l dx`` and its derivative (5.3):
        ``-sum_{x_l > eps} e^{eps - x_l} C_l dx``."""
        idx = np.searchsorted(self.ys, eps, side="right")
        with np.errstate(over="ignore"):
            e = np.exp(np.minimum(eps, 700.0))
        tail = e * self.s1[idx]
        return self.s0[idx] - tail + self.inf_mass, -tail


class FFTAccountant(Accountant):
    """Fourier accountant (Koskela, Jälkö, Honkela 2020, Alg. 1): an approximation.

    Parameters
    ----------
    L : truncation radius of the loss domain ``[-L, L]`` (``0 < L <= 500``).
    n : number of discretisation points, an even integer in ``[2, 2^26]``.
    error_estimate : compute ``err(L, n)`` (7.4), which runs the algorithm again with ``2n``
        points (about three times the cost); the tail estimate (7.3) is always given.
    method : discretization, ``"auto"``, ``"density"`` (Alg. 1) or ``"mass"``; see
        :func:`tightdp.pld.riemann.riemann`.

    Examples
    --------
    >>> from tightdp import PoissonSubsampled, Gaussian
    >>> from tightdp.accountants.fft import FFTAccountant
    >>> acc = FFTAccountant(L=12.0, n=200_000).compose(PoissonSubsampled(Gaussian(1.5), 0.01),
    ...                                                 10_000)
    >>> round(float(acc.delta(1.0).delta), 9)  # Table 1 of the paper: 0.0496013846114
    0.049601385
    """

    name = "fft"

    def __init__(self, L: float = 12.0, n: int = 10**6, *, error_estimate: bool = True,
                 method: str = "auto"):
        super().__init__()
        self.L = v.positive("L", L)
        if self.L > 500:
            raise ValueError(f"L must be in (0, 500], got {L!r}")
        self.n = v.count("n", n, minimum=2)
        if self.n % 2 or self.n > MAX_N:
            raise ValueError(f"n must be an even integer in [2, {MAX_N}], got {n!r}")
        if not isinstance(error_estimate, bool):
            raise ValueError(f"error_estimate must be True or False, got {error_estimate!r}")
        self.error_estimate = error_estimate
        if method not in ("auto", "density", "mass"):
            raise ValueError(f"method must be 'auto', 'density' or 'mass', got {method!r}")
        self.method = method

    # --- composition -------------------------------------------------------------------------
    def _directions(self) -> list[int]:
        return [0] if all(m.symmetric for m, _ in self.terms) else [0, 1]

    def _single(self, mech: Mechanism, direction: int, n: int) -> DiscretePLD:
        key = ("single", mech, direction, n)
        if key not in self._cache:
            loss = mech.privacy_losses()[direction]
            self._cache[key] = riemann(loss, self.L, n, self.method)
        return self._cache[key]

    def _curve(self, direction: int, n: int) -> _Curve:
        key = ("curve", direction, n)
        if key not in self._cache:
            terms = [(self._single(m, direction, n), k) for m, k in self.terms]
            pld = compose_fixed_window(terms, -(n // 2), n)
            self._cache[key] = _Curve(pld)
        return self._cache[key]

    def _delta(self, eps: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        best, slope = None, None
        for direction in self._directions():
            dl, dd = self._curve(direction, n).delta(eps)
            if best is None:
                best, slope = dl, dd
            else:
                take = dl > best
                best, slope = np.where(take, dl, best), np.where(take, dd, slope)
        return best, slope

    def _newton(self, delta: float, n: int) -> tuple[float, float, int]:
        """eps with delta(eps) = ``delta`` by Newton's method from eps_0 = 0 (Sec. 5.4).

        delta(eps) is convex and decreasing, so the iterates increase monotonically to the
        root. Returns (eps, delta'(eps), iterations)."""
        eps = 0.0
        d0, s0 = self._delta(np.asarray(eps), n)
        if float(d0) <= delta:
            return 0.0, float(s0), 0
        tol = 1e-13 * delta
        top = float(self._curve(0, n).ys[-1])
        for it in range(1, 201):
            d, s = (float(a) for a in self._delta(np.asarray(eps), n))
            if abs(d - delta) <= tol:
                return eps, s, it
            if s >= 0:  # flat: no mass above eps on the grid
                return (math.inf if d > delta else eps), s, it
            step = (d - delta) / s
            eps_new = eps - step
            if eps_new > top:  # beyond the grid, delta there is the mass at +inf only
                eps_new = top
                d_top = float(self._delta(np.asarray(top), n)[0])
                if d_top > delta:
                    return math.inf, 0.0, it
            if eps_new <= eps:  # rounding: no progress
                return eps, s, it
            eps = eps_new
        return eps, s, 200

    # --- error estimates ---------------------------------------------------------------------
    def _tail_estimate(self) -> tuple[float, str]:
        """Estimate of the P-mass of the composed loss beyond L (Sec. 7.2)."""
        lam = self.L / 2.0
        log_mgf = 0.0
        kinds = set()
        poisson_q, poisson_s, poisson_k = [], [], []
        for m, k in self.terms:
            if isinstance(m, PoissonSubsampled) and isinstance(m.base, Gaussian) and m.q < 1:
                poisson_q.append(m.q)
                poisson_s.append(m.base.sigma / m.base.sensitivity)
                poisson_k.append(k)
                kinds.add("(7.3)")
                continue
            base = m.base if isinstance(m, PoissonSubsampled) else m
            if isinstance(base, Gaussian):
                log_mgf += k * lam * (lam + 1) * base.mu ** 2 / 2
                kinds.add("Gaussian Chernoff")
                continue
            worst = -math.inf
            for direction in self._directions():
                pld = self._single(m, direction, self.n)
                worst = max(worst, float(pld.log_mgf(lam)[0]) if pld.probs.any() else 0.0)
            log_mgf += k * worst
            kinds.add("Chernoff on the discretized law")
        for q, s, k in zip(poisson_q, poisson_s, poisson_k, strict=True):
            log_mgf += k * q * q * (lam + 1.0) * lam / ((1.0 - q) * s * s)
        return math.exp(min(log_mgf - lam * self.L, 700.0)), " + ".join(sorted(kinds))

    def _base_details(self) -> dict:
        tail, kind = self._tail_estimate()
        dropped = 0.0
        for m, k in self.terms:
            for direction in self._directions():
                meta = self._single(m, direction, self.n).meta
                dropped = max(dropped, k * meta["mass_above"])
        return {"L": self.L, "n": self.n, "grid_step": 2 * self.L / self.n,
                "tail_estimate": tail, "tail_estimate_kind": kind,
                "single_step_mass_above_L_times_k": dropped}

    # --- queries -----------------------------------------------------------------------------
    def delta(self, eps) -> DeltaResult:
        """Estimate of delta(eps) by the Riemann sum (5.2), with error estimates."""
        eps_arr = v.eps_values("eps", eps)
        scalar = eps_arr.ndim == 0
        e = np.atleast_1d(eps_arr).astype(float)
        t0 = time.perf_counter()
        if not self.terms:
            z = 0.0 if scalar else np.zeros_like(e)
            return DeltaResult(z, eps, None, None, self.name, False, estimate=z, note=_NOTE)
        est, _ = self._delta(e, self.n)
        details = self._base_details()
        err = None
        if self.error_estimate:
            est2, _ = self._delta(e, 2 * self.n)
            err = 2.0 * np.abs(est - est2)
            details["err_L_n"] = float(err[0]) if scalar else err
        total = details["tail_estimate"] + (err if err is not None else 0.0)
        details["error_estimate"] = float(np.max(total)) if scalar else total
        details["seconds"] = time.perf_counter() - t0
        note = _NOTE
        if np.any(e >= self.L - 2 * self.L / self.n):
            note += "; eps at or beyond L: the estimate there is meaningless, increase L"
        out = float(est[0]) if scalar else est
        return DeltaResult(out, eps, None, None, self.name, False, estimate=out, note=note,
                           details=details)

    def epsilon(self, delta: float) -> EpsilonResult:
        """Estimate of eps(delta) by Newton's method with (5.3), with error estimates."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, None, None, self.name, False, estimate=0.0,
                                 note=_NOTE)
        eps, slope, its = self._newton(delta, self.n)
        details = self._base_details()
        details["newton_iterations"] = its
        note = _NOTE
        tail = details["tail_estimate"]
        eps_err = 0.0
        if self.error_estimate:
            eps2, _, _ = self._newton(delta, 2 * self.n)
            eps_err = 2.0 * abs(eps - eps2) if math.isfinite(eps) and math.isfinite(eps2) \
                else math.inf
            details["eps_err_L_n"] = eps_err
            if math.isfinite(eps):
                d1 = float(self._delta(np.asarray(eps), self.n)[0])
                d2 = float(self._delta(np.asarray(eps), 2 * self.n)[0])
                details["err_L_n"] = 2.0 * abs(d1 - d2)
        if math.isfinite(eps) and slope < 0:
            details["eps_tail_estimate"] = tail / -slope
        else:
            details["eps_tail_estimate"] = math.inf if tail > 0 else 0.0
        details["error_estimate"] = eps_err + details["eps_tail_estimate"]
        details["seconds"] = time.perf_counter() - t0
        if not math.isfinite(eps):
            note += "; no eps on the grid reaches this delta, increase L"
        elif eps >= self.L - 2 * self.L / self.n:
            note += "; eps reached the end of the grid: increase L"
        return EpsilonResult(eps, delta, None, None, self.name, False, estimate=eps, note=note,
                             details=details)
