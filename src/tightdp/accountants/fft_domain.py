"""The domain ``[-L, L]`` of the Fourier accountant: the mass of the composed loss beyond it,
how far it must reach, what no domain resolves, and its error estimates.

:class:`DomainPlanning` holds the part of :class:`~tightdp.accountants.fft.FFTAccountant`
that decides the window before and after the FFT work: the Chernoff bound on the mass above
``L`` from the steps' CGFs (Koskela et al. 2020, Sec. 7.2), the refusals before any work
(:mod:`tightdp.accountants.fft_limits`), the widening of the domain within the memory
budget, and the tail and mass-defect estimates of the details. It works on the accountant's
own state (``L``, ``n``, the composition, the cache) and its ``_single``/``_curve``/
``_bytes``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
from scipy.fft import next_fast_len

from .._numerics import UNIT_ROUNDOFF
from ..losses import DiscreteLoss, GaussianLoss
from ..losses.cgf import MAX_NODES, cgf, cgf_supported, loss_sup, node_count
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..pld.grid import atom_log_mgf
from .fft_limits import log_tail_lower

if TYPE_CHECKING:
    from ..budget import Budget
    from ..mechanisms.base import Mechanism
    from ..pld.grid import DiscretePLD
    from .base import Direction

    class _Rounding(Protocol):
        """What this module uses of a composed curve (``fft._Curve``)."""

        def rounding(self, eps: np.ndarray) -> np.ndarray: ...

__all__ = ["DomainPlanning", "MAX_L", "MAX_N", "MIN_RESOLVED_DELTA", "ROUND_REFUSE",
           "TAIL_REFUSE", "TAIL_WIDEN"]

#: largest number of grid points accepted (the memory budget usually binds first)
MAX_N = 1 << 26
#: largest domain radius
MAX_L = 500.0
#: the default domain is widened until the estimated mass above L is below this fraction of
#: delta; a result whose mass above L exceeds TAIL_REFUSE times delta is refused
TAIL_WIDEN, TAIL_REFUSE = 1e-3, 1e-2
#: tilts of the Chernoff bound on the mass above L (quadrature CGFs up to _LAM_QUAD)
_LAMS = np.geomspace(1e-3, 1e4, 141)
_LAM_QUAD = 64.0
_QUAD_WORK = 2e7
#: eps(delta) is refused where the estimated float64 rounding of delta(eps) (5.2) reaches
#: ROUND_REFUSE times delta: the sum there is rounding noise, and the eps found for it may
#: be far below the true one (:mod:`tightdp.accountants.fft_limits`)
ROUND_REFUSE = 1.0
#: below this delta no float64 FFT of at most MAX_N points resolves delta(eps): the rounding
#: of a law of total mass ~1 is at least one unit roundoff of its largest point (>= 1/n)
MIN_RESOLVED_DELTA = UNIT_ROUNDOFF / MAX_N


def _quad_cap(loss) -> float:
    """The largest tilt (64, 32, ..., 4) at which the CGF quadrature of a location-mixture
    loss costs at most ``_QUAD_WORK`` node-component evaluations (0 if none: the Chernoff
    bound then uses the discretized law)."""
    comps = loss.a.size + loss.b.size
    for t in (_LAM_QUAD, 32.0, 16.0, 8.0, 4.0):
        if node_count(loss, t) <= MAX_NODES and node_count(loss, t) * comps <= _QUAD_WORK:
            return t
    return 0.0


class DomainPlanning:
    """The domain planning of :class:`~tightdp.accountants.fft.FFTAccountant` (a base class
    of it; see the module docstring)."""

    if TYPE_CHECKING:  # the accountant's state and methods this base class uses
        L: float
        n: int
        auto_L: bool
        allow_truncation: bool
        budget: Budget
        _cache: dict

        @property
        def terms(self) -> list[tuple[Mechanism, int]]: ...
        def _directions(self) -> list[Direction]: ...
        def _single(self, mech: Mechanism, direction: int, L: float, n: int
                    ) -> DiscretePLD: ...
        def _curve(self, direction: int, L: float, n: int) -> _Rounding: ...
        def _bytes(self, n: int) -> float: ...

    # --- the mass beyond L: Chernoff with the steps' CGFs ---------------------------------------
    def _chernoff_table(self, direction: int, L: float, n: int) -> tuple[np.ndarray, float]:
        """(``sum_i k_i K_i(lam)`` on the tilt grid ``_LAMS``, total supremum of the loss).

        ``K_i`` is the exact CGF of the finite part of step i's loss (closed form for
        Gaussian losses, finite sums for discrete losses, quadrature for location mixtures up
        to tilt 64, :func:`tightdp.losses.cgf.cgf`); where none is available, the CGF of the
        discretized single-step law on the current ``[-L, L)`` (an estimate). Entries are
        ``+inf`` at tilts a term cannot evaluate."""
        exact = all(self._exact_cgf(m.privacy_losses()[direction]) for m, _ in self.terms)
        key = ("chernoff", direction) if exact else ("chernoff", L, direction, n)
        if key in self._cache:
            return self._cache[key]
        tot = np.zeros(_LAMS.size)
        sup = 0.0
        for m, k in self.terms:
            loss = m.privacy_losses()[direction]
            sup += k * loss_sup(loss) if loss_sup(loss) > -math.inf else 0.0
            if isinstance(loss, GaussianLoss):
                tot += k * _LAMS * (_LAMS + 1.0) * loss.mu ** 2 / 2.0
            elif isinstance(loss, DiscreteLoss):
                pos = loss.p > 0
                lp = np.log(loss.p[pos])
                tot += k * atom_log_mgf(loss.y[pos], lp, _LAMS)
            elif self._exact_cgf(loss):
                ok = _LAMS <= _quad_cap(loss)
                vals = np.full(_LAMS.size, np.inf)
                vals[ok] = cgf(loss, _LAMS[ok])[0]
                tot += k * vals
            else:
                # the discretized law, with the step's mass above the window put at its edge
                pld = self._single(m, direction, L, n)
                pos = pld.probs > 0
                ys, lw = pld.ys[pos], np.log(pld.probs[pos])
                above = pld.meta["mass_above"]
                if above > 0:
                    ys, lw = np.append(ys, L), np.append(lw, math.log(above))
                if ys.size:
                    tot += k * atom_log_mgf(ys, lw, _LAMS)
        self._cache[key] = (tot, sup)
        return tot, sup

    @staticmethod
    def _exact_cgf(loss) -> bool:
        if isinstance(loss, GaussianLoss | DiscreteLoss):
            return True
        if loss.inf_mass > 0 or cgf_supported(loss) is not None:
            return False
        return _quad_cap(loss) > 0

    def _sup(self, direction: int) -> float:
        """Essential supremum of the finite part of the composed loss (``inf`` if unbounded)."""
        tot = 0.0
        for m, k in self.terms:
            s = loss_sup(m.privacy_losses()[direction])
            tot += k * s if s > -math.inf else 0.0
        return tot

    def _log_tail(self, L: float, n: int, at: float) -> float:
        """log of the estimated P-mass of the composed loss above ``at`` (max over the
        directions): the Chernoff bound on the tilt grid; ``-inf`` at or above the total
        supremum of a bounded loss."""
        worst = -math.inf
        for direction in self._directions():
            tot, sup = self._chernoff_table(direction, L, n)
            if at >= sup:
                continue
            with np.errstate(invalid="ignore"):
                worst = max(worst, min(float(np.nanmin(tot - _LAMS * at)), 0.0))
        return worst

    def _needed_L(self, L: float, n: int, log_target: float) -> float:
        """Smallest ``L'`` whose estimated mass above ``L'`` is at most ``e^log_target``:
        ``min_j (K(lam_j) - log_target) / lam_j`` over the tilt grid, capped at the total
        supremum of a bounded loss (the maximum over the directions)."""
        need = 0.0
        for direction in self._directions():
            tot, sup = self._chernoff_table(direction, L, n)
            with np.errstate(invalid="ignore"):
                cand = float(np.nanmin((tot - log_target) / _LAMS))
            need = max(need, min(cand, sup))
        return need

    # --- what no window resolves: estimated before any work, and the rounding after ----------
    def _refuse_unreachable(self, target: float, delta: float | None = None) -> None:
        """Refuse before any work a query that would be refused after it: ``delta`` below
        what a float64 FFT resolves (:data:`MIN_RESOLVED_DELTA`), or a composed loss whose
        mass above the largest admissible ``L`` provably exceeds what the answer ``target``
        allows (:func:`tightdp.accountants.fft_limits.log_tail_lower`, a lower bound on that
        mass, below the Chernoff estimate that would refuse it after the quadratures)."""
        if delta is not None and delta < MIN_RESOLVED_DELTA:
            raise ValueError(
                f"delta: {delta:g} is below what the Fourier accountant resolves (its float64 "
                f"FFT rounds every point by at least 1e-16 of the largest; delta >= "
                f"{MIN_RESOLVED_DELTA:.2g} at the most points); use the pld accountant")
        if self.allow_truncation:
            return
        limit = MAX_L if self.auto_L else self.L
        share = TAIL_WIDEN if self.auto_L else TAIL_REFUSE
        for direction in self._directions():
            terms = [(m.privacy_losses()[direction], k) for m, k in self.terms]
            log_mass = log_tail_lower(terms, limit)
            if log_mass > math.log(share * target):
                where = (f"above the largest L = {MAX_L:g} of the Fourier accountant"
                         if self.auto_L else f"above L = {limit:g}")
                raise ValueError(
                    f"L: the answer lies beyond the domain: the composed loss has mass >= "
                    f"{math.exp(log_mass):.2g} {where}, more than "
                    f"{'delta' if delta is not None else 'the answer'} allows; "
                    + ("use the pld accountant" if self.auto_L else
                       "leave L unset to widen the domain automatically, or use the pld "
                       "accountant"))

    def _rounding(self, eps: np.ndarray, L: float, n: int) -> np.ndarray:
        """Estimated float64 rounding of delta(eps) (5.2): the largest over the composed
        directions (:meth:`_Curve.rounding`)."""
        return np.max([self._curve(dr, L, n).rounding(eps) for dr in self._directions()],
                      axis=0)

    def _check_resolved(self, delta: float, eps: float, L: float, n: int) -> float:
        """The estimated rounding of delta(eps) at the answer, or a refusal naming delta
        where it reaches ``ROUND_REFUSE * delta`` (the eps found there may be far below the
        true one)."""
        if not math.isfinite(eps):
            return 0.0
        rnd = float(self._rounding(np.asarray([eps]), L, n)[0])
        if rnd >= ROUND_REFUSE * delta:
            raise ValueError(
                f"delta: {delta:g} is below what the Fourier accountant resolves here: the "
                f"float64 rounding of its FFT moves delta(eps) by about {rnd:.2g} near "
                f"eps = {eps:.4g} (L={L:g}, n={n}); use the pld accountant")
        return rnd

    # --- the window ----------------------------------------------------------------------------
    def _grow(self, L_need: float) -> tuple[float, int]:
        """The window ``[-L', L']`` with ``L' >= L_need`` and the starting grid step
        ``2L/n`` (``n' = n L'/L``, an FFT-friendly even length), or a refusal naming ``L``."""
        d = 2.0 * self.L / self.n
        domain = f"[-{self.L:g}, {self.L:g}]"
        if not self.auto_L:
            raise ValueError(
                f"L: the answer lies beyond the domain [-L, L] = {domain} (the composed loss "
                f"has estimated mass above L that matters); it needs L >= {L_need:.4g}; leave "
                "L unset to widen the domain automatically, or use the pld accountant")
        # refused before any length is formed: a length beyond MAX_L can exceed the
        # integers next_fast_len takes (2^63)
        n_new = next_fast_len(int(math.ceil(min(L_need, MAX_L) / self.L * self.n)), real=True)
        while n_new % 2:
            n_new = next_fast_len(n_new + 1, real=True)
        L_new = n_new * d / 2.0
        if not L_need <= MAX_L or L_new > MAX_L:
            raise ValueError(
                f"L: the answer lies beyond the domain {domain}; it needs L >= {L_need:.4g}, "
                f"beyond the largest L = {MAX_L:g} of the Fourier accountant; use the pld "
                "accountant")
        self.budget.check_memory(
            self._bytes(n_new), "L",
            f"the answer lies beyond the domain {domain} and keeping the grid step {d:.3g} "
            f"needs L >= {L_need:.4g} (n >= {n_new}); use the pld accountant")
        return L_new, n_new

    def _use_window(self, L: float) -> None:
        """Drop the cached arrays of other windows (one window's arrays are kept)."""
        for key in [k for k in self._cache if isinstance(k, tuple) and len(k) > 2
                    and k[0] in ("single", "curve", "chernoff", "logw") and k[1] != L]:
            del self._cache[key]

    def _try_grow(self, L_need: float) -> tuple[float, int] | None:
        """:meth:`_grow`, or None where it refuses and ``allow_truncation`` is set."""
        try:
            return self._grow(L_need)
        except ValueError:
            if not self.allow_truncation:
                raise
            return None

    def _first_window(self, grow: bool, L_need: float, why: str) -> tuple[float, int, str]:
        """``(L, n, note)`` of a query's first window: the constructor's, or if ``grow``
        the one :meth:`_try_grow` gives for ``L_need`` (with ``allow_truncation``, where it
        refuses, the constructor's and the note that the answer is truncated)."""
        if not grow:
            return self.L, self.n, ""
        grown = self._try_grow(L_need)
        if grown is None:
            return self.L, self.n, f"; {why}: truncated, increase L"
        return grown[0], grown[1], ""

    def _refuse_or_note(self, L: float, n: int, why: str) -> str:
        """A refusal (explicit L, or nothing left to widen), or with ``allow_truncation`` the
        note that goes with the truncated number."""
        if self.allow_truncation:
            return f"; {why}: the estimate is truncated, increase L"
        raise ValueError(f"L: {why} (domain [-{L:g}, {L:g}], n={n}); "
                         + ("leave L unset to widen the domain automatically, or use the pld "
                            "accountant" if not self.auto_L else "use the pld accountant"))

    # --- error estimates ---------------------------------------------------------------------
    def _tail_estimates(self, L: float, n: int) -> dict:
        """Estimates of the P-mass of the composed loss beyond L (Koskela et al. 2020,
        Sec. 7.2): (7.3) where every term is a Poisson-subsampled Gaussian, and the Chernoff
        bound ``min_lam exp(sum_i k_i K_i(lam) - lam L)`` for every mechanism."""
        out: dict = {}
        pois = [(m, k) for m, k in self.terms if isinstance(m, PoissonSubsampled)
                and isinstance(m.base, Gaussian) and m.q < 1]
        if len(pois) == len(self.terms):
            lam = L / 2.0
            log73 = sum(k * m.q ** 2 * (lam + 1.0) * lam
                        / ((1.0 - m.q) * (cast(Gaussian, m.base).sigma
                                          / cast(Gaussian, m.base).sensitivity) ** 2)
                        for m, k in pois) - lam * L
            out["tail_estimate_73"] = math.exp(min(log73, 0.0))
        out["tail_chernoff"] = math.exp(self._log_tail(L, n, L))
        out["tail_estimate"] = max(out.get("tail_estimate_73", 0.0), out["tail_chernoff"])
        return out

    def _mass_defect(self, L: float, n: int) -> float:
        """Relative error of the total mass of the composed law: the Riemann weights of one
        step need not sum to the P-mass they stand for, and the k-th power amplifies it."""
        log_f = 0.0
        for m, k in self.terms:
            worst = 0.0
            for direction in self._directions():
                p = self._single(m, direction, L, n)
                inside = 1.0 - p.meta["mass_below"] - p.meta["mass_above"] - p.inf_mass
                tot = float(p.probs.sum())
                if inside <= 0 or tot <= 0:
                    return math.inf
                lf = k * math.log(tot / inside)
                worst = lf if abs(lf) > abs(worst) else worst
            log_f += worst
        return abs(math.expm1(min(log_f, 700.0)))
