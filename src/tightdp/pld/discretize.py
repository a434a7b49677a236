"""Discretizers: turn a :class:`~tightdp.losses.PrivacyLoss` into a
:class:`~tightdp.pld.grid.DiscretePLD` on the grid ``j * d``.

The certified discretizers live here, one per side of the bracket. All have a per-step
error of second order in ``d``, so the bracket of a k-fold composition stays tight where
plain rounding of the losses (first order, bias ``k d / 2``) drifts. The accountant uses
:func:`certified_pair`, which builds the upper and the lower pair from one evaluation of the
loss's CDFs on one grid.

``connect_the_dots`` (upper bound)
    Doroshenko, Ghazi, Kamath, Kumar, Manurangsi (2022), "Connect the dots". Every output whose
    loss ``y`` lies in the bin ``(g_j, g_{j+1}]`` is split between the two grid points with
    weights chosen so that *both* the P-mass and the Q-mass of the bin are preserved:
    mass at ``g_{j+1}`` is ``(e^{-g_j} P_bin - Q_bin) / (e^{-g_j} - e^{-g_{j+1}})``. Splitting
    an output into two more informative outputs is the inverse of a post-processing, so the
    new pair dominates the old one (its hockey-stick curve is the chord of the convex curve
    ``alpha -> delta``, alpha = e^eps, between grid points), and domination is preserved by
    composition. The bin below the grid is split between ``-inf`` and the lowest point (all
    its P-mass moves up to it), the bin above between the top point and ``+inf``. Per step it
    raises ``K(t) = log E_P[e^{tY}]`` by ``t (t + 1) u (d - u) / 2`` for a loss at distance
    ``u`` above its grid point: ``t (t + 1) d^2 / 12`` on average, whatever the loss.

lowered chords, in :func:`certified_pair` (lower bound)
    The pair whose hockey-stick curve is the chord interpolation of the true curve in
    ``alpha`` lowered at each node by ``c_j``, enough to stay below the true curve on both
    neighbouring intervals. How much is enough follows from convexity alone: on an interval
    the true curve's slope runs between ``-Q(Y > g_j)`` and ``-Q(Y > g_{j+1})`` with the
    chord's slope as average, which bounds its distance below the chord by a "tent" whose
    peak is computed from the bin's two masses (:mod:`tightdp.pld.lowered_chords`). A convex
    curve below the true one at every ``alpha >= 0`` is that of a post-processing of the mechanism
    (Blackwell's theorem for pairs of distributions), so it stays below under composition.
    With one tent per interval the lowering is about twice the chord's average excess, so per
    step it lowers ``K(t)`` by about ``t (t + 1) d^2 / 6``; on the intervals of the largest
    tents the distance to the chord is bounded more tightly from the curve at sub-nodes
    (``_refined_gaps`` there), which brings that to about 0.6 of connect-the-dots' raise on
    the subsampled Gaussian (q = 0.01, sigma = 1), whose losses concentrate near 0. This is ours;
    the tests check it against exact curves.

``dominated`` (lower bound, the fallback)
    A post-processing of the mechanism's output, so its curve is below the true one at every
    eps and for every composition (data-processing inequality), followed by rounding losses
    *down*, which can only lower ``delta`` (``delta`` is non-decreasing in each loss value).
    Outputs are merged into centred bins ``(g_j - d/2, g_j + d/2]``; a merged atom whose
    loss falls below ``g_j`` receives the fraction of its upper neighbour's atom that lifts
    its likelihood ratio to exactly ``e^{g_j}`` (a merge again, hence a post-processing);
    every atom is then rounded down to its grid point. The rounding moves a loss by
    ``O(d^2)`` for a smooth loss density, so the bias per step is second order, but its
    constant depends on the loss density's slope (5 to 20 times that of the lowered chords on
    the subsampled Gaussian). Mass below the grid is dropped (its loss rounded down to -inf).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, cast

import numpy as np

from .._numerics import log_sub_exp
from ..losses import PrivacyLoss
from .grid import Bins, DiscretePLD
from .lowered_chords import lowered_chords, refine_points

__all__ = ["LazyLower", "bins_from_values", "certified_pair", "certified_pair_lazy",
           "certified_pairs", "connect_the_dots", "connect_the_dots_from_bins", "dominated",
           "grid_indices", "loss_range", "pair_from_bins", "tail_point"]

#: unit roundoff of float64


def loss_range(loss: PrivacyLoss, log_tail: float, *, coarse: bool = False
               ) -> tuple[float, float]:
    """Finite loss interval outside of which each tail has P-mass at most ``e^log_tail``.

    With ``coarse`` each end is found by three vectorized evaluations of the tail (powers of
    two outwards, then two rounds of 64 points across the bracket found) instead of a scalar
    bisection to 1e-9: the end is on the same safe side (the tail beyond it holds at most
    the mass asked) but may be up to about 1/4096 of its distance from the start further
    out. Every discretizer accounts for what lies beyond the range it is given, so the
    bounds stay certified either way; the grid is only a little longer."""
    if coarse:
        lo, hi = tail_point(loss, log_tail, upper=False), tail_point(loss, log_tail, upper=True)
    else:
        lo = loss.loss_quantile(log_tail, upper=False)
        hi = loss.loss_quantile(log_tail, upper=True)
    if hi < lo:
        hi = lo
    return lo, hi


#: the outward steps of :func:`_tail_point`: 2^-30 .. 2^996 from the start
_OUTWARD = np.concatenate([[0.0], np.exp2(np.arange(-30.0, 997.0))])


def tail_point(loss: PrivacyLoss, log_mass: float, *, upper: bool) -> float:
    """A loss value ``y`` with ``P(y < Y < inf) <= e^log_mass`` (upper) or
    ``P(Y <= y) <= e^log_mass`` (lower): the support's end if finite, else the innermost
    of a few vectorized candidates (the coarse :func:`loss_range`; the same safe side as
    :meth:`~tightdp.losses.PrivacyLoss.loss_quantile`)."""
    s_lo, s_hi = loss.support
    end, other = (s_hi, s_lo) if upper else (s_lo, s_hi)
    if math.isfinite(end):
        return float(end)
    sign = 1.0 if upper else -1.0
    log_inf = math.log(loss.inf_mass) if loss.inf_mass > 0 else -math.inf

    def small(y: np.ndarray) -> np.ndarray:  # the tail beyond y holds at most the mass asked
        with np.errstate(all="ignore"):
            if upper:
                t = loss.logp_sf(y)
                if log_inf > -math.inf:
                    t = log_sub_exp(t, np.full(t.shape, log_inf))
            else:
                t = loss.logp_cdf(y)
        return np.asarray(t, dtype=float) <= log_mass  # NaN: not known to be small

    start = float(other) if math.isfinite(other) else 0.0
    cand = start + sign * _OUTWARD
    ok = small(cand)
    if not ok.any():
        return float(cand[-1])
    i = int(np.argmax(ok))
    if i == 0:
        return start
    inner, outer = float(cand[i - 1]), float(cand[i])
    for _ in range(2):  # two rounds of 64 points across [inner, outer]
        pts = np.linspace(inner, outer, 65)
        j = int(np.argmax(small(pts)))  # the last point is small by construction
        if j == 0:
            break
        inner, outer = float(pts[j - 1]), float(pts[j])
    return outer


def _grid(d: float, lo: float, hi: float, shift: float = 0.0) -> tuple[int, int]:
    j_lo = int(math.floor((lo - shift) / d))
    j_hi = int(math.ceil((hi - shift) / d))
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    return j_lo, j_hi



class _FineCdfs(NamedTuple):
    """The four log CDFs of a loss (:meth:`~tightdp.losses.PrivacyLoss.log_cdfs`) at the
    points ``shift + j d`` of one grid, ``j = j_lo, j_lo + 1, ...``: a grid of step
    ``m d`` (``m`` a power of two) reads its points ``shift + i (m d)`` as every ``m``-th
    one, the same floats (``i m`` and ``d`` scaled by powers of two: the exact products
    agree and round alike)."""

    d: float
    j_lo: int
    values: tuple

    def at(self, d: float, j_lo: int, j_hi: int) -> tuple | None:
        """The values at the points ``shift + i d``, ``i = j_lo..j_hi`` (None if ``d`` is
        not a power-of-two multiple of this grid's step or they are not all on it)."""
        m = round(d / self.d)
        if m < 1 or m & (m - 1) or self.d * m != d:
            return None
        a = j_lo * m - self.j_lo
        b = j_hi * m - self.j_lo
        if a < 0 or b >= self.values[0].size:
            return None
        return tuple(np.ascontiguousarray(v[a:b + 1:m]) for v in self.values)


def _fine_cdfs(loss: PrivacyLoss, steps: list[float], lo: float, hi: float, shift: float
               ) -> _FineCdfs:
    """The loss's log CDFs on the finest of ``steps``' grids, over the union of the ranges
    that :func:`certified_pair_lazy` takes for each step (``[lo - d, hi + d]``)."""
    f = min(steps)
    ranges = []
    for d in steps:
        j_lo, j_hi = _grid(d, lo - d, hi + d, shift)
        m = round(d / f)
        ranges.append((j_lo * m, j_hi * m) if m >= 1 and not m & (m - 1) and f * m == d
                      else _grid(f, lo - d, hi + d, shift))
    j_lo = min(r[0] for r in ranges)
    j_hi = max(r[1] for r in ranges)
    return _FineCdfs(f, j_lo, loss.log_cdfs(shift + np.arange(j_lo, j_hi + 1) * f))


def _ctd_split(loss: PrivacyLoss, d: float, lo: float, hi: float, shift: float,
               cdfs: _FineCdfs | None = None) -> Bins:
    """Shared part of both certified discretizers: the grid, the bin masses and the masses
    beyond the grid's ends (see the module docstring); the log CDFs at the grid's points
    read from ``cdfs`` where it holds them."""
    j_lo, j_hi = _grid(d, lo, hi, shift)
    g = shift + np.arange(j_lo, j_hi + 1) * d
    vals = None if cdfs is None else cdfs.at(d, j_lo, j_hi)
    fine = vals is not None
    if vals is None:
        vals = loss.log_cdfs(g)
    pb, qb = loss.bin_masses_from(*vals)  # bins (g_j, g_{j+1}]
    # log rho_j = log(Q_bin e^{g_j} / P_bin) lies in [-d, 0]: the bin's likelihood ratio is
    # between e^{g_j} and e^{g_{j+1}}
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rho = np.log(qb) + g[:-1] - np.log(pb)
    if fine:
        return bins_from_values(loss, d, j_lo, g, vals, (pb, qb, log_rho))
    log_rho = _fix_rho(loss, d, g, pb, qb, log_rho)
    g0, gt = np.asarray(g[0]), np.asarray(g[-1])
    return Bins(j_lo, g, pb, qb, log_rho, float(loss.p_cdf(g0)), float(loss.q_cdf(g0)),
                 float(loss.p_sf(gt)), float(loss.logq_sf(gt)))


def grid_indices(d: float, lo: float, hi: float, shift: float = 0.0) -> tuple[int, int]:
    """The first and last index ``j`` of the grid points ``shift + j d`` covering
    ``[lo, hi]`` (at least two points)."""
    return _grid(d, lo, hi, shift)


def bins_from_values(loss: PrivacyLoss, d: float, j_lo: int, g: np.ndarray, vals: tuple,
                     masses: tuple) -> Bins:
    """The :class:`Bins` of ``loss`` on the grid points ``g`` (index ``j_lo`` first) from
    the values of its :meth:`~tightdp.losses.PrivacyLoss.log_cdfs` there and the bins'
    ``(P-masses, Q-masses, log rho)`` computed from them (see :func:`_ctd_split`)."""
    pb, qb, log_rho = masses
    log_rho = _fix_rho(loss, d, g, pb, qb, log_rho)
    # the masses beyond the grid's ends from the log CDFs read at its end points: the
    # values the loss gives there, as it evaluates point by point (what reading the
    # fine grid assumes; see _FineCdfs), without four more evaluations at one point
    lpc, lps, lqc, lqs = vals
    ends = np.exp(np.array([lpc[0], lqc[0], lps[-1]]))
    return Bins(j_lo, g, pb, qb, log_rho, float(ends[0]), float(ends[1]),
                 float(ends[2]), float(lqs[-1]))


def _fix_rho(loss: PrivacyLoss, d: float, g: np.ndarray, pb: np.ndarray, qb: np.ndarray,
             log_rho: np.ndarray) -> np.ndarray:
    """``log rho`` of the bins, where the Q-mass underflowed from its log, clipped to
    ``[-d, 0]``."""
    lost = np.nonzero((qb < 1e-280) & (pb > 0))[0]
    if lost.size:  # Q-masses below the float range (large losses): their log, pairwise
        edges = np.stack([g[lost], g[lost + 1]], axis=1).reshape(-1)
        lqb = loss.log_q_bin_masses(edges)[::2]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rho[lost] = lqb + g[lost] - np.log(pb[lost])
    return np.clip(np.nan_to_num(log_rho, nan=0.0, neginf=-d, posinf=0.0), -d, 0.0)


def _ctd_up(pb: np.ndarray, log_rho: np.ndarray, d: float) -> np.ndarray:
    """The part of each bin's P-mass that connect-the-dots puts on the bin's upper point,
    ``P_bin (1 - rho) / (1 - e^{-d})`` (it preserves the bin's Q-mass too)."""
    up = pb * (-np.expm1(log_rho)) / (-math.expm1(-d))
    return np.clip(np.where(pb > 0, up, 0.0), 0.0, pb)


def connect_the_dots(loss: PrivacyLoss, d: float, lo: float, hi: float,
                     shift: float = 0.0) -> DiscretePLD:
    """Dominating discrete pair on the grid ``shift + j d`` (upper bound); see the module
    docstring."""
    return _ctd(d, _ctd_split(loss, d, lo, hi, shift), shift)


def connect_the_dots_from_bins(d: float, bins: Bins, shift: float = 0.0) -> DiscretePLD:
    """:func:`connect_the_dots` from the loss's :class:`Bins` on its grid."""
    return _ctd(d, bins, shift)


def _ctd(d: float, b: Bins, shift: float) -> DiscretePLD:
    g, pb = b.g, b.pb
    probs = np.zeros(g.size)
    up = _ctd_up(pb, b.log_rho, d)
    probs[:-1] += pb - up
    probs[1:] += up
    # below the grid: all P-mass moves up to g_0 (the rest of Q goes to -inf)
    probs[0] += b.p_low
    # above the grid: split between g_top and +inf preserving P and Q mass
    lq = b.lq_top
    at_top = min(b.p_top, math.exp(min(lq + g[-1], 0.0))) if lq > -math.inf else 0.0
    probs[-1] += at_top
    inf_mass = max(b.p_top - at_top, 0.0)
    return DiscretePLD(d, b.j_lo, probs, inf_mass, {"kind": "connect_the_dots"}, shift)


def certified_pair(loss: PrivacyLoss, d: float, lo: float, hi: float, shift: float = 0.0
                   ) -> tuple[DiscretePLD, DiscretePLD]:
    """Dominating and dominated discrete pairs on the grid ``shift + j d`` from one
    evaluation of the loss's CDFs: connect-the-dots (upper) and lowered chords (lower); see
    the module docstring. Falls back to :func:`dominated` for the lower pair in the rare case
    where the lowered chords cannot be made convex."""
    upper, lower = certified_pair_lazy(loss, d, lo, hi, shift)
    return upper, lower()


def certified_pairs(loss: PrivacyLoss, steps: list[float], lo: float, hi: float,
                    shift: float = 0.0) -> list[tuple[DiscretePLD, DiscretePLD]]:
    """:func:`certified_pair` at each grid step of ``steps`` (for one loss on several
    grids), the loss's CDFs evaluated once, at the points of the finest grid: a grid whose
    step is a power-of-two multiple of it reads its points from there (the same floats, so
    each pair is :func:`certified_pair`'s wherever the loss evaluates its CDFs point by
    point, as every closed form here does; elsewhere an evaluation at the same points, as
    accurate). Other steps evaluate their own."""
    steps = [float(d) for d in steps]
    cdfs = _fine_cdfs(loss, steps, lo, hi, shift) if len(steps) > 1 else None
    out = []
    for d in steps:
        upper, lower = certified_pair_lazy(loss, d, lo, hi, shift, cdfs)
        out.append((upper, lower()))
    return out


def certified_pair_lazy(loss: PrivacyLoss, d: float, lo: float, hi: float, shift: float = 0.0,
                        cdfs: _FineCdfs | None = None
                        ) -> tuple[DiscretePLD, Callable[[], DiscretePLD]]:
    """:func:`certified_pair` with the lower pair left to be built when asked: the upper
    pair, and a function that returns the lower one (built from the same evaluation of the
    loss's CDFs on its first call, then remembered). For a caller that needs the lower pair
    of only some of its losses (the PLD accountant: of the direction whose upper bound is
    the largest). ``cdfs``: the CDFs already evaluated on a finer grid
    (:func:`certified_pairs`)."""
    # one grid step of margin at both ends, so that a bounded loss's extreme values (often
    # atoms) lie strictly inside the grid
    return pair_from_bins(loss, d, lo, hi, shift, _ctd_split(loss, d, lo - d, hi + d, shift,
                                                              cdfs))


def pair_from_bins(loss: PrivacyLoss, d: float, lo: float, hi: float, shift: float, bins: Bins,
                   *, share: float = 0.0) -> tuple[DiscretePLD, Callable[[], DiscretePLD]]:
    """:func:`certified_pair_lazy` from the loss's :class:`Bins` on the grid that covers
    ``[lo - d, hi + d]``; ``share``: the lowered chords refine only the tents at least this
    fraction of the largest (:func:`~tightdp.pld.lowered_chords.refine_points`)."""
    upper = _ctd(d, bins, shift)
    return upper, LazyLower(loss, upper, bins, (d, lo, hi, shift), share=share)


class LazyLower:
    """The lower pair of :func:`certified_pair_lazy`, built on its first call (lowered
    chords, or :func:`dominated` where they cannot be built) and then remembered; the
    loss's bins are released once it is built. :meth:`points` are where building it
    evaluates the loss's CDFs, so that a caller may evaluate those of many losses at once
    and pass each its rows of :func:`~tightdp.pld.lowered_chords.refined_rows`."""

    def __init__(self, loss: PrivacyLoss, upper: DiscretePLD, bins: Bins, grid: tuple, *,
                 share: float = 0.0):
        self.loss, self.upper, self.grid, self.share = loss, upper, grid, share
        self.bins: Bins | None = bins
        self.low: DiscretePLD | None = None

    def points(self) -> np.ndarray | None:
        """The loss values at which building the lower pair evaluates the loss's CDFs, a
        row of sub-nodes per interval refined (None if none, or if it is built)."""
        return None if self.bins is None else refine_points(self.bins, self.grid[0],
                                                            share=self.share)

    def __call__(self, rows: tuple | None = None) -> DiscretePLD:
        """The lower pair; ``rows``: :func:`~tightdp.pld.lowered_chords.refined_rows` at
        :meth:`points`."""
        if self.low is None:
            d, lo, hi, shift = self.grid
            low = lowered_chords(self.loss, self.upper, cast(Bins, self.bins), d, rows,
                                 share=self.share)
            self.bins = None
            self.low = low if low is not None else dominated(self.loss, d, lo, hi, shift)
        return self.low



def dominated(loss: PrivacyLoss, d: float, lo: float, hi: float,
              shift: float = 0.0) -> DiscretePLD:
    """Dominated discrete pair on the grid ``shift + j d`` (lower bound); see the module
    docstring."""
    j_lo, j_hi = _grid(d, lo, hi, shift)
    g = shift + np.arange(j_lo, j_hi + 1) * d
    edges = np.concatenate([g - d / 2, [g[-1] + d / 2]])
    pb, _ = loss.bin_masses(edges)
    lqb = loss.log_q_bin_masses(edges)  # Q-masses underflow where the loss is large
    # everything above the last edge (finite losses) merges into the top atom
    p_above = float(loss.p_sf(np.asarray(edges[-1]))) - loss.inf_mass
    pb[-1] += max(p_above, 0.0)
    lqb[-1] = np.logaddexp(lqb[-1], float(loss.logq_sf(np.asarray(edges[-1]))))
    out = _merge_to_grid(pb, lqb, g, d, j_lo, float(loss.inf_mass))
    out.shift = shift
    return out


def _excess(p: np.ndarray, log_q: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``p - q e^g``: how far an atom's likelihood ratio is above ``e^g``, scaled by ``e^g``
    (so that atoms whose Q-mass is far below the smallest float keep their sign and size)."""
    with np.errstate(over="ignore", under="ignore"):
        return p - np.exp(np.minimum(log_q + g, 700.0))


def _merge_to_grid(pb: np.ndarray, lqb: np.ndarray, g: np.ndarray, d: float, j_lo: int,
                   inf_mass: float) -> DiscretePLD:
    """Merge the bin atoms ``(pb, e^lqb)`` (bin j centred on ``g[j]``) into labels whose
    likelihood ratio is exactly ``e^{g_j}`` where possible, then round every label down.

    Pass 1: a label below its grid point (deficit) takes the fraction of the next bin that
    lifts it to ``e^{g_j}`` (slightly more, so rounding cannot leave it short).
    Pass 2: a label above its grid point (surplus) takes a fraction of the remaining part of
    the bin below that brings it down towards ``e^{g_j}``; the fraction is computed against a
    lower bound of what that label keeps, so it never overshoots (an overshoot would need a
    whole grid step of rounding). Labels that still fall short drop one grid point.
    Every operation merges fractions of outputs, so the result is a post-processing of the
    original pair. Every excess against the point ``g_j`` is scaled by ``e^{g_j}``: only
    ratios of excesses against the same point are used, so the scaling changes nothing but
    the range of the floats (unscaled, both terms underflow for losses above ~700 and the
    merge silently became a rounding to the nearest point, above the true curve).
    """
    n = g.size
    e_own = _excess(pb, lqb, g)  # excess of bin j against its own point
    e_up = _excess(pb[1:], lqb[1:], g[:-1])  # bin j+1 against point j (> 0)
    e_dn = -_excess(pb[:-1], lqb[:-1], g[1:])  # bin j-1 against point j (deficit, > 0)
    # pass 1: deficits
    phi = np.zeros(n)
    deficit = np.maximum(-e_own[:-1], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # only a neighbour above its own ratio can lift a label (e_up > 0); one whose P-mass
        # was lost to cancellation (e_up <= 0) would give a negative fraction: the label then
        # stays short and is demoted below
        phi[:-1] = np.where((deficit > 0) & (e_up > 0),
                            np.minimum(deficit / e_up * (1 + 1e-12), 1.0), 0.0)
    phi = np.nan_to_num(phi, nan=0.0, posinf=1.0)
    keep = np.ones(n)
    keep[1:] -= phi[:-1]
    # pass 2: surpluses; label j (j >= 1, not deficient) takes psi_j of keep_{j-1} * bin j-1
    surplus = np.where(phi == 0, np.maximum(e_own, 0.0) * keep, 0.0)
    c = np.zeros(n)
    avail = keep[:-1] * e_dn
    with np.errstate(divide="ignore", invalid="ignore"):
        c[1:] = np.where((surplus[1:] > 0) & (avail > 0), surplus[1:] / avail, 0.0)
    c = np.nan_to_num(c, nan=0.0, posinf=0.0)
    # exact psi_j = c_j (1 - psi_{j+1}); use the lower bound c_j (1 - c_{j+1}) (never over)
    c_next = np.zeros(n)
    c_next[:-1] = c[1:]
    psi = np.clip(c * (1.0 - np.minimum(c_next, 1.0)), 0.0, 1.0)
    psi[0] = 0.0
    # label contents: own part keep_j (1 - psi_{j+1}) + phi_j of bin j+1 + psi_j of bin j-1
    own = keep.copy()
    own[:-1] *= 1.0 - psi[1:]
    p_lab = own * pb
    p_lab[:-1] += phi[:-1] * pb[1:]
    p_lab[1:] += psi[1:] * keep[:-1] * pb[:-1]
    exc = own * e_own
    exc[:-1] += phi[:-1] * e_up
    exc[1:] -= psi[1:] * keep[:-1] * e_dn
    demote = exc < -1e-13 * np.maximum(p_lab, 1e-300)
    probs = np.zeros(n + 1)  # one extra point below for demoted labels
    probs[1:] += np.where(demote, 0.0, p_lab)
    probs[:-1] += np.where(demote, p_lab, 0.0)
    out = DiscretePLD(d, j_lo - 1, np.maximum(probs, 0.0), inf_mass, {"kind": "dominated"})
    out.meta["demoted"] = int(demote.sum())
    return out
