"""FFT composition of discrete PLDs: the one composition engine of the library.

``compose([(pld_1, k_1), ..., (pld_b, k_b)])`` returns the P-law of ``sum_i sum_{r<=k_i} Y_ir``
for independent losses, on the common grid. Each distinct PLD is transformed once and raised
to its count in the Fourier domain (Koskela et al. 2020, Alg. 1; Gopi et al. 2021, Alg. 1),
so ``b`` distinct mechanisms with any counts cost ``O(b N log N)``.

Circular convolution on ``N`` points folds the composed law modulo ``N``. The window of ``N``
points is placed by a Chernoff bound computed exactly from the discrete laws
(``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` for ``t >= 0`` and its mirror for the lower
tail), so that the mass outside it, which is what gets folded, is at most ``tail`` in each
direction. The returned :class:`ComposedPLD` carries those bounds, and the queries use them in
the direction of the bound: an upper bound adds the mass that may lie above the window, a
lower bound subtracts the most that folded-in mass could contribute.

Optionally the laws are exponentially tilted by ``e^{lam y}`` before the transform (the
Esscher transform; Alghamdi et al., Sec. 4, use the same tilt for the saddle point): this
centres the composed law near the eps of interest so that ``delta`` far in the tail (1e-15
and below) is computed from values of order one instead of from FFT rounding noise.

Three entry points share the transform (``_circular_product``), the tilt (:func:`tilt`), the
mass at +infinity (:func:`composed_inf_mass`) and the discrete log-MGF
(:func:`tightdp.pld.grid.atom_log_mgf`): :func:`compose` (the PLD accountant: window placed
by Newton's method on the Chernoff bound), :func:`compose_grid_chernoff` (the PRV
accountant: window placed by the Chernoff bound on a fixed grid of parameters) and
:func:`compose_fixed_window` (the Fourier accountant: the window of the paper, no bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import fft as sfft
from scipy.special import logsumexp

from .._numerics import UNIT_ROUNDOFF, BracketError, bisect, grow_until, newton_scalar
from ..budget import BudgetExceeded
from .grid import DiscretePLD, atom_cumulants, tail_sums

__all__ = ["CHERNOFF_TS", "UNIT_ROUNDOFF_EXTENDED", "ChernoffWindow", "ComposedPLD", "LogMgf",
           "chernoff_window", "compose", "compose_on_window", "fft_sizer", "grid_terms",
           "compose_fixed_window", "compose_grid_chernoff", "composed_inf_mass", "round_rel",
           "tilt"]

MAX_POINTS = 1 << 25


#: the largest |t| the Chernoff searches try (beyond it the bound is the support's end)
_T_MAX = 1e9
#: laws with more atoms than this are searched on a coarsened copy (LogMgf.searcher)
_SEARCH_ATOMS = 1 << 14


class LogMgf:
    """``K(t) = sum_i k_i log E[e^{t Y_i}]`` of a composition of finite laws, with ``K'`` and
    ``K''``, evaluated exactly from the atoms; and the Chernoff bounds built from it:
    ``P(S >= a) <= exp(K(t) - t a)`` for every ``t >= 0`` (``P(S <= a)`` for ``t <= 0``).
    Any ``t`` gives a valid bound; Newton's method only makes it a good one."""

    def __init__(self, terms):
        self.parts = []
        lo = hi = 0.0
        for pld, k in terms:
            pos = pld.probs > 0
            if not pos.any():
                continue
            ys = pld.ys[pos]
            self.parts.append((ys, np.log(pld.probs[pos]), k))
            lo += k * float(ys[0])
            hi += k * float(ys[-1])
        self.lo, self.hi = lo, hi
        self._quantiles: dict = {}  # memo of quantile(), asked again for the same tails
        self._search: LogMgf | None = None  # the coarsened copy of searcher()

    def __call__(self, t: float) -> tuple[float, float, float]:
        kk, k1, k2 = self.cumulants(np.array([float(t)]))
        return float(kk[0]), float(k1[0]), float(k2[0])

    def cumulants(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``K``, ``K'``, ``K''`` at every ``t`` of ``ts`` (``atom_cumulants`` of each law)."""
        ts = np.atleast_1d(np.asarray(ts, dtype=float))
        kk, k1, k2 = (np.zeros(ts.size) for _ in range(3))
        for ys, lp, k in self.parts:
            a, b, c = atom_cumulants(ys, lp, ts)
            kk += k * a
            k1 += k * b
            k2 += k * c
        return kk, k1, k2

    def solve_slope(self, target: float) -> float:
        """The ``t >= 0`` with ``K'(t) = target`` (0 if ``K'(0) >= target``; the end of the
        search if the law cannot reach it): safeguarded Newton, ``K'`` being increasing."""
        _, k1, k2 = self(0.0)
        if k1 >= target or not self.parts or target >= self.hi:
            return 0.0 if k1 >= target or not self.parts else 1e4
        # a bracket [lo, hi] first (K' is increasing; powers of 4 up to 1e6), then Newton kept
        # inside it: a Newton step from a nearly degenerate law (K'' ~ 0 at t = 0, e.g. a tiny
        # sampling rate) overshoots by orders of magnitude, and the search once stopped at its
        # cap there
        try:
            hi = grow_until(lambda x: self(x)[1] < target, 1.0, 4.0, limit=1e6,
                            what="the tilt")
        except BracketError:
            return 1e6
        lo = 0.0 if hi == 1.0 else hi / 4.0

        def slope(t: float) -> tuple[float, float]:
            _, k1, k2 = self(t)
            return k1 - target, k2

        return newton_scalar(slope, 0.5 * (lo + hi), lo, hi, iters=101, rtol=1e-10, floor=1.0,
                             width_rtol=1e-12)[0]

    def tilt_to_mean(self, target: float) -> float:
        """The tilt ``lam >= 0`` whose tilted composed law has mean ``K'(lam) = target``, by
        doubling up to ``2^24`` and 30 bisection steps (``K'`` increases with ``lam``); 0 if
        ``K'(0) >= target``, close to ``2^24`` if the law cannot reach it. The tilt of the
        PRV accountant's compositions (which rounds it to a quarter power of two, so the
        coarse tolerance is enough); :meth:`solve_slope` is the precise search of the PLD
        accountant."""
        if self(0.0)[1] >= target:
            return 0.0
        hi = grow_until(lambda x: x < 2.0 ** 24 and self(x)[1] < target, 1.0, 2.0)
        lo = 0.0 if hi == 1.0 else hi / 2.0
        return bisect(lambda m: self(m)[1] < target, lo, hi, keep="lo", xtol=0.0, iters=30)

    def log_bound(self, a: float, sign: int) -> float:
        """log of a Chernoff bound on ``P(S >= a)`` (sign +1) or ``P(S <= a)`` (sign -1):
        ``min K(t) - t a`` over ``sign * t >= 0`` by safeguarded Newton (``K`` is convex)."""
        if (sign > 0 and a > self.hi) or (sign < 0 and a < self.lo):
            return -math.inf
        k0, k1, k2 = self(0.0)
        best = min(k0, 0.0)
        if sign * (a - k1) <= 0:
            return best
        t = (a - k1) / k2 if k2 > 0 else sign * 1.0

        def gap(u: float) -> tuple[float, float]:
            # in u = |t| = sign t: sign (K'(t) - a), increasing; records the smallest bound
            nonlocal best
            kk, k1, k2 = self(sign * u)
            best = min(best, kk - sign * u * a)
            return sign * (k1 - a), k2

        newton_scalar(gap, sign * t, 0.0, iters=40, rtol=1e-6, x_max=_T_MAX)
        return best

    def quantile(self, log_mass: float, sign: int) -> tuple[float, float, float]:
        """A point ``a`` with ``log_bound(a, sign) <= log_mass``: ``a = (K(t) - log_mass) / t``
        for the ``t`` that makes it smallest (largest for sign -1), found by Newton's method on
        ``t K'(t) - K(t) + log_mass`` (increasing in ``|t|``). Returns ``(a, t, K(t))``; the
        same ``t`` bounds the tail beyond any other point ``b`` by ``K(t) - t b``. ``t = 0``
        means the whole law is within the bound (or ``a`` is the end of its support).
        Remembered per ``(log_mass, sign)``."""
        key = (log_mass, sign)
        if key not in self._quantiles:
            self._quantiles[key] = self._quantile(log_mass, sign)
        return self._quantiles[key]

    def searcher(self) -> LogMgf:
        """This log-MGF, or, when a law has more than ``_SEARCH_ATOMS`` atoms, a copy whose
        laws are coarsened to at most that many (consecutive atoms merged: their masses
        added, at their mean position): cheap to evaluate, and within ``|t|`` times the
        merged span of ``K(t)``. Only the searches for a good ``t`` use it; the bounds are
        always evaluated exactly at the ``t`` found."""
        if self._search is None:
            if all(ys.size <= _SEARCH_ATOMS for ys, _, _ in self.parts):
                self._search = self
            else:
                coarse = LogMgf([])
                for ys, lp, k in self.parts:
                    if ys.size > _SEARCH_ATOMS:
                        g = -(-ys.size // _SEARCH_ATOMS)
                        pad = (-ys.size) % g
                        y2 = np.concatenate([ys, np.full(pad, ys[-1])]).reshape(-1, g)
                        l2 = np.concatenate([lp, np.full(pad, -np.inf)]).reshape(-1, g)
                        ys, lp = y2.mean(axis=1), logsumexp(l2, axis=1)
                    coarse.parts.append((ys, lp, k))
                coarse.lo, coarse.hi = self.lo, self.hi
                self._search = coarse
        return self._search

    def _quantile(self, log_mass: float, sign: int) -> tuple[float, float, float]:
        end = self.hi if sign > 0 else self.lo
        k0, k1, k2 = self(0.0)
        if k0 <= log_mass:
            return k1, 0.0, k0
        L = k0 - log_mass  # > 0
        t = sign * math.sqrt(2.0 * L / k2) if k2 > 0 else sign * 1.0
        best = (end, 0.0, k0)
        search = self.searcher()

        def slope(u: float) -> tuple[float, float]:
            # in u = |t| = sign t: h = t K'(t) - K(t) + log_mass (increasing in u; the
            # derivative of a(t) has the sign of h / t); records the best point a
            nonlocal best
            t = sign * u
            kk, k1, k2 = search(t)
            a = (kk - log_mass) / t
            if sign * (a - best[0]) < 0:
                best = (a, t, kk)
            return t * k1 - kk + log_mass, sign * (t * k2)

        newton_scalar(slope, sign * t, 0.0, iters=40, rtol=1e-3, x_max=_T_MAX)
        if search is not self and best[1] != 0.0:  # the point from the exact K at that t
            kk = self(best[1])[0]
            best = ((kk - log_mass) / best[1], best[1], kk)
        if sign * (best[0] - end) >= 0:
            return end, 0.0, k0
        return best

    @staticmethod
    def bound_with(q: tuple[float, float, float], b: float, sign: int, end: float) -> float:
        """log bound on the mass beyond ``b`` from a :meth:`quantile` result (``-inf`` past
        the end of the support)."""
        a, t, kk = q
        if sign * (b - end) > 0:
            return -math.inf
        if t == 0.0:
            return min(kk, 0.0)
        return min(kk - t * b, kk, 0.0)


@dataclass
class ComposedPLD:
    """Composed P-law on a window of the grid, with the bounds on what lies outside.

    ``probs`` are the values in the (possibly tilted) measure; ``log_scale - lam * y`` converts
    them back: the original mass at ``y`` is ``probs * exp(log_scale - lam * y)``.
    """

    d: float
    offset: int
    probs: np.ndarray
    inf_mass: float
    lam: float
    log_scale: float
    log_tail_above: float  # log bound on original P-mass above the window
    log_tail_below: float  # log bound on original P-mass below the window
    log_fold: float  # log bound on tilted mass folded into the window
    shift: float = 0.0
    log_noise: float = -math.inf  # log bound on the FFT's rounding error per point (tilted)
    #: rounding of the single-step laws, relative to the mass from eps's grid point up (see
    #: :meth:`delta_bound`)
    round_rel: float = 0.0
    #: memos of the original-measure masses and of their tail sums, per bound direction
    _mass_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _sum_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: per bound direction, the highest window index whose untilted mass was capped (-1: none)
    _cap_memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def ys(self) -> np.ndarray:
        """The loss values of the window's points."""
        return self.shift + (self.offset + np.arange(self.probs.size)) * self.d

    def _mass(self, upper: bool) -> np.ndarray:
        """Original-measure masses on the window (negative rounding noise clipped to 0 for the
        upper bound, which can only raise it; kept for the lower, which it can only lower)."""
        cache = self._mass_memo
        if upper not in cache:
            p = np.maximum(self.probs, 0.0) if upper else self.probs
            self._cap_memo[upper] = -1
            if self.lam == 0.0 and abs(self.log_scale) < 700.0:
                # untilted (only normalized): one factor, no logarithms of the whole window
                p = p * math.exp(self.log_scale)
            elif self.lam != 0.0 or self.log_scale != 0.0:
                # untilt in log space; magnitudes are capped (far below the tilt centre the
                # values are rounding noise and only the queries near the centre use them)
                nz = p != 0
                with np.errstate(over="ignore", under="ignore", divide="ignore"):
                    lg = (np.log(np.abs(np.where(nz, p, 1.0))) + self.log_scale
                          - self.lam * self.ys)
                    p = np.where(nz, np.sign(p) * np.exp(np.minimum(lg, 700.0)), 0.0)
                capped = np.flatnonzero(nz & ~(lg <= 700.0))
                # the sums over a capped mass are not the law's: the bounds there are the
                # trivial ones (_trivial)
                self._cap_memo[upper] = int(capped[-1]) if capped.size else -1
            cache[upper] = p
        return cache[upper]

    def _sums(self, upper: bool, start: int = 0
              ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """``(start', ys, S0, T)``: tail sums (see ``tail_sums``) of the original-measure
        masses from grid index ``start' <= start`` on. Tail sums depend only on the atoms
        above, so a suffix serves every query at or above its first point."""
        cache = self._sum_memo
        hit = cache.get(upper)
        if hit is None or hit[0] > start:
            p = self._mass(upper)[start:]
            with np.errstate(over="ignore"):  # sums over capped masses: see _trivial
                hit = (start, self.ys[start:], *tail_sums(p, self.d))
            cache[upper] = hit
        return hit

    def _start_for(self, delta: float, upper: bool) -> int:
        """A grid index below which the bound on delta exceeds ``delta`` (so the search for
        eps(delta) may start there): at ``y_i`` the curve is at least
        ``(1 - e^{-m d}) S0[i + m]``, half of it for ``m d >= log 2``."""
        p = self._mass(upper)
        s0 = np.cumsum(np.maximum(p, 0.0)[::-1])[::-1]
        big = np.nonzero(s0 > 2.0 * delta)[0]
        if not big.size:
            return 0
        m = int(math.ceil(math.log(2.0) / self.d)) + 1
        return max(int(big[-1]) - m - 1, 0)

    def _noise(self, eps: np.ndarray, m: np.ndarray | None = None) -> np.ndarray:
        """The most the FFT's rounding can contribute to ``delta(eps)``: a per-point error of
        at most ``e^log_noise`` in the tilted measure is ``e^{log_noise + log_scale - lam y}``
        in the original one, summed with the weights ``1 - e^{eps - y}`` over the points
        above ``eps`` (two geometric series, in closed form). Untilting amplifies the
        rounding of points below the tilt's centre exponentially: this term is what keeps
        both bounds honest there (a poorly placed tilt gives a loose bound, not a wrong
        one). ``m``, if given, is the window index of the first point above each eps (the
        grid queries know it; otherwise it is searched for)."""
        eps = np.asarray(eps, dtype=float)
        if self.log_noise == -math.inf:
            return np.zeros(eps.shape)
        n, d, lam = self.probs.size, self.d, self.lam
        if m is None:
            m = np.searchsorted(self.ys, eps, side="right")
        cnt = (n - m).astype(float)
        ym = self.shift + (self.offset + m) * d  # first point above eps

        def log_geo(rate: float) -> np.ndarray:  # log sum_{i < cnt} e^{-rate d i}
            if rate == 0.0:
                return np.log(np.maximum(cnt, 1.0))
            x = rate * d
            return np.log(-np.expm1(-x * np.maximum(cnt, 1.0))) - math.log(-math.expm1(-x))

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            l1 = self.log_noise + self.log_scale - lam * ym + log_geo(lam)
            l2 = self.log_noise + self.log_scale - lam * ym + (eps - ym) + log_geo(lam + 1.0)
            out = np.exp(np.minimum(l1, 709.0)) * -np.expm1(np.minimum(l2 - l1, 0.0))
            out = np.where(l1 > 709.0, np.inf, out)
        return np.where(cnt > 0, out * (1 + 1e-9), 0.0)

    def rounding_charge(self, eps) -> np.ndarray:
        """The FFT's rounding charge at ``eps`` (what both bounds on delta(eps) carry for it,
        :meth:`_noise`): a caller compares it with delta to decide whether an extended-
        precision composition (``compose(..., extended=True)``) would pay."""
        return self._noise(np.asarray(eps, dtype=float))

    def _extra(self, eps: np.ndarray, upper: bool, m: np.ndarray | None = None) -> np.ndarray:
        """What the bound adds (upper) or subtracts (lower) for mass outside the window and
        for the FFT's rounding (:meth:`_noise`; ``m`` as there)."""
        ys = self.ys
        if upper:
            below = np.where(eps < ys[0], math.exp(self.log_tail_below), 0.0)
            return self.inf_mass + math.exp(self.log_tail_above) + below + self._noise(eps, m)
        # folded-in tilted mass contributes at most fold * max_{y > eps} e^{log_scale - lam y}
        if self.lam >= 0:
            worst = self.log_scale - self.lam * eps
        else:
            worst = np.full_like(eps, self.log_scale - self.lam * ys[-1])
        with np.errstate(over="ignore"):
            fold = np.exp(np.minimum(self.log_fold + worst, 709.0))
            fold = np.where(self.log_fold + worst > 709.0, np.inf, fold)
        return self.inf_mass - fold - self._noise(eps, m)

    def _rounding(self, s0: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The rounding allowance of the single-step laws for the bound whose lowest atom
        counted is ``idx`` (tail sums ``s0`` of the masses, see ``tail_sums``): the masses
        are split between grid points by ratios of P- and Q-masses computed to a relative
        ~u, so each step may move about u of the mass near eps across it, ``round_rel``
        times the mass from the grid point below on (absolute, not relative to delta: it
        mattered at q = 1e-9, where delta(0) is 4e-10 and the bulk of the mass sits at 0);
        0 above the window's last point, where there is no mass."""
        rnd = self.round_rel * np.maximum(s0[np.maximum(idx - 1, 0)], 0.0)
        return np.where(idx >= s0.size - 1, 0.0, rnd)

    def _trivial(self, upper: bool, index: np.ndarray) -> np.ndarray:
        """Where a bound's sums (from window ``index`` up) include a mass that the untilt had
        to cap (far below a strong tilt's centre, where ``e^{log_scale - lam y}`` overflows):
        there the sums are not the law's, and the bound is the trivial one (1 for the upper,
        0 for the lower)."""
        self._mass(upper)
        return index <= self._cap_memo[upper]

    def delta_bound(self, eps, upper: bool) -> np.ndarray:
        """Certified upper or lower bound on ``delta(eps)`` of the composed pair (the trivial
        one, 1 or 0, where the untilted masses overflow: :meth:`_trivial`)."""
        eps = np.asarray(eps, dtype=float)
        first = int(np.searchsorted(self.ys, np.min(eps), side="right")) if eps.size else 0
        start, ys, s0, t = self._sums(upper, max(first - 1, 0))
        idx = np.searchsorted(ys, eps, side="right")
        safe = np.minimum(idx, ys.size - 1)
        with np.errstate(over="ignore", invalid="ignore"):
            val = s0[idx] - np.exp(np.minimum(eps - ys[safe], 0.0)) * t[idx]
        val = np.where(idx >= ys.size, 0.0, val)
        rnd = self._rounding(s0, idx)
        bad = self._trivial(upper, start + idx)
        if upper:
            # round toward more loss: a relative 1e-10 covers the floating-point rounding
            # of the sums; the FFT's own rounding is in _extra (_noise)
            val = np.maximum(val, 0.0) * (1 + 1e-10) + rnd
            return np.where(bad, 1.0, np.clip(val + self._extra(eps, upper), 0.0, 1.0))
        return np.where(bad, 0.0, np.clip((val + self._extra(eps, upper) - rnd) * (1 - 1e-10),
                                          0.0, 1.0))

    def grid_bound(self, upper: bool, start: int = 0, stop: int | None = None
                   ) -> tuple[int, np.ndarray, np.ndarray]:
        """``(start', ys, bound)``: the certified upper or lower bound on delta at the grid
        points of the window from index ``start'`` (``start`` itself if ``stop`` is given,
        else possibly lower) to ``stop`` (the end by default), what :meth:`delta_bound`
        gives there, in closed form: at ``y_i`` the atoms counted are those above it, so the
        curve is ``S0[i+1] - e^{-d} T[i+1]`` and the first point above is known (no search
        over the grid, which dominated the PRV accountant's query on millions of points)."""
        first, ys, s0, t = self._sums(upper, start)
        a = 0 if stop is None else start - first
        b = ys.size if stop is None else min(stop, self.probs.size) - first
        start = first + a
        ys = ys[a:b]
        val = s0[a + 1:b + 1] - math.exp(-self.d) * t[a + 1:b + 1]
        nxt = np.arange(a + 1, b + 1)
        rnd = self._rounding(s0, nxt)
        ex = self._extra(ys, upper, first + nxt)
        bad = self._trivial(upper, first + nxt)
        if upper:
            return start, ys, np.where(bad, 1.0, np.clip(
                np.maximum(val, 0.0) * (1 + 1e-10) + rnd + ex, 0.0, 1.0))
        return start, ys, np.where(bad, 0.0, np.clip((val + ex - rnd) * (1 - 1e-10), 0.0, 1.0))

    def epsilon_bound(self, delta: float, upper: bool) -> float:
        """Smallest eps >= 0 at which the bound on delta(eps) is <= delta: a monotone search
        over the grid, then the closed form ``S0 - e^eps S1 + extra = delta`` on the bracketing
        interval (bisection when the extra term depends on eps)."""
        start = self._start_for(delta, upper)
        while True:
            start, ys, d_grid = self.grid_bound(upper, start)
            _, _, s0, t = self._sums(upper, start)
            # the crossing is located from the right: the curve is monotone, and for a tilted
            # law the values far below the tilt centre carry amplified rounding noise
            above = np.nonzero(d_grid > delta)[0]
            if start == 0 or above.size:
                break
            start = 0  # the crossing is not in the suffix after all: search everything
        if above.size and above[-1] == ys.size - 1:
            return math.inf
        i = int(above[-1]) + 1 if above.size else 0
        if i == 0 and not upper:
            # no grid point has the lower curve above delta. Any eps at which it is above
            # delta is below the true eps(delta); below the window the curve is
            # S0 - e^{eps - y_0} T + extra(eps), not monotone (the extra charges grow below
            # a tilt's centre): try the crossing of its first two terms, else 0
            if s0[0] > delta and t[0] > 0:
                e = float(ys[0]) + math.log((s0[0] - delta) / t[0])
                e -= 1e-9 * max(1.0, abs(e))
                if e > 0 and float(self.delta_bound(np.asarray(e), False)) > delta:
                    return e
            return 0.0
        if i == 0:
            lo, hi = float(ys[0]) - 1.0, float(ys[0])
            if float(self.delta_bound(np.asarray(lo), upper)) <= delta:
                return max(0.0, lo)
        else:
            lo, hi = float(ys[i - 1]), float(ys[i])
        if t[i] > 0:
            # solve (S0 - e^{eps - y_i} T + extra) * (1 +- 1e-10) = delta on (lo, hi]
            rnd = float(self._rounding(s0, np.asarray(i)))
            if upper:
                # the added terms taken at their largest over the interval, at its left end
                # (each is non-increasing in eps): a larger curve, so the eps found is still
                # an upper bound, and the check below passes without a bisection
                ex = float(self._extra(np.asarray(lo), True)) + rnd
                ratio = (max(s0[i], 0.0) - (delta - ex) / (1 + 1e-10)) / t[i]
            else:
                # the subtracted fold term taken at its largest over the interval: a smaller
                # curve, so the eps found is still a lower bound
                ex = float(np.min(self._extra(np.array([lo, hi]), False))) - rnd
                ratio = (s0[i] + ex - delta / (1 - 1e-10)) / t[i]
            if ratio > 0 and math.isfinite(ratio):
                e = float(ys[i]) + math.log(ratio)
                e = max(min(max(e, lo), hi), 0.0)
                if not upper:
                    return e
                # the upper side is guarded by the evaluation itself (a few ulps up if the
                # rounding of the closed form left it just short)
                for _ in range(4):
                    if float(self.delta_bound(np.asarray(e), True)) <= delta:
                        return e
                    e = min(e + 4e-16 * max(1.0, abs(e)), hi)
        # the end kept is the one where the bound is <= delta
        hi = bisect(lambda m: not float(self.delta_bound(np.asarray(m), upper)) <= delta,
                    lo, hi, keep="hi", xtol=1e-13, floor=1.0, iters=100)
        return max(hi, 0.0)


def composed_inf_mass(terms) -> float:
    """``P(at least one loss is +inf) = 1 - prod_i (1 - inf_mass_i)^k_i`` of a composition of
    ``terms`` ((pld, count) pairs), computed in log space."""
    log_fin = sum(k * math.log1p(-p.inf_mass) if p.inf_mass < 1 else -math.inf for p, k in terms)
    return -math.expm1(log_fin) if log_fin > -math.inf else 1.0


def tilt(terms, lam: float) -> tuple[list[tuple[DiscretePLD, int]], float]:
    """The finite laws of ``terms`` ((pld, count) pairs on one grid) exponentially tilted by
    ``e^{lam y}`` and normalized (the Esscher transform; ``lam = 0`` only normalizes), and
    ``log_scale = sum_i k_i c_i`` with ``c_i`` the log normalizer of law ``i``: the original
    composed mass at ``y`` is the tilted one times ``exp(log_scale - lam y)``.

    The normalizer is scipy's ``logsumexp`` of the tilted log weights: it equals
    :func:`tightdp.pld.grid.atom_log_mgf` at ``lam`` to within an ulp, but the PLD
    accountant's numbers (its grid-step search amplifies an ulp) were computed with it."""
    d = terms[0][0].d
    out = []
    log_scale = 0.0
    for p, k in terms:
        if lam == 0.0:
            tot = float(p.probs.sum())
            c = math.log(tot) if tot > 0 else 0.0
            w = p.probs / tot if tot > 0 else p.probs
        else:
            pos = p.probs > 0
            lw = np.full(p.probs.size, -np.inf)
            lw[pos] = np.log(p.probs[pos]) + lam * p.ys[pos]
            c = logsumexp(lw[pos]) if pos.any() else 0.0
            w = np.exp(lw - c)
        out.append((DiscretePLD(d, p.offset, w, 0.0, shift=p.shift), k))
        log_scale += k * c
    return out, log_scale


def compose(terms: list[tuple[DiscretePLD, int]], *, log_tail: float = -80.0,
            lam: float = 0.0, max_points: int = MAX_POINTS, workers: int | None = None,
            extended: bool = False) -> ComposedPLD:
    """Compose ``count`` copies of each PLD; see the module docstring.

    Parameters
    ----------
    terms : list of (pld, count); all PLDs share one grid step.
    log_tail : log of the mass allowed outside the window on each side (tilted measure).
    lam : exponential tilt (0 = none).
    max_points : refuse (ValueError) rather than allocate a larger FFT.
    extended : forward transforms (and the powering where it matters) in long double: a
        bound on the FFT's rounding about 2000 times smaller for long compositions, at about
        three times the transform's cost (see :func:`_circular_product`).
    """
    terms = [(p.trimmed(), int(k)) for p, k in terms if int(k) > 0]
    if not terms:
        return ComposedPLD(1.0, 0, np.ones(1), 0.0, 0.0, 0.0, -math.inf, -math.inf, -math.inf)
    d = terms[0][0].d
    if any(abs(p.d - d) > 1e-15 * d for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid step")
    inf_mass = composed_inf_mass(terms)
    tilted, log_scale = tilt(terms, lam)
    # window from Chernoff bounds on the tilted composed law
    S = sum(k * t.shift for t, k in tilted)  # total grid shift of the composed law
    lo_min = S + sum(k * t.offset for t, k in tilted) * d
    hi_max = S + sum(k * (t.offset + t.probs.size - 1) for t, k in tilted) * d
    ch_t = LogMgf(tilted)
    ch_o = ch_t if lam == 0.0 else LogMgf(terms)
    q_hi, q_lo = ch_t.quantile(log_tail, +1), ch_t.quantile(log_tail, -1)
    a_hi, a_lo = min(q_hi[0], hi_max), max(q_lo[0], lo_min)
    i_lo = int(math.floor((a_lo - S) / d))
    i_hi = int(math.ceil((a_hi - S) / d))
    n = i_hi - i_lo + 1
    if n > max_points:
        raise BudgetExceeded(f"the composition needs an FFT of {n} points (> {max_points}); "
                             "ask for a looser tolerance")
    N = sfft.next_fast_len(n, real=True)
    res, log_noise = _circular_product(tilted, N, i_lo, workers, extended=extended)
    res = res[:n]
    # bounds on what lies outside the window, in the original measure (untilted Chernoff)
    top, bot = S + (i_hi + 1) * d, S + (i_lo - 1) * d
    inside_hi, inside_lo = S + i_hi * d < hi_max, S + i_lo * d > lo_min
    lt_hi = LogMgf.bound_with(q_hi, top, +1, hi_max) if inside_hi else -math.inf
    lt_lo = LogMgf.bound_with(q_lo, bot, -1, lo_min) if inside_lo else -math.inf
    if lam == 0.0:  # the tilted law is the original one, normalized (mass <= 1)
        log_above, log_below = lt_hi, lt_lo
    else:
        log_above = ch_o.log_bound(top, +1) if inside_hi else -math.inf
        log_below = ch_o.log_bound(bot, -1) if inside_lo else -math.inf
    log_fold = float(np.logaddexp(lt_hi, lt_lo))
    return ComposedPLD(d, i_lo, res, inf_mass, lam, log_scale, log_above, log_below, log_fold,
                       S, log_noise, round_rel(terms))


def round_rel(terms) -> float:
    """The rounding allowance of :attr:`ComposedPLD.round_rel` for a composition of
    ``terms`` ((pld, count) pairs): 16 u per composed step."""
    return 16.0 * UNIT_ROUNDOFF * sum(int(k) for _, k in terms)


#: constant of the FFT's pointwise error bound ``c u log2(N) sum |x|`` (every output of an
#: N-point transform is a sum over ``log2 N`` levels of butterflies, each adding a relative
#: error of at most a few ``u`` with accurately tabulated twiddle factors)
_C_FFT = 4.0


def _circular_product(terms, n: int, lo_index: int, workers: int | None,
                      noise_bound: bool = True, extended: bool = False
                      ) -> tuple[np.ndarray, float]:
    """The composed law folded modulo ``n``, position ``j`` holding grid index
    ``lo_index + j`` (mod n): each law is folded once (atom ``i`` to position
    ``(offset + i) mod n``), transformed once, and raised to its count in the Fourier domain
    (Koskela et al. 2020, Alg. 1; Gopi et al. 2021, Alg. 1).

    Also returns ``log_noise``, the log of a bound on the floating-point error of every
    output value. Each forward coefficient ``F_ij`` of law ``i`` is within
    ``e_i = (c log2 N + 4) u sum|x_i|`` of the exact one, and the powering multiplies in a
    relative error of a few ``u`` per product, so with ``a_ij = |F_ij|`` the product's
    coefficient is within ``prod_i (a_ij (1 + 4u) + e_i)^k_i - prod_i a_ij^k_i`` of the
    exact one (binomial expansion, all orders). The inverse transform's output at any point
    is then within the mean of those errors over the spectrum plus its own
    ``c u log2 N mean_j |G_j|``. The bound grows with the count (``F^k`` amplifies
    the forward error ``k``-fold), which is what it must do: at ``10^12`` compositions the
    FFT itself is only accurate to about ``10^-4`` of the peak. With ``noise_bound=False``
    (a caller that reports no bound) that work is skipped and ``log_noise`` is NaN; the law
    is the same to the bit.

    ``extended=True`` computes the forward transforms and the powering in numpy's long
    double (unit roundoff :data:`UNIT_ROUNDOFF_EXTENDED`, ``2^-64`` on x86-64: 2048 times
    smaller than double's; the same as double where long double is double, and then nothing
    is gained), at the frequencies where the composed magnitude is within ``e^-60`` of its
    largest; the others are set to 0 and their largest possible magnitude is added to the
    error (:func:`_circular_product_extended`). The bound above is evaluated with the
    long-double unit roundoff, plus ``2 u |G_j|`` for rounding the long-double product to
    double; the inverse transform stays in double (its error is not amplified by the
    counts). For long compositions of laws that are nearly a point mass (tiny sampling
    rates, 10^6 steps) the ``k``-fold amplified forward error is the bound's whole content,
    and it drops about 2000-fold (measured: Binomial(10^6, 2^-17), 6.1e-10 -> 3.0e-13 per
    point, the true errors 1.8e-12 and 1.3e-15); a long-double rfft takes about three times
    a double one (10^6 points: 0.094 s, 0.034 s), and the powering is only done where it
    matters.
    """
    if extended and noise_bound:
        return _circular_product_extended(terms, n, lo_index, workers)
    acc, logs = None, None
    lg2 = math.log2(max(n, 2))
    for p, k in terms:
        f = sfft.rfft(_fold(p, n), workers=workers)
        if noise_bound:
            e = (_C_FFT * lg2 + 4.0) * UNIT_ROUNDOFF * float(np.abs(p.probs).sum())
            logs = _add_logs(logs, _term_logs(np.abs(f), k, 4 * UNIT_ROUNDOFF, e))
        f = _int_power(f, k)
        acc = f if acc is None else np.multiply(acc, f, out=acc)
    if not noise_bound:
        res = sfft.irfft(acc, n=n, workers=workers)
        return np.roll(res, -(lo_index % n)), math.nan
    return _inverse_with_noise(acc, float(_coefficient_errors(*logs).sum()), n, lo_index,
                               workers, sum(k for _, k in terms))


def _term_logs(a: np.ndarray, k: int, c: float, e: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one law's transform magnitudes ``a`` (computed within ``e`` each) raised to
    ``k`` with a relative error of ``c`` per product: ``k log a``, ``k log1p(c + e/a)`` and
    ``k log(a (1 + c) + e)`` (the last for ``a = 0``), summed over the laws by
    :func:`_add_logs` and turned into the coefficient errors by :func:`_coefficient_errors`.
    The middle one keeps the small relative increments (``c`` and ``e/a`` may be far below
    the double spacing at ``a ~ 1``)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        la = k * np.log(a)
        dl = k * np.log1p(c + e / a)
        lb = la + dl  # the same where both are finite; directly elsewhere (a = 0, e/a = inf)
        bad = ~np.isfinite(lb)
        if bad.any():
            lb[bad] = k * np.log(a[bad] * (1.0 + c) + e)
    return la, dl, lb


def _add_logs(acc, logs):
    """Sum of :func:`_term_logs` over the laws (``acc`` None for the first)."""
    if acc is None:
        return list(logs)
    for x, y in zip(acc, logs, strict=True):
        np.add(x, y, out=x)
    return acc


def _coefficient_errors(log_a: np.ndarray, dlog: np.ndarray, log_b: np.ndarray
                        ) -> np.ndarray:
    """``prod_i (a_i (1 + c_i) + e_i)^k_i - prod_i a_i^k_i`` per frequency (the bound of
    :func:`_circular_product`) from the sums of :func:`_term_logs`:
    ``e^log_a expm1(dlog)``, or ``e^log_b`` where some ``a_i`` is 0 or the increment is
    huge (then the product of the ``a_i`` is negligible beside it)."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.exp(log_a) * np.expm1(np.minimum(dlog, 700.0))
    bad = ~(dlog < 700.0)  # NaN and inf included
    if bad.any():
        err[bad] = np.exp(log_b[bad])
    return err


def _inverse_with_noise(acc: np.ndarray, err_sum: float, n: int, lo_index: int,
                        workers: int | None, k_total: int) -> tuple[np.ndarray, float]:
    """The inverse transform of the product ``acc`` (rotated to the window) and the log of
    the bound on its pointwise error (:func:`_circular_product`): the mean over the
    (Hermitian) spectrum of the coefficient errors (``err_sum``: their sum over the half
    spectrum, evaluated with the magnitudes ``a_i`` as computed in double, each within a
    relative ``u`` of the transform's: hence the factor ``(1 + 2u)^k_total`` on it), plus the
    inverse transform's own ``(c log2 N + 4) u mean_j |G_j|``."""
    lg2 = math.log2(max(n, 2))
    mean_err = 2.0 * err_sum * math.exp(2.0 * UNIT_ROUNDOFF * k_total) / n
    mean_g = 2.0 * float(np.abs(acc).sum()) / n
    noise = mean_err + (_C_FFT * lg2 + 4.0) * UNIT_ROUNDOFF * mean_g
    res = sfft.irfft(acc, n=n, workers=workers)
    return np.roll(res, -(lo_index % n)), (math.log(noise) if noise > 0 else -math.inf)


#: unit roundoff of numpy's long double: ``2^-64`` for x86-64's 80-bit extended format,
#: ``UNIT_ROUNDOFF`` where long double is double
UNIT_ROUNDOFF_EXTENDED = float(np.finfo(np.longdouble).eps) / 2.0
#: in extended mode, frequencies whose composed log-magnitude is within this of the largest
#: are powered in long double (:func:`_circular_product`)
_EXTENDED_RANGE = 60.0


def _circular_product_extended(terms, n: int, lo_index: int, workers: int | None
                               ) -> tuple[np.ndarray, float]:
    """:func:`_circular_product` with long-double forward transforms and powering (see
    there, ``extended=True``). Only the frequencies whose composed magnitude is within
    ``e^-_EXTENDED_RANGE`` of the largest are powered; the others are set to 0, each with
    its largest possible true magnitude ``prod_i (a_i + e_i)^k_i`` added to the error sum
    (at most ``e^-60`` of the largest coefficient, times a little more than 1)."""
    lg2 = math.log2(max(n, 2))
    ux = UNIT_ROUNDOFF_EXTENDED
    spectra, logs = [], None
    for p, k in terms:
        fx = sfft.rfft(_fold(p, n).astype(np.longdouble), workers=workers)
        e = (_C_FFT * lg2 + 4.0) * ux * float(np.abs(p.probs).sum())
        logs = _add_logs(logs, _term_logs(np.abs(fx).astype(float), k, 4 * ux, e))
        spectra.append((fx, k))
    log_a = logs[0]
    keep = log_a >= float(np.max(log_a)) - _EXTENDED_RANGE
    sel = np.nonzero(keep)[0]
    prod = None
    for fx, k in spectra:
        g = _int_power(fx[sel], k)
        prod = g if prod is None else np.multiply(prod, g, out=prod)
    del spectra
    acc = np.zeros(log_a.size, dtype=complex)
    acc[sel] = prod.astype(complex)
    err_sum = (float(_coefficient_errors(*(x[sel] for x in logs)).sum())
               + float(np.exp(logs[2][~keep]).sum())
               # rounding the long-double product to double: a relative u of each
               + 2.0 * UNIT_ROUNDOFF * float(np.abs(acc[sel]).sum()))
    return _inverse_with_noise(acc, err_sum, n, lo_index, workers, sum(k for _, k in terms))


def _int_power(f: np.ndarray, k: int) -> np.ndarray:
    """``f ** k`` for an integer ``k >= 1`` by binary powering (in place, about
    ``2 log2 k`` multiplications; numpy's ``**`` goes through exp/log for large k and is
    several times slower with the same rounding error, of order ``k`` ulps)."""
    result = None
    base = f if k == 1 else f.copy()
    while True:
        if k & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        k >>= 1
        if not k:
            return result
        np.multiply(base, base, out=base)


def compose_fixed_window(terms: list[tuple[DiscretePLD, int]], lo_index: int, n: int, *,
                         workers: int | None = None, noise_bound: bool = True,
                         extended: bool = False) -> DiscretePLD:
    """Circular composition on the fixed window of grid indices ``[lo_index, lo_index + n)``.

    This is the composition of the Fourier accountant as published (Koskela, Jälkö, Honkela
    2020, Sec. 5.2, Alg. 1, and Sec. 5.5 for varying mechanisms): every law is folded modulo
    ``n``, transformed once, raised to its count in the Fourier domain, and the product is
    transformed back; composed mass outside the window wraps around (the periodisation of
    eq. (5.1)). With ``lo_index = -n/2`` the fold places the loss value 0 at position 0, which
    is the paper's half-swap ``D``, and the final rotation is its second ``D``:
    ``C^k dx = D F^{-1}(F(D omega dx)^k)``.

    Unlike :func:`compose` there is no window placement and no bound on what wrapped around:
    the result is the approximation of the paper, to be used with its error estimates.

    Parameters
    ----------
    terms : (pld, count) pairs on one grid (same ``d`` and ``shift``).
    lo_index : grid index of the first point of the window.
    n : window length (number of FFT points).
    noise_bound : also bound the floating-point error of the result (``meta["log_noise"]``);
        False skips it (about a quarter of the time) for a caller that reports no bound: the
        Fourier accountant. The law is the same to the bit either way.
    extended : forward transforms and powering in long double (see :func:`compose`): the
        algorithm's value without the float64 rounding that the k-th power amplifies.

    Returns
    -------
    DiscretePLD on the window (``offset = lo_index``), mass at ``+inf`` composed exactly.
    """
    terms = [(p, int(k)) for p, k in terms if int(k) > 0]
    if n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not terms:
        probs = np.zeros(n)
        probs[(-lo_index) % n] = 1.0
        return DiscretePLD(1.0, lo_index, probs, 0.0)
    d, shift0 = terms[0][0].d, terms[0][0].shift
    if any(abs(p.d - d) > 1e-15 * d or p.shift != shift0 for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid (step and shift)")
    inf_mass = composed_inf_mass(terms)
    total_shift = sum(k * p.shift for p, k in terms)
    res, log_noise = _circular_product(terms, n, lo_index, workers, noise_bound or extended,
                                       extended=extended)
    meta = {"kind": "fixed_window", "log_noise": log_noise} if noise_bound else \
        {"kind": "fixed_window"}
    return DiscretePLD(d, lo_index, res, inf_mass, meta, total_shift)


def _fold(p: DiscretePLD, n: int) -> np.ndarray:
    """The weights of ``p`` folded modulo ``n`` (atom ``i`` at position ``(offset + i) mod n``):
    a law of at most ``n`` atoms is one cyclic shift (for ``offset = -n/2`` and ``n`` atoms,
    the half-swap ``D`` of Koskela et al. 2020)."""
    size, start = p.probs.size, p.offset % n
    if size > n:
        return np.bincount((p.offset + np.arange(size)) % n, weights=p.probs, minlength=n)
    out = np.zeros(n)
    head = min(size, n - start)
    out[start:start + head] = p.probs[:head]
    out[:size - head] = p.probs[head:]
    return out


#: the Chernoff parameters ``t`` at which :func:`compose_grid_chernoff` places its window
CHERNOFF_TS = np.geomspace(1e-2, 1e3, 30)


def compose_grid_chernoff(terms: list[tuple[DiscretePLD, int]], *, log_tail: float,
                          lam: float = 0.0, max_points: int = MAX_POINTS,
                          workers: int | None = None, ts: np.ndarray = CHERNOFF_TS,
                          refusal: str = "the composition needs an FFT of {n} points "
                                         "(> {max_points}); ask for a looser tolerance"
                          ) -> ComposedPLD:
    """:func:`compose` with the window placed by Chernoff bounds on a fixed grid of
    parameters ``ts`` (the PRV accountant's composition; Gopi, Lee, Wutschitz 2021, Alg. 1).

    The window ``[a_lo, a_hi]`` is the smallest for which the Chernoff bound
    ``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` (and its mirror for the lower tail) is
    at most ``e^log_tail`` at some ``t`` of ``ts``, solved in closed form for each ``t``:
    the moment generating functions are evaluated once (``len(ts)`` values per law) instead
    of by a Newton search per side as in :func:`compose`. The window is widened to a fast
    FFT length (the extra points spread over both sides, never below the support of the
    sum) and the Chernoff bounds at its actual ends are stored in the returned
    :class:`ComposedPLD`, whose queries add the mass above the window (upper bound,
    original measure) and subtract the most the mass folded into it can contribute (lower
    bound, tilted measure), as for :func:`compose`.

    Parameters
    ----------
    terms : list of (pld, count) on one grid (same step and shift); the laws are used as
        they are (not trimmed, and not normalized when ``lam = 0``).
    log_tail : log of the mass allowed outside the window on each side (tilted measure).
    lam : exponential tilt (0 = none; see :func:`tilt`).
    max_points : refuse (:class:`~tightdp.budget.BudgetExceeded`) rather than run a larger
        FFT; ``refusal`` is its message, formatted with ``n`` and ``max_points``.
    ts : the Chernoff parameters (positive), increasing.
    """
    terms, work, log_scale = grid_terms(terms, lam)
    if not terms:
        return ComposedPLD(1.0, 0, np.ones(1), 0.0, 0.0, 0.0, -math.inf, -math.inf, -math.inf)
    win = chernoff_window(terms, work, log_tail=log_tail, ts=ts,
                          size=fft_sizer(max_points, refusal))
    return compose_on_window(terms, work, log_scale, lam, win, workers)


def grid_terms(terms, lam: float = 0.0) -> tuple[list, list, float]:
    """``(terms, work, log_scale)``: the (pld, count) pairs with a positive count, checked to
    share one grid (step and shift), and the laws to compose, ``terms`` tilted by ``lam``
    with the log normalizer of :func:`tilt` (``terms`` themselves, and 0, when
    ``lam = 0``); empty lists when nothing is composed. The common start of
    :func:`compose_grid_chernoff` and of the few-frequency evaluation
    (:mod:`tightdp.pld.spectral`)."""
    terms = [(p, int(k)) for p, k in terms if int(k) > 0]
    if not terms:
        return [], [], 0.0
    d, shift0 = terms[0][0].d, terms[0][0].shift
    if any(abs(p.d - d) > 1e-15 * d or p.shift != shift0 for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid (step and shift)")
    work, log_scale = tilt(terms, lam) if lam != 0.0 else (terms, 0.0)
    return terms, work, log_scale


def fft_sizer(max_points: int, refusal: str):
    """``size(n)`` for :func:`chernoff_window`: the fast FFT length for ``n`` points, or
    :class:`~tightdp.budget.BudgetExceeded` (``refusal`` formatted with ``n`` and
    ``max_points``) when ``n > max_points``."""
    def size(n: int) -> int:
        if n > max_points:
            raise BudgetExceeded(refusal.format(n=n, max_points=max_points))
        return sfft.next_fast_len(n, real=True)
    return size


def compose_on_window(terms, work, log_scale: float, lam: float, win: ChernoffWindow,
                      workers: int | None = None) -> ComposedPLD:
    """The circular composition of the laws ``work`` (``terms`` tilted by ``lam`` with
    ``log_scale``, or ``terms`` themselves) on the window ``win`` (an FFT length), with the
    bounds at its ends: the end of :func:`compose_grid_chernoff`."""
    d = terms[0][0].d
    n_fft = win.i_hi - win.i_lo + 1
    res, log_noise = _circular_product(work, n_fft, win.i_lo, workers)
    S = sum(k * p.shift for p, k in terms)  # total grid shift of the composed law
    log_fold = float(np.logaddexp(win.t_above, win.t_below))
    return ComposedPLD(d, win.i_lo, res, composed_inf_mass(terms), lam, log_scale,
                       win.log_above, win.log_below, log_fold, S, log_noise, round_rel(terms))


@dataclass(frozen=True)
class ChernoffWindow:
    """A window ``[i_lo, i_hi]`` of grid indices of a composed law and the logs of Chernoff
    bounds on the mass beyond its ends: ``t_above``/``t_below`` in the measure of the laws
    composed (tilted, or as given), ``log_above``/``log_below`` in the original measure."""

    i_lo: int
    i_hi: int
    t_above: float
    t_below: float
    log_above: float
    log_below: float


def chernoff_window(terms: list[tuple[DiscretePLD, int]],
                    work: list[tuple[DiscretePLD, int]], *, log_tail: float,
                    ts: np.ndarray = CHERNOFF_TS, size=None) -> ChernoffWindow:
    """The window of :func:`compose_grid_chernoff`: the smallest ``[a_lo, a_hi]`` for which
    the Chernoff bound ``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` on the composition
    of the laws ``work`` (and its mirror for the lower tail) is at most ``e^log_tail`` at
    some ``t`` of ``ts``, solved in closed form for each ``t``, as grid indices (one point
    of margin each side, never beyond the support of the sum); ``size(n)`` (optional) maps
    its number of points to the one used (a fast FFT length; it may refuse), the extra
    points spread over both sides. The bounds at the final ends are evaluated for ``work``
    and, when it differs (a tilt), for the original laws ``terms``."""
    lm_pos = sum(k * p.log_mgf(ts) for p, k in work)
    lm_neg = sum(k * p.log_mgf(-ts) for p, k in work)
    d = terms[0][0].d
    S = sum(k * p.shift for p, k in terms)  # total grid shift of the composed law
    a_hi = float(np.min((lm_pos - log_tail) / ts))
    a_lo = float(np.max((log_tail - lm_neg) / ts))
    lo_min = sum(k * p.offset for p, k in terms)
    hi_max = sum(k * (p.offset + p.probs.size - 1) for p, k in terms)
    i_lo = max(int(math.floor((a_lo - S) / d)) - 1, lo_min)
    i_hi = min(int(math.ceil((a_hi - S) / d)) + 1, hi_max)
    n = i_hi - i_lo + 1
    if size is not None:
        m = size(n)
        # spread the extra points over both sides, never beyond the support of the sum
        i_lo = max(i_lo - (m - n) // 2, lo_min)
        n = m
    top, bot = S + (i_lo + n) * d, S + (i_lo - 1) * d
    inside_hi, inside_lo = i_lo + n - 1 < hi_max, i_lo > lo_min

    def edges(lp: np.ndarray, ln: np.ndarray) -> tuple[float, float]:
        above = min(float(np.min(lp - ts * top)), 0.0) if inside_hi else -math.inf
        below = min(float(np.min(ln + ts * bot)), 0.0) if inside_lo else -math.inf
        return above, below

    t_above, t_below = edges(lm_pos, lm_neg)
    if work is terms:
        log_above, log_below = t_above, t_below
    else:
        log_above, log_below = edges(sum(k * p.log_mgf(ts) for p, k in terms),
                                     sum(k * p.log_mgf(-ts) for p, k in terms))
    return ChernoffWindow(i_lo, i_lo + n - 1, t_above, t_below, log_above, log_below)
