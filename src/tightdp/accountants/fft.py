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

* ``tail_estimate`` -- the P-mass of the composed loss beyond ``L`` (Sec. 7.2): the
  estimate (7.3), ``exp(k q^2 (L/2+1)(L/2) / ((1-q) sigma^2)) e^{-L^2/2}``, where every term
  is a Poisson-subsampled Gaussian (``tail_estimate_73``), and the Chernoff bound
  ``min_lam exp(sum_i k_i alpha_i(lam) - lam L)`` (``tail_chernoff``; exact ``alpha`` for
  Gaussian terms, else from the discretized single-step law); the larger of the two;
* ``err_L_n`` -- the discretisation error estimate (7.4), ``err(L, n) = 2 |I_n - I_2n|``
  (the same algorithm with ``2n`` points on the same ``[-L, L]``);
* ``mass_defect`` -- ``|1 - prod_i (w_i / m_i)^{k_i}|`` where ``w_i`` is the sum of the
  Riemann weights of one step and ``m_i`` the P-mass they stand for: the k-th power turns a
  small quadrature error of a spiky density (small sigma) into a large relative error of
  every delta, which ``err(L, n)`` alone can miss (both n and 2n may be equally wrong);
* ``rounding_shift`` (losses with atoms only, ``method="mass"``) -- ``k d / 2``, the most
  the rounding of atoms to the grid moves the composed loss.

``error_estimate`` adds them up in the units of the result. Where it exceeds 1% of the
estimate the note says so.

For ``eps(delta)`` the same estimates are also given in eps units.

Directions: under add/remove adjacency both the remove and the add pair are composed and
the maximum is reported (Koskela et al. 2020, Lemma 5 / Thm. 6).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import logsumexp

from .. import _validate as v
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..pld.compose import compose_fixed_window
from ..pld.grid import DiscretePLD
from ..pld.riemann import has_density, riemann
from .base import Accountant, DeltaResult, EpsilonResult

__all__ = ["FFTAccountant", "tail_estimate_73"]

#: with method="auto", density samples (Alg. 1) are replaced by bin masses when the k-fold
#: composed law would lose more than this relative mass (k * |log(sum of weights / mass)|)
AUTO_MASS_DEFECT = 1e-4

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
    """delta(eps) of one composed direction, the Riemann sum (5.2), and its derivative (5.3).

    A few eps (at most 4, e.g. each Newton iteration) are summed directly (one pass over the
    grid points above each eps); many eps use suffix sums, built once on first need. The
    choice depends on the query only, never on earlier queries, so a query's answer does not
    depend on what was asked before (nor on a pickled copy's history)."""

    def __init__(self, pld: DiscretePLD):
        self.ys = pld.ys
        self.p = pld.probs
        self.inf_mass = pld.inf_mass
        self.s0: np.ndarray | None = None

    def _suffix(self) -> None:
        p = self.p
        self.s0 = np.zeros(p.size + 1)
        self.s1 = np.zeros(p.size + 1)
        self.s0[:-1] = np.cumsum(p[::-1])[::-1]
        self.s1[:-1] = np.cumsum((p * np.exp(-self.ys))[::-1])[::-1]

    def delta(self, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(5.2): ``sum_{x_l > eps} (1 - e^{eps - x_l}) C_l dx`` (plus the mass at +inf) and
        (5.3): ``-sum_{x_l > eps} e^{eps - x_l} C_l dx``."""
        eps = np.asarray(eps, dtype=float)
        idx = np.searchsorted(self.ys, eps, side="right")
        if eps.size <= 4:
            flat_e, flat_i = np.atleast_1d(eps).ravel(), np.atleast_1d(idx).ravel()
            d = np.empty(flat_e.shape)
            dd = np.empty(flat_e.shape)
            for j, (e, i) in enumerate(zip(flat_e, flat_i, strict=True)):
                w = np.exp(np.minimum(e - self.ys[i:], 700.0)) * self.p[i:]
                dd[j] = -float(np.sum(w))
                d[j] = float(np.sum(self.p[i:])) + dd[j]
            return (d.reshape(eps.shape) + self.inf_mass, dd.reshape(eps.shape))
        if self.s0 is None:
            self._suffix()
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
    method : discretization, ``"density"`` (Alg. 1 as published: the density sampled at the
        grid points), ``"mass"`` (exact P-mass of the bin around each point) or ``"auto"``
        (default: density, unless the density samples of a mechanism miss more than
        ``AUTO_MASS_DEFECT / k`` of its mass, as for small sigma, then masses; losses with
        atoms always use masses); see :func:`tightdp.pld.riemann.riemann`.

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
                 method: str = "auto", max_memory=None, max_seconds=None):
        super().__init__(max_memory=max_memory, max_seconds=max_seconds)
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
    def _single(self, mech: Mechanism, direction: int, n: int) -> DiscretePLD:
        key = ("single", mech, direction, n)
        if key not in self._cache:
            loss = mech.privacy_losses()[direction]
            pld = riemann(loss, self.L, n, self.method)
            if self.method == "auto" and pld.meta["method"] == "density":
                # Alg. 1 samples the density; where it is nearly singular (small sigma) the
                # samples miss part of the mass and the k-th power blows that up. Then the
                # exact bin masses are the better weights (same grid, same composition).
                inside = 1.0 - pld.meta["mass_below"] - pld.meta["mass_above"] - pld.inf_mass
                tot = float(pld.probs.sum())
                miss = abs(math.log(tot / inside)) if tot > 0 and inside > 0 else math.inf
                if self._terms[mech] * miss > AUTO_MASS_DEFECT:
                    pld = riemann(loss, self.L, n, "mass")
                    pld.meta["density_mass_defect"] = miss
            self._cache[key] = pld
        return self._cache[key]

    def _curve(self, direction: int, n: int) -> _Curve:
        key = ("curve", direction, n)
        if key not in self._cache:
            terms = [(self._single(m, direction, n), k) for m, k in self.terms]
            with np.errstate(over="ignore", invalid="ignore"):
                pld = compose_fixed_window(terms, -(n // 2), n)
            if not np.all(np.isfinite(pld.probs)):
                raise ValueError(f"the Fourier accountant overflowed: with n={n} on "
                                 f"[-{self.L}, {self.L}] the Riemann weights of one step are "
                                 "too inaccurate for this many compositions; increase n")
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
    def _log_mgf_terms(self, lam: np.ndarray, direction: int) -> np.ndarray:
        """sum_i k_i log E[e^{lam Y_i}] per direction: exact for Gaussian terms, else from the
        discretized single-step law (an estimate: the law is truncated to [-L, L))."""
        out = np.zeros_like(lam)
        for m, k in self.terms:
            base = m.base if isinstance(m, PoissonSubsampled) and m.q == 1 else m
            if isinstance(base, Gaussian):
                out += k * lam * (lam + 1.0) * base.mu ** 2 / 2.0
            else:
                key = ("logw", m, direction)
                if key not in self._cache:
                    pld = self._single(m, direction, self.n)
                    pos = pld.probs > 0
                    self._cache[key] = (pld.ys[pos], np.log(pld.probs[pos]))
                ys, lw = self._cache[key]
                if ys.size:
                    out += k * np.array([logsumexp(lw + t * ys) for t in lam])
        return out

    def _tail_estimates(self) -> dict:
        """Estimates of the P-mass of the composed loss beyond L (Koskela et al. 2020,
        Sec. 7.2): (7.3) where every term is a Poisson-subsampled Gaussian, and the Chernoff
        bound ``min_lam exp(sum_i k_i alpha_i(lam) - lam L)`` for every mechanism."""
        key = ("tails",)
        if key in self._cache:
            return self._cache[key]
        out: dict = {}
        pois = [(m, k) for m, k in self.terms if isinstance(m, PoissonSubsampled)
                and isinstance(m.base, Gaussian) and m.q < 1]
        if len(pois) == len(self.terms):
            lam = self.L / 2.0
            log73 = sum(k * m.q ** 2 * (lam + 1.0) * lam
                        / ((1.0 - m.q) * (m.base.sigma / m.base.sensitivity) ** 2)
                        for m, k in pois) - lam * self.L
            out["tail_estimate_73"] = math.exp(min(log73, 0.0))
        if "tail_estimate_73" in out and not self.error_estimate:
            out["tail_estimate"] = out["tail_estimate_73"]
            self._cache[key] = out
            return out
        worst = -math.inf
        for direction in self._directions():
            def f(u: float, direction: int = direction) -> float:
                lam = np.asarray([math.exp(u)])
                return float(self._log_mgf_terms(lam, direction)[0]) - math.exp(u) * self.L

            # the exponent is convex in lam, hence unimodal in log lam: golden-section search
            a, b = math.log(1e-3), math.log(1e3)
            g = (math.sqrt(5.0) - 1.0) / 2.0
            c, d = b - g * (b - a), a + g * (b - a)
            fc, fd = f(c), f(d)
            for _ in range(25):
                if fc <= fd:
                    b, d, fd = d, c, fc
                    c = b - g * (b - a)
                    fc = f(c)
                else:
                    a, c, fc = c, d, fd
                    d = a + g * (b - a)
                    fd = f(d)
            worst = max(worst, min(fc, fd))
        out["tail_chernoff"] = math.exp(min(worst, 0.0))
        out["tail_estimate"] = max(out.get("tail_estimate_73", 0.0), out["tail_chernoff"])
        self._cache[key] = out
        return out

    def _mass_defect(self) -> float:
        """Relative error of the total mass of the composed law: the Riemann weights of one
        step need not sum to the P-mass they stand for, and the k-th power amplifies it."""
        log_f = 0.0
        for m, k in self.terms:
            worst = 0.0
            for direction in self._directions():
                p = self._single(m, direction, self.n)
                inside = 1.0 - p.meta["mass_below"] - p.meta["mass_above"] - p.inf_mass
                tot = float(p.probs.sum())
                if inside <= 0 or tot <= 0:
                    return math.inf
                lf = k * math.log(tot / inside)
                worst = lf if abs(lf) > abs(worst) else worst
            log_f += worst
        return abs(math.expm1(min(log_f, 700.0)))

    def _base_details(self) -> dict:
        details = {"L": self.L, "n": self.n, "grid_step": 2 * self.L / self.n,
                   **self._tail_estimates(), "mass_defect": self._mass_defect()}
        if any(not has_density(m.privacy_losses()[0]) for m, _ in self.terms):
            # atoms are moved to the nearest grid point: every loss by at most d/2
            details["rounding_shift"] = self.total_count * self.L / self.n
        return details

    # --- queries -----------------------------------------------------------------------------
    def delta(self, eps) -> DeltaResult:
        """Estimate of delta(eps) by the Riemann sum (5.2), with error estimates."""
        e, scalar = self._eps_array(eps)
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
        md = details["mass_defect"]
        total = details["tail_estimate"] + (err if err is not None else 0.0)
        total = total + (md / (1.0 - md) * np.abs(est) if md < 1 else np.inf)
        if "rounding_shift" in details:
            shifted, _ = self._delta(e - details["rounding_shift"], self.n)
            total = total + np.abs(shifted - est)
        details["error_estimate"] = float(np.max(total)) if scalar else total
        details["seconds"] = time.perf_counter() - t0
        note = _NOTE
        if np.any(np.asarray(total) > 0.01 * np.abs(est)):
            note += "; the error estimate exceeds 1% of the estimate: increase n and/or L"
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
        md = details["mass_defect"]
        d_err = tail + (md / (1.0 - md) * delta if md < 1 else math.inf)
        if math.isfinite(eps) and slope < 0:
            details["eps_tail_estimate"] = tail / -slope
            eps_mass = d_err / -slope - details["eps_tail_estimate"]
        else:
            details["eps_tail_estimate"] = math.inf if tail > 0 else 0.0
            eps_mass = math.inf if md > 0 else 0.0
        details["error_estimate"] = (eps_err + details["eps_tail_estimate"] + eps_mass
                                     + details.get("rounding_shift", 0.0))
        details["seconds"] = time.perf_counter() - t0
        if not details["error_estimate"] <= 0.01 * max(eps, 1e-300):
            note += "; the error estimate exceeds 1% of the estimate: increase n and/or L"
        if not math.isfinite(eps):
            note += "; no eps on the grid reaches this delta, increase L"
        elif eps >= self.L - 2 * self.L / self.n:
            note += "; eps reached the end of the grid: increase L"
        return EpsilonResult(eps, delta, None, None, self.name, False, estimate=eps, note=note,
                             details=details)
