"""The Fourier accountant of Koskela, Jälkö and Honkela (AISTATS 2020), as published.

Algorithm 1 of the paper: the density of each mechanism's privacy loss distribution is
sampled on ``n`` equidistant points of ``[-L, L)`` (:func:`tightdp.pld.riemann.riemann`), the
k-fold convolution is computed circularly on that fixed window by FFT, with the half-swap ``D``
and the k-th power taken in the Fourier domain
(:func:`tightdp.pld.windows.compose_fixed_window` without its noise bound; Sec. 5.5 for
varying mechanisms),
``delta(eps)`` is the Riemann sum (5.2) and ``eps(delta)`` is found by Newton's method with
the derivative (5.3).

This accountant **approximates**: the truncation to ``[-L, L]``, the periodisation and the
Riemann sums are not bounded rigorously. Every result therefore has ``certified=False``,
``lower = upper = None``, and carries the paper's two error estimates in ``details``:

* ``tail_estimate`` -- the P-mass of the composed loss beyond ``L`` (Sec. 7.2): the
  estimate (7.3), ``exp(k q^2 (L/2+1)(L/2) / ((1-q) sigma^2)) e^{-L^2/2}``, where every term
  is a Poisson-subsampled Gaussian (``tail_estimate_73``), and the Chernoff bound
  ``min_lam exp(sum_i k_i K_i(lam) - lam L)`` (``tail_chernoff``; ``K_i`` the exact CGF of
  step i, :mod:`tightdp.losses.cgf`, else that of the discretized single-step law); the larger;
* ``err_L_n`` -- the discretisation error estimate (7.4), ``err(L, n) = 2 |I_n - I_2n|``
  (the same algorithm with ``2n`` points on the same ``[-L, L]``; a direction far below the
  maximum at ``n`` points is not rerun, see ``ERR_SKIP_FACTOR``);
* ``mass_defect`` -- ``|1 - prod_i (w_i / m_i)^{k_i}|`` where ``w_i`` is the sum of the
  Riemann weights of one step and ``m_i`` the P-mass they stand for: the k-th power turns a
  small quadrature error of a spiky density (small sigma) into a large relative error of
  every delta, which ``err(L, n)`` alone can miss (both n and 2n may be equally wrong);
* ``rounding_shift`` (losses with atoms only, ``method="mass"``) -- ``k d / 2``, the most
  the rounding of atoms to the grid moves the composed loss.

``error_estimate`` adds them up in the units of the result. Where it exceeds 1% of the
estimate the note says so.

For ``eps(delta)`` the same estimates are also given in eps units.

The domain: the accountant never returns a number it knows is capped by ``[-L, L]``. With the
default ``L`` it widens the domain itself (keeping the grid step, within the memory budget)
until the estimated mass of the composed loss above ``L`` is small against delta and the
answer lies inside; with an explicit ``L`` too small, or when the needed domain is over the
budget or beyond ``L = 500``, the query is refused with a ValueError naming ``L``
(``allow_truncation=True`` restores the published behaviour: the truncated number, noted).

Directions: under add/remove adjacency both the remove and the add pair are composed and
the maximum is reported (Koskela et al. 2020, Lemma 5 / Thm. 6).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _validate as v
from .._numerics import newton_scalar
from ..losses import LocationMixtureLoss
from ..mechanisms.base import Mechanism
from ..pld.grid import DiscretePLD
from ..pld.riemann import RIEMANN_METHODS, has_density, riemann
from ..pld.windows import compose_fixed_window
from ..results import DeltaResult, EpsilonResult
from .base import Accountant, Direction
from .fft_domain import MAX_L, MAX_N, ROUND_REFUSE, TAIL_REFUSE, TAIL_WIDEN, DomainPlanning
from .fft_limits import rounding_per_point

__all__ = ["FFTAccountant", "tail_estimate_73"]

#: with method="auto", density samples (Alg. 1) are replaced by bin masses when the k-fold
#: composed law would lose more than this relative mass (k * |log(sum of weights / mass)|)
AUTO_MASS_DEFECT = 1e-4

#: default starting domain [-L, L] and number of points
DEFAULT_L, DEFAULT_N = 12.0, 10**6
#: estimated peak bytes per grid point of one run (single-step weights, spectra, composed
#: law, suffix sums), the 3n points of a query with the error estimate included; the
#: tracemalloc figures behind it are in docs/pld-constants.md
BYTES_PER_POINT = 100.0
#: estimated peak bytes per grid point and mixture component of the discretization, with
#: room over its tracemalloc peak (docs/pld-constants.md)
BYTES_PER_COMPONENT = 30.0
#: the rerun with 2n points of the error estimate (7.4) skips a direction whose n-point delta
#: stays below the others' 2n-point delta by more than ERR_SKIP_FACTOR times their change
#: from n to 2n plus ERR_SKIP_RTOL of their value (its rerun is taken not to change the maximum)
ERR_SKIP_FACTOR, ERR_SKIP_RTOL = 100.0, 1e-3
#: most successive widenings of one query
_MAX_WIDEN = 6

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
        self.noise = rounding_per_point(self.p)

    def rounding(self, eps: np.ndarray) -> np.ndarray:
        """Estimated float64 rounding of the sum (5.2) at ``eps``: the per-point estimate
        (:func:`tightdp.accountants.fft_limits.rounding_per_point`) times the number of
        points summed."""
        idx = np.searchsorted(self.ys, np.asarray(eps, dtype=float), side="right")
        return self.noise * (self.ys.size - idx)

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
        assert self.s0 is not None  # set by _suffix
        with np.errstate(over="ignore"):
            e = np.exp(np.minimum(eps, 700.0))
        tail = e * self.s1[idx]
        return self.s0[idx] - tail + self.inf_mass, -tail


class FFTAccountant(DomainPlanning, Accountant):
    """Fourier accountant (Koskela, Jälkö, Honkela 2020, Alg. 1): an approximation.

    Parameters
    ----------
    L : truncation radius of the loss domain ``[-L, L]`` (``0 < L <= 500``). Left unset
        (default), the accountant starts from ``L = 12`` and **widens the domain itself**
        whenever the answer or the mass that matters lies beyond it, keeping the grid step
        ``2L/n`` (``n`` grows with ``L``) within the memory budget; ``details`` record the
        ``L`` and ``n`` used. Set explicitly, ``L`` is kept, and a query whose answer lies
        beyond it is refused with a ValueError naming ``L``.
    n : number of discretisation points for the starting ``L``, an even integer ``>= 2``
        (default ``10^6``); its memory is checked against the budget at construction.
    error_estimate : compute ``err(L, n)`` (7.4), which runs the algorithm again with ``2n``
        points, for the direction(s) attaining the maximum only (about twice the cost in
        all); the tail estimate (7.3) is always given.
    method : discretization, ``"density"`` (Alg. 1 as published: the density sampled at the
        grid points), ``"mass"`` (exact P-mass of the bin around each point) or ``"auto"``
        (default: density, unless the density samples of a mechanism miss more than
        ``AUTO_MASS_DEFECT / k`` of its mass, as for small sigma, then masses; losses with
        atoms always use masses); see :func:`tightdp.pld.riemann.riemann`. ``"published"``
        reproduces the paper's Tables 1 and 2 to their last digit (tests/test_accountants_fft.py
        checks every row): the density sampled at the float64 points of
        ``numpy.linspace(-L, L - dx, n)`` -- whose rounding, amplified by the ``k``-fold
        composition, is what the published last digits hold -- and the composition in long
        double (forward transforms and powering), so that no other rounding is added. Not a
        more accurate value than ``"density"`` (which samples at the exact grid points and
        is within 1e-12 of the algorithm's exact value); a way to check against the tables.
    allow_truncation : return the published algorithm's number on the given ``[-L, L]`` with a
        note even where the answer lies beyond the domain, instead of refusing (to reproduce
        the paper's Table 2, whose ``L = 2`` row is truncated). Default False.
    max_memory, max_seconds : the budget of one query (see :mod:`tightdp.budget`).
    neighboring : the neighbouring relation of the composition, ``"add_or_remove_one"``
        (default), ``"replace_one"`` or ``"replace_special"`` (see
        :class:`~tightdp.accountants.base.Accountant`).

    When is the domain too small? The mass of the composed loss above ``L`` is estimated by
    the Chernoff bound ``min_lam exp(sum_i k_i K_i(lam) - lam L)`` with the exact cumulant
    generating functions ``K_i`` of the steps (:mod:`tightdp.losses.cgf`; the discretized law only
    where none is available); the domain is widened until that mass is below ``TAIL_WIDEN``
    times the answer (``delta``, or the target ``delta`` of ``epsilon``), and a result whose
    mass above ``L`` exceeds ``TAIL_REFUSE`` times the answer, or whose ``eps`` reaches the end
    of the grid, is never returned (unless ``allow_truncation``).

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
    #: the options ``repr`` shows
    REPR_OPTIONS = ("L", "n")

    def __init__(self, L: float | None = None, n: int | None = None, *,
                 error_estimate: bool = True, method: str = "auto",
                 allow_truncation: bool = False, neighboring="add_or_remove_one",
                 max_memory=None, max_seconds=None):
        super().__init__(neighboring=neighboring, max_memory=max_memory,
                         max_seconds=max_seconds)
        self.auto_L = L is None
        self.L = DEFAULT_L if L is None else v.positive("L", L)
        if self.L > MAX_L:
            raise ValueError(f"L must be in (0, {MAX_L:g}], got {L!r}")
        self.n = DEFAULT_N if n is None else v.count("n", n, minimum=2)
        if self.n % 2:
            raise ValueError(f"n must be an even integer >= 2, got {n!r}")
        if not isinstance(error_estimate, bool):
            raise ValueError(f"error_estimate must be True or False, got {error_estimate!r}")
        self.error_estimate = error_estimate
        if method not in RIEMANN_METHODS:
            raise ValueError(f"method must be one of {RIEMANN_METHODS}, got {method!r}")
        self.method = method
        if not isinstance(allow_truncation, bool):
            raise ValueError(f"allow_truncation must be True or False, got {allow_truncation!r}")
        self.allow_truncation = allow_truncation
        # the arrays of n points (and 2n for the error estimate) must fit, before any query
        self.budget.check_memory(self._bytes(self.n), "n",
                                 f"use fewer points than n={self.n} or raise max_memory")
        if self.n > MAX_N:
            raise ValueError(f"n must be an even integer in [2, {MAX_N}], got {n!r}")

    def _bytes(self, n: int) -> float:
        """Estimated peak memory of one query with ``n`` points (and ``2n`` for err(L, n)):
        the arrays kept per point, and the discretization's temporaries per point and
        mixture component (the inverse and density of a location mixture)."""
        comps = 0
        for m, _ in self.terms:
            for loss in m.privacy_losses():
                if isinstance(loss, LocationMixtureLoss):
                    comps = max(comps, loss.a.size + loss.b.size)
        top = 2 * n if self.error_estimate else n
        return BYTES_PER_POINT * n * (3 if self.error_estimate else 1) \
            + BYTES_PER_COMPONENT * comps * top + 50e6

    def _check_n(self, n: int) -> None:
        """The memory of a query with the recorded mechanisms on ``n`` points, before any
        allocation (wide mixtures need temporaries per point and component)."""
        self.budget.check_memory(self._bytes(n), "n",
                                 f"use fewer points than n={n} (or error_estimate=False), or "
                                 "the pld accountant")

    # --- composition -------------------------------------------------------------------------
    def _single(self, mech: Mechanism, direction: int, L: float, n: int) -> DiscretePLD:
        key = ("single", L, mech, direction, n)
        if key not in self._cache:
            loss = mech.privacy_losses()[direction]
            pld = riemann(loss, L, n, self.method)
            if self.method == "auto" and pld.meta["method"] == "density":
                # Alg. 1 samples the density; where it is nearly singular (small sigma) the
                # samples miss part of the mass and the k-th power blows that up. Then the
                # exact bin masses are the better weights (same grid, same composition).
                inside = 1.0 - pld.meta["mass_below"] - pld.meta["mass_above"] - pld.inf_mass
                tot = float(pld.probs.sum())
                miss = abs(math.log(tot / inside)) if tot > 0 and inside > 0 else math.inf
                if self._terms[mech] * miss > AUTO_MASS_DEFECT:
                    pld = riemann(loss, L, n, "mass")
                    pld.meta["density_mass_defect"] = miss
            self._cache[key] = pld
        return self._cache[key]

    def _curve(self, direction: int, L: float, n: int) -> _Curve:
        key = ("curve", L, direction, n)
        if key not in self._cache:
            terms = [(self._single(m, direction, L, n), k) for m, k in self.terms]
            with np.errstate(over="ignore", invalid="ignore"):
                pld = compose_fixed_window(terms, -(n // 2), n, noise_bound=False,
                                           extended=self.method == "published")
            if not np.all(np.isfinite(pld.probs)):
                raise ValueError(f"n: the Fourier accountant overflowed: with n={n} on "
                                 f"[-{L:g}, {L:g}] the Riemann weights of one step are "
                                 "too inaccurate for this many compositions; increase n")
            self._cache[key] = _Curve(pld)
        return self._cache[key]

    def _delta(self, eps: np.ndarray, L: float, n: int, dirs: Sequence[int] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) (5.2) and its derivative (5.3): the maximum over the directions
        ``dirs`` (default all composed directions)."""
        best: Any = None
        slope: Any = None
        for direction in self._directions() if dirs is None else dirs:
            dl, dd = self._curve(direction, L, n).delta(eps)
            if best is None:
                best, slope = dl, dd
            else:
                take = dl > best
                best, slope = np.where(take, dl, best), np.where(take, dd, slope)
        return best, slope

    def _dirs_2n(self, eps: np.ndarray, est: np.ndarray, L: float, n: int
                 ) -> list[Direction]:
        """The directions rerun with ``2n`` points for the error estimate (7.4), ``est``
        being the maximum over the directions of delta(eps) with ``n`` points.

        The directions that attain that maximum are rerun; another one only where, at some
        eps, its ``n``-point value comes within ``ERR_SKIP_FACTOR`` times the change
        ``|I_n - I_2n|`` of the rerun ones (plus ``ERR_SKIP_RTOL`` of the value) of their
        ``2n`` value, so that its own rerun might change the maximum. The 2n run is the bulk
        of the cost: for directions far apart (the add direction of a subsampled Gaussian is
        about 1% below remove at eps = 1) this halves it."""
        dirs = self._directions()
        if len(dirs) == 1:
            return dirs
        vals = {dr: self._curve(dr, L, n).delta(eps)[0] for dr in dirs}
        run = [dr for dr in dirs if np.any(vals[dr] >= est)] or dirs
        est2 = self._delta(eps, L, 2 * n, run)[0]
        margin = ERR_SKIP_FACTOR * np.abs(est - est2) + ERR_SKIP_RTOL * np.abs(est2)
        return run + [dr for dr in dirs if dr not in run and np.any(vals[dr] >= est2 - margin)]

    def _newton(self, delta: float, L: float, n: int, dirs: Sequence[int] | None = None
                ) -> tuple[float, float, int]:
        """eps with delta(eps) = ``delta`` by Newton's method from eps_0 = 0 with the
        derivative (5.3) (Sec. 5.4), safeguarded by bisection.

        delta(eps) is decreasing but not convex in eps (its second derivative is
        ``f_Y(eps) + delta'(eps)``, negative where the loss density is small), so a plain
        Newton step can overshoot the root; every step is kept inside the bracket
        ``[a, b]`` with ``delta(a) > target >= delta(b)`` and replaced by its midpoint when it
        leaves it. Returns (eps, delta'(eps), iterations); eps = inf when even the end of the
        grid has delta above the target. ``dirs``: the directions of :meth:`_delta`."""
        d0, s0 = (float(x) for x in self._delta(np.asarray(0.0), L, n, dirs))
        if d0 <= delta:
            return 0.0, s0, 0
        tol = 1e-13 * delta
        top = float(self._curve(0, L, n).ys[-1])
        d_top, s_top = (float(x) for x in self._delta(np.asarray(top), L, n, dirs))
        if d_top > delta:
            return math.inf, 0.0, 1
        last_slope = [s0]

        def gap(eps: float) -> tuple[float, float]:  # target - delta(eps): increasing
            d, s = (float(x) for x in self._delta(np.asarray(eps), L, n, dirs))
            last_slope[0] = s
            return delta - d, -s

        # from eps_0 = 0 inside [0, top]; stop at |delta(eps) - target| <= tol, a repeated
        # iterate or a bracket at the rounding level (the last evaluated point is returned)
        eps, it = newton_scalar(gap, 0.0, 0.0, top, first=(delta - d0, -s0), ftol=tol,
                                rtol=0.0, floor=1.0, width_rtol=4e-16, keep="point",
                                iters=201)
        return eps, last_slope[0], it

    def _base_details(self, L: float, n: int) -> dict:
        details = {"L": L, "n": n, "grid_step": 2 * L / n,
                   **self._tail_estimates(L, n), "mass_defect": self._mass_defect(L, n)}
        if L != self.L:
            details["L_widened_from"] = self.L
        if any(not has_density(m.privacy_losses()[0]) for m, _ in self.terms):
            # atoms are moved to the nearest grid point: every loss by at most d/2
            details["rounding_shift"] = self.total_count * L / n
        return details

    # --- queries -----------------------------------------------------------------------------
    def _delta_of(self, eps) -> DeltaResult:
        """Estimate of delta(eps) by the Riemann sum (5.2), with error estimates.

        The domain is widened (default ``L``) or the query refused (explicit ``L``) where the
        largest eps or the estimated mass above ``L`` that matters lies beyond ``[-L, L]``."""
        e, scalar = self._eps_array(eps)
        t0 = time.perf_counter()
        if not self.terms:
            z = 0.0 if scalar else np.zeros_like(e)
            return DeltaResult(z, eps, None, None, self.name, certified=False, estimate=z,
                               note=_NOTE)
        deadline = self.budget.deadline()
        L, n = self.L, self.n
        self._check_n(n)
        self._refuse_unreachable(2.0)
        # at and above the supremum of a bounded composed loss delta(eps) is the mass at +inf
        top = min(float(np.max(e)), max(self._sup(dr) for dr in self._directions()))
        grow = top >= L - 4 * L / n and (self.auto_L or not self.allow_truncation)
        L, n, extra = self._first_window(grow, max(top + 1.0, L), "eps beyond L")
        for attempt in range(_MAX_WIDEN + 1):
            self._use_window(L)
            est, _ = self._delta(e, L, n)
            floor = np.maximum(est, 1e-300)
            log_tail = self._log_tail(L, n, L)
            if bool(np.all(log_tail <= math.log(TAIL_REFUSE) + np.log(floor))):
                break
            if not self.auto_L or attempt == _MAX_WIDEN or (self.allow_truncation
                                                            and L >= MAX_L):
                extra = self._refuse_or_note(L, n, "the estimated mass of the composed loss "
                                             "above L is not small against delta")
                break
            need = self._needed_L(L, n, math.log(TAIL_WIDEN) + math.log(float(floor.min())))
            grown = self._try_grow(max(need, 1.5 * L))
            if grown is None:
                extra = "; the mass above L is not small against delta: truncated, increase L"
                break
            L, n = grown
            deadline.check("L", "the domain had to be widened; use the pld accountant")
        details = self._base_details(L, n)
        err = None
        if self.error_estimate:
            deadline.check("n", f"the error estimate needs a second run with 2n={2 * n} "
                                "points; set error_estimate=False or use the pld accountant")
            est2, _ = self._delta(e, L, 2 * n, self._dirs_2n(e, est, L, n))
            err = 2.0 * np.abs(est - est2)
            details["err_L_n"] = float(err[0]) if scalar else err
        md = details["mass_defect"]
        total = details["tail_estimate"] + (err if err is not None else 0.0)
        total = total + (md / (1.0 - md) * np.abs(est) if md < 1 else np.inf)
        if "rounding_shift" in details:
            shifted, _ = self._delta(e - details["rounding_shift"], L, n)
            total = total + np.abs(shifted - est)
        rnd = self._rounding(e, L, n)
        details["fft_rounding"] = float(rnd[0]) if scalar else rnd
        total = total + rnd
        details["error_estimate"] = float(np.max(total)) if scalar else total
        details["seconds"] = time.perf_counter() - t0
        note = _NOTE + extra
        if np.any(np.asarray(total) > 0.01 * np.abs(est)):
            note += "; the error estimate exceeds 1% of the estimate: increase n and/or L"
        if np.any(rnd >= ROUND_REFUSE * np.abs(est)):
            note += (f"; delta(eps) is at the float64 rounding level of the FFT (about "
                     f"{float(np.max(rnd)):.2g}): the estimate only says it is not larger")
        if np.any(e >= L - 2 * L / n):
            note += "; eps at or beyond L: the estimate there is meaningless, increase L"
        out = float(est[0]) if scalar else est
        return DeltaResult(out, eps, None, None, self.name, certified=False, estimate=out,
                           note=note, details=details)

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Estimate of eps(delta) by Newton's method with (5.3), with error estimates.

        The domain is widened (default ``L``) or the query refused (explicit ``L``) until the
        estimated mass of the composed loss above ``L`` is small against ``delta`` and the
        answer lies inside ``[-L, L]``."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, None, None, self.name, certified=False, estimate=0.0,
                                 note=_NOTE)
        deadline = self.budget.deadline()
        L, n = self.L, self.n
        self._check_n(n)
        self._refuse_unreachable(delta, delta)
        need = self._needed_L(L, n, math.log(TAIL_WIDEN * delta))
        L, n, extra = self._first_window(self.auto_L and need > L, need,
                                         "the answer lies beyond L")
        for attempt in range(_MAX_WIDEN + 1):
            self._use_window(L)
            eps, slope, its = self._newton(delta, L, n)
            tail_ok = self._log_tail(L, n, L) <= math.log(TAIL_REFUSE * delta)
            inside = math.isfinite(eps) and eps < L - 2 * (2 * L / n)
            if tail_ok and inside:
                break
            why = ("the answer eps lies at or beyond L" if not inside else
                   "the estimated mass of the composed loss above L is not small against delta")
            if not self.auto_L or attempt == _MAX_WIDEN or (self.allow_truncation
                                                            and L >= MAX_L):
                extra = self._refuse_or_note(L, n, why)
                break
            grown = self._try_grow(max(1.5 * L, need))
            if grown is None:
                extra = f"; {why}: truncated, increase L"
                break
            L, n = grown
            deadline.check("L", "the domain had to be widened; use the pld accountant")
        rnd = self._check_resolved(delta, eps, L, n)
        details = self._base_details(L, n)
        details["newton_iterations"] = its
        details["fft_rounding"] = rnd
        note = _NOTE + extra
        tail = details["tail_estimate"]
        eps_err = 0.0
        if self.error_estimate:
            deadline.check("n", f"the error estimate needs a second run with 2n={2 * n} "
                                "points; set error_estimate=False or use the pld accountant")
            dirs2 = None
            if math.isfinite(eps):
                d1_row = self._delta(np.asarray([eps]), L, n)[0]
                dirs2 = self._dirs_2n(np.asarray([eps]), d1_row, L, n)
            eps2, _, _ = self._newton(delta, L, 2 * n, dirs2)
            eps_err = 2.0 * abs(eps - eps2) if math.isfinite(eps) and math.isfinite(eps2) \
                else math.inf
            details["eps_err_L_n"] = eps_err
            if math.isfinite(eps):
                d1 = float(self._delta(np.asarray(eps), L, n)[0])
                d2 = float(self._delta(np.asarray(eps), L, 2 * n, dirs2)[0])
                details["err_L_n"] = 2.0 * abs(d1 - d2)
        md = details["mass_defect"]
        d_err = tail + rnd + (md / (1.0 - md) * delta if md < 1 else math.inf)
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
        elif eps >= L - 2 * L / n:
            note += "; eps reached the end of the grid: increase L"
        return EpsilonResult(eps, delta, None, None, self.name, certified=False, estimate=eps,
                             note=note, details=details)
