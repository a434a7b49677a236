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

Three entry points share the transform (``circular_product``), the tilt (:func:`tilt`), the
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

from .._numerics import UNIT_ROUNDOFF, bisect
from ..budget import BudgetExceeded, TimeExceeded
from .grid import DiscretePLD, tail_sums
from .mgf import LogMgf
from .transform import UNIT_ROUNDOFF_EXTENDED, circular_product, product_seconds

__all__ = ["UNIT_ROUNDOFF_EXTENDED", "ComposedPLD", "LogMgf", "compose", "composed_inf_mass",
           "round_rel", "tilt"]

MAX_POINTS = 1 << 25


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

    def _extra(self, eps: np.ndarray, *, upper: bool, m: np.ndarray | None = None
               ) -> np.ndarray:
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

    def delta_bound(self, eps, *, upper: bool) -> np.ndarray:
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
            return np.where(bad, 1.0, np.clip(val + self._extra(eps, upper=upper), 0.0, 1.0))
        return np.where(bad, 0.0, np.clip((val + self._extra(eps, upper=upper) - rnd) * (1 - 1e-10),
                                          0.0, 1.0))

    def grid_bound(self, start: int = 0, stop: int | None = None, *, upper: bool
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
        ex = self._extra(ys, upper=upper, m=first + nxt)
        bad = self._trivial(upper, first + nxt)
        if upper:
            return start, ys, np.where(bad, 1.0, np.clip(
                np.maximum(val, 0.0) * (1 + 1e-10) + rnd + ex, 0.0, 1.0))
        return start, ys, np.where(bad, 0.0, np.clip((val + ex - rnd) * (1 - 1e-10), 0.0, 1.0))

    def epsilon_bound(self, delta: float, *, upper: bool) -> float:
        """Smallest eps >= 0 at which the bound on delta(eps) is <= delta: a monotone search
        over the grid, then the closed form ``S0 - e^eps S1 + extra = delta`` on the bracketing
        interval (bisection when the extra term depends on eps)."""
        start = self._start_for(delta, upper)
        while True:
            start, ys, d_grid = self.grid_bound(start, upper=upper)
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
                if e > 0 and float(self.delta_bound(np.asarray(e), upper=False)) > delta:
                    return e
            return 0.0
        if i == 0:
            lo, hi = float(ys[0]) - 1.0, float(ys[0])
            if float(self.delta_bound(np.asarray(lo), upper=upper)) <= delta:
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
                ex = float(self._extra(np.asarray(lo), upper=True)) + rnd
                ratio = (max(s0[i], 0.0) - (delta - ex) / (1 + 1e-10)) / t[i]
            else:
                # the subtracted fold term taken at its largest over the interval: a smaller
                # curve, so the eps found is still a lower bound
                ex = float(np.min(self._extra(np.array([lo, hi]), upper=False))) - rnd
                ratio = (s0[i] + ex - delta / (1 - 1e-10)) / t[i]
            if ratio > 0 and math.isfinite(ratio):
                e = float(ys[i]) + math.log(ratio)
                e = max(min(max(e, lo), hi), 0.0)
                if not upper:
                    return e
                # the upper side is guarded by the evaluation itself (a few ulps up if the
                # rounding of the closed form left it just short)
                for _ in range(4):
                    if float(self.delta_bound(np.asarray(e), upper=True)) <= delta:
                        return e
                    e = min(e + 4e-16 * max(1.0, abs(e)), hi)
        # the end kept is the one where the bound is <= delta
        hi = bisect(lambda m: not float(self.delta_bound(np.asarray(m), upper=upper)) <= delta,
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
            extended: bool = False, seconds: float = math.inf) -> ComposedPLD:
    """Compose ``count`` copies of each PLD; see the module docstring.

    Parameters
    ----------
    terms : list of (pld, count); all PLDs share one grid step.
    log_tail : log of the mass allowed outside the window on each side (tilted measure).
    lam : exponential tilt (0 = none).
    max_points : refuse (ValueError) rather than allocate a larger FFT.
    extended : forward transforms (and the powering where it matters) in long double: a
        bound on the FFT's rounding about 2000 times smaller for long compositions, at about
        three times the transform's cost (see :func:`circular_product`).
    seconds : refuse (:class:`~tightdp.budget.TimeExceeded`) rather than start an FFT
        product estimated (:func:`~tightdp.pld.transform.product_seconds`) to take longer.
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
    est = product_seconds(N, len(terms), extended=extended)
    if est > seconds:
        raise TimeExceeded(f"the composition of {len(terms)} distinct laws on {N} points would "
                           f"take about {est:.3g} s")
    res, log_noise = circular_product(tilted, N, i_lo, workers, extended=extended)
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
