"""The lowered chords: the dominated (lower-bound) pair of
:func:`~tightdp.pld.discretize.certified_pair`.

The pair whose hockey-stick curve is the chord interpolation of the true curve in ``alpha``
lowered at each node by ``c_j``, enough to stay below the true curve on both neighbouring
intervals (see :mod:`tightdp.pld.discretize` for the construction and why it is a pair). The
stages, in order: the tents bounding how far the true curve lies below each chord
(:func:`_lowering`, refined on the intervals of the largest tents by :func:`_refined_gaps`),
the heights of the true curve above the line of no information and above its floor at the
nodes (:func:`_heights`), the two end nodes put on them (:func:`_place_ends`), the nodes'
P-masses (:func:`_node_masses`, with a convex minorant where the interpolant is not convex)
and the rounding excess taken off (:func:`_without_excess`).
"""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import numpy as np
from scipy.optimize import isotonic_regression

from .._numerics import UNIT_ROUNDOFF
from ..losses import PrivacyLoss
from ..losses.base import bin_masses_from_logs, delta_from_logs
from .grid import Bins, DiscretePLD

__all__ = ["lowered_chords", "refine_points", "refined_rows"]


def lowered_chords(loss: PrivacyLoss, upper: DiscretePLD, bins: Bins, d: float,
                   rows: tuple | None = None, *, share: float = 0.0) -> DiscretePLD | None:
    """The dominated pair whose hockey-stick curve ``V`` interpolates the values
    ``delta(alpha_j) - c_j`` linearly in ``alpha = e^eps`` between the nodes
    ``alpha_j = e^{g_j}`` (see the module docstring). Returns None if it cannot be built on
    this grid (the caller then falls back to :func:`dominated`).

    *Below the true curve.* On interval ``j`` the slope of the convex true curve runs from
    ``-Q(Y > g_j)`` to ``-Q(Y > g_{j+1})`` and averages the chord's slope, so the curve lies
    above the "tent" whose peak, at the fraction ``theta_j = (1 - rho_j) / (rho_j (e^d - 1))``
    of the interval, is ``G_j = P_bin (1 - rho_j) (1 - theta_j)`` below the chord
    (``rho_j = Q_bin e^{g_j} / P_bin``; the extremal convex curve has a single kink there).
    A function linear in ``alpha`` stays above the tent iff it does at the peak,
    ``(1 - theta_j) c_j + theta_j c_{j+1} >= G_j``, which ``c_j = max(G_{j-1}, G_j)``
    satisfies. No curve goes below the line of no information ``L(alpha) = 1 - alpha (1 -
    Q(Y = -inf))``, nor below its floor ``P(Y = +inf)``: ``V`` follows ``L`` up to the highest
    node ``J`` at which the true curve is within ``c_J`` of ``L`` (at least the first), and
    the floor from the lowest node ``K`` at which it is within ``c_K`` of the floor (at most
    the last); those two nodes are put on ``L`` and on the floor.

    *A pair.* A convex curve through ``(0, 1)`` with slopes in ``[-(1 - Q(Y = -inf)), 0]`` is
    the hockey-stick curve of a pair, and one below the true curve at every ``alpha >= 0`` is
    a post-processing of it (Blackwell; so are their compositions). Where the interpolant is
    not convex (only where the loss density changes on the scale of ``d``, or at the atoms of
    a discrete loss) it is replaced by its greatest convex minorant, which is lower still and
    whose kinks are nodes: its slopes are the isotonic regression of the segments' slopes
    weighted by their lengths (Barlow et al. 1972), computed where it changes anything.
    The P-masses are ``e^{g_j}`` times the slope increases; where no segment was pooled they
    are computed as ``pi_j^CTD - [(c_{j+1} - c_j) - e^d (c_j - c_{j-1})] / (e^d - 1)``.

    ``rows``: :func:`refined_rows` at the sub-nodes of :func:`refine_points` (computed with
    other losses'), else computed here. ``share``: only the tents at least this fraction of
    the largest one are refined (:func:`refine_points`).
    """
    g = bins.g
    if d > 700.0 or g[-1] > 700.0 or g[0] < -700.0:  # e^g beyond the float range
        return None
    em1 = math.expm1(d)
    ed = math.exp(d)
    n = g.size - 1  # nodes 0 .. n-1: the grid's last point is not used
    if n < 3 or g[n - 1] > 700.0 or g[0] < -700.0:
        return None
    c, pts = _lowering(loss, bins, d, n, em1, rows, share)
    hts = _heights(loss, bins, n, em1)
    ends = _place_ends(c, hts, pts, n)
    if ends is None:
        return None
    J, K = ends
    pi = _node_masses(loss, upper, bins, c, hts, J=J, K=K, em1=em1, ed=ed)
    if pi is None:
        return None
    pi = _without_excess(loss, pi, g, J, n)
    if pi is None:
        return None
    inf_true = float(loss.inf_mass)
    return DiscretePLD(d, upper.offset, pi, inf_true, {"kind": "lowered_chords"}, upper.shift)


def _tent_gaps(bins: Bins, d: float, n: int, em1: float) -> tuple[np.ndarray, np.ndarray]:
    """``(theta, G)``: the tents' peaks and heights of the intervals (:func:`lowered_chords`)."""
    pb, qb, log_rho = bins.pb, bins.qb, bins.log_rho
    lr = log_rho[:n - 1]
    one_m_rho = -np.expm1(lr)
    theta = np.clip(one_m_rho / (np.exp(lr) * em1), 0.0, 1.0)
    gap = pb[:n - 1] * one_m_rho * (1.0 - theta)
    # a bin whose Q-mass underflowed: its rho is unknown, so take the largest gap any rho
    # allows, P_bin tanh(d/4)
    unknown = (pb[:n - 1] > 0) & ~(qb[:n - 1] > 0)
    return theta, np.where(unknown, pb[:n - 1] * math.tanh(d / 4), gap) * (1 + 1e-9)


def refine_points(bins: Bins, d: float, *, share: float = 0.0) -> np.ndarray | None:
    """The loss values at which :func:`lowered_chords` on these bins evaluates the loss's
    CDFs (the sub-nodes of :func:`_refined_gaps`, a row per interval refined), None if it
    evaluates none. ``share``: only the intervals whose tent is at least this fraction of
    the largest are refined (0: the ``_REFINE_INTERVALS`` largest)."""
    g = bins.g
    n = g.size - 1
    if d > 700.0 or g[-1] > 700.0 or g[0] < -700.0 or n < 3 or g[n - 1] > 700.0:
        return None
    _, gap = _tent_gaps(bins, d, n, math.expm1(d))
    nodes = _sub_nodes(g, gap, d, share)
    return None if nodes is None else nodes[1]


def _sub_nodes(g: np.ndarray, gap: np.ndarray, d: float, share: float
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(pick, ys)``: the intervals :func:`_refined_gaps` refines (those of the largest
    tents, at least ``share`` of the largest one) and their sub-nodes (one row each), None
    if none."""
    m = _REFINE_SUB
    pick = _largest_positive(gap, _REFINE_INTERVALS)
    if share > 0.0 and pick.size:
        pick = pick[gap[pick] >= share * float(np.max(gap[pick]))]
    if not pick.size or d / m > 700.0:
        return None
    frac = np.arange(m + 1) / m
    ys = g[pick][:, None] + d * frac[None, :]  # sub-nodes of each picked interval (rows)
    ys[:, -1] = g[pick + 1]  # the interval's own end, exactly
    return pick, ys


def _lowering(loss: PrivacyLoss, bins: Bins, d: float, n: int, em1: float,
              rows: tuple | None, share: float) -> tuple[np.ndarray, _Tents]:
    """The lowering ``c_j = max(G_{j-1}, G_j)`` of each node from the tents' heights ``G_j``
    (refined where :func:`_refined_gaps` can), and the tents' points per interval."""
    theta, gap = _tent_gaps(bins, d, n, em1)
    gap, pts = _refined_gaps(loss, bins.g, gap, theta, d, rows, share)
    c = np.zeros(n)
    c[:-1] = gap
    c[1:] = np.maximum(c[1:], gap)
    return c, pts


class _Heights(NamedTuple):
    """The true curve at the nodes, as the lowered chords need it."""

    room: np.ndarray  # height above the line of no information L
    roof: np.ndarray  # height above the floor P(Y = +inf)
    q_sf: np.ndarray  # Q-mass of finite losses above each node
    a: np.ndarray  # the nodes e^{g_j}
    h: np.ndarray  # the intervals' lengths in alpha


def _heights(loss: PrivacyLoss, bins: Bins, n: int, em1: float) -> _Heights:
    """Heights of the true curve above ``L`` and above the floor at the nodes."""
    g, pb, qb = bins.g, bins.pb, bins.qb
    inf_true = float(loss.inf_mass)
    p_cdf = bins.p_low + np.concatenate([[0.0], np.cumsum(pb[:n - 1])])
    # Q-mass of finite losses up to each node (the curve minus L is alpha Q - P over them)
    q_cdf = max(bins.q_low - loss.neg_inf_mass, 0.0) \
        + np.concatenate([[0.0], np.cumsum(qb[:n - 1])])
    # masses above the top node g_{n-1}: the last bin and what lies above the grid
    p_tail = max(bins.p_top + pb[-1] - inf_true, 0.0)
    q_tail = math.exp(bins.lq_top) + qb[-1]
    p_sf = p_tail + np.concatenate([np.cumsum(pb[n - 2::-1])[::-1], [0.0]])
    q_sf = q_tail + np.concatenate([np.cumsum(qb[n - 2::-1])[::-1], [0.0]])
    a = np.exp(g[:n])
    h = a[:-1] * em1
    room = np.maximum(a * q_cdf - p_cdf, 0.0)
    roof = np.maximum(p_sf - a * q_sf, 0.0)
    return _Heights(room, roof, q_sf, a, h)


def _place_ends(c: np.ndarray, hts: _Heights, pts: _Tents, n: int
                ) -> tuple[int, int] | None:
    """``(J, K)``: the highest node ``J`` at which the true curve is within ``c_J`` of ``L``
    and the lowest ``K`` at which it is within ``c_K`` of the floor, put on them (``c`` is
    updated in place, and so are the lowerings of their neighbours where a tent next to
    them asks for more); None if they do not leave a segment between them."""
    room, roof = hts.room, hts.roof
    for _ in range(n):
        on_l = np.nonzero(c >= room)[0]
        on_f = np.nonzero(c >= roof)[0]
        J = int(on_l[-1]) if on_l.size else 0
        K = int(on_f[0]) if on_f.size else n - 1
        if K - J < 1:
            return None
        c[J], c[K] = room[J], roof[K]
        # the tents next to them, now that those two nodes moved
        i = K - 1
        sv, gv = pts[i]
        if np.any((1 - sv) * c[i] + sv * c[K] < gv):
            if np.any((sv >= 1) & (gv > c[K])):
                return None
            inner = sv < 1
            c[i] = float(np.max((gv[inner] - sv[inner] * c[K]) / (1 - sv[inner]))) * (1 + 1e-12)
            continue
        sv, gv = pts[J]
        if np.any((1 - sv) * c[J] + sv * c[J + 1] < gv):
            if np.any((sv <= 0) & (gv > c[J])):
                return None
            inner = sv > 0
            c[J + 1] = float(np.max((gv[inner] - (1 - sv[inner]) * c[J]) / sv[inner])) \
                * (1 + 1e-12)
            continue
        return J, K
    return None


def _node_masses(loss: PrivacyLoss, upper: DiscretePLD, bins: Bins, c: np.ndarray,
                 hts: _Heights, *, J: int, K: int, em1: float, ed: float
                 ) -> np.ndarray | None:
    """The P-masses of the nodes ``J..K``: connect-the-dots' masses minus the second
    difference of ``c``, the kinks onto ``L`` and the floor, and where that interpolant is
    not convex the masses of its greatest convex minorant; None if a mass is negative
    beyond rounding."""
    pb, log_rho = bins.pb, bins.log_rho
    room, roof, q_sf, a, h = hts
    n = c.size
    # P-masses on nodes J..K (accurate form: CTD's masses minus the second difference of c)
    pi = np.zeros(n)
    dc = np.diff(c)  # dc[j] = c_{j+1} - c_j
    mid = slice(J + 1, K)
    pi[mid] = upper.probs[mid] - dc[J + 1:K] / em1 + ed * dc[J:K - 1] / em1
    pi[J] = (room[J + 1] - c[J + 1]) / em1  # L's kink into the first segment
    pi[K] = ed * (roof[K - 1] - c[K - 1]) / em1  # last segment's kink onto the floor
    bad = np.nonzero(pi[J + 1:K] < 0)[0] + 1  # (node - J) where the interpolant is concave
    if bad.size:
        # a convex minorant: the slopes' isotonic regression (it pools only around the
        # concave nodes)
        iv = slice(J, K)  # intervals J..K-1
        m = -q_sf[J + 1:K + 1] - pb[iv] * -np.expm1(log_rho[iv]) / h[iv]  # chord slopes
        s = m - dc[iv] / h[iv]
        s[0] = -(1.0 - loss.neg_inf_mass) + (room[J + 1] - c[J + 1]) / h[J]
        s[-1] = -(roof[K - 1] - c[K - 1]) / h[K - 1]
        sv, pooled = _pool_violators(s, h[iv], bad)
        # nodes touching a pooled segment: e^{g_j} times the slope increase
        left = np.concatenate([[-(1.0 - loss.neg_inf_mass)], sv])  # slope left of node J+r
        right = np.concatenate([sv, [0.0]])
        touch = np.nonzero(np.concatenate([[False], pooled]) | np.concatenate([pooled, [False]]))[0]
        pi[J + touch] = a[J + touch] * (right[touch] - left[touch])
        # inside a pooled run the increase is 0 by construction
        inner = np.nonzero(np.concatenate([[False], pooled[:-1] & pooled[1:]
                                           & (sv[:-1] == sv[1:]), [False]]))[0]
        pi[J + inner] = 0.0
    neg = pi < 0
    if neg.any():
        # what is left is rounding of the slopes' differences (relative 1e-13 or so): it is
        # put back to 0, like the rounding of every other mass (README, floating point)
        if np.any(pi[neg] < -1e-12 * max(float(pi.max()), 1e-300)):
            return None
        pi[neg] = 0.0
    return pi


def _without_excess(loss: PrivacyLoss, pi: np.ndarray, g: np.ndarray, J: int, n: int
                    ) -> np.ndarray | None:
    """``pi`` with its rounding excess over total P- or Q-mass 1 taken off the node ``J``;
    None if that node cannot carry it.

    The kink masses at J and K divide differences of O(1) quantities by e^d - 1: on a grid
    fine against the loss their rounding (absolute ~u / d) can push the law's total P- or
    Q-mass above 1, and a law of mass 1 + 1e-9 composed 1e7 times is 1% too heavy (lower
    above upper). The excess is taken off the lowest node: removing mass only lowers every
    composed curve, so the pair stays below the true one."""
    inf_true = float(loss.inf_mass)
    excess_p = float(np.sum(pi)) + inf_true - 1.0
    excess_q = float(np.sum(pi * np.exp(-g[:n]))) - (1.0 - loss.neg_inf_mass)
    cut = max(excess_p, excess_q * math.exp(g[J]), 0.0)
    if cut > 0.0:
        cut = cut * (1 + 1e-6) + 4 * UNIT_ROUNDOFF * max(float(np.sum(pi)), 1.0)
        if cut > pi[J]:
            return None
        pi[J] -= cut
    return pi


class _Tents(dict):
    """Per interval ``j``, the points ``(s, G)`` below which the true curve cannot go: at
    the fraction ``s`` of the interval (in ``alpha``) it is at most ``G`` below the chord.
    The single tent (``theta_j``, ``G_j``) unless the interval was refined."""

    def __init__(self, theta: np.ndarray, gap: np.ndarray):
        super().__init__()
        self.theta, self.gap = theta, gap
        self.rows: dict = {}  # refined interval -> its row of s_all, g_all
        self.s_all: np.ndarray | None = None
        self.g_all: np.ndarray | None = None

    def refine(self, js: np.ndarray, rows: np.ndarray, s_all: np.ndarray,
               g_all: np.ndarray) -> None:
        """Intervals ``js`` keep the points of rows ``rows`` of ``(s_all, g_all)`` (looked
        up when asked: the searches ask for a few intervals)."""
        self.rows = dict(zip(js.tolist(), rows.tolist(), strict=True))
        self.s_all, self.g_all = s_all, g_all

    def __missing__(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        r = self.rows.get(j)
        if r is not None:
            return cast(np.ndarray, self.s_all)[r], cast(np.ndarray, self.g_all)[r]
        return np.array([self.theta[j]]), np.array([self.gap[j]])


#: intervals refined by :func:`_refined_gaps` (those of the largest tents) and their sub-bins
_REFINE_INTERVALS = 128
_REFINE_SUB = 16


def _largest_positive(x: np.ndarray, k: int) -> np.ndarray:
    """Indices, ascending, of the positive entries of ``x`` among the ``k`` that a full
    descending sort puts first (``argsort(x)[::-1][:k]``). By a partial sort where that set
    does not depend on how the sort orders equal values: the ``k``-th largest value is not
    positive (then every positive entry is among the ``k``), or no other entry equals it
    (then the ``k`` are those at or above it); else, and with NaNs, by the full sort."""
    n = x.size
    if n > k and not np.isnan(x).any():
        v = np.partition(x, n - k)[n - k]  # the k-th largest
        if v <= 0:
            return np.nonzero(x > 0)[0]
        top = x >= v
        if np.count_nonzero(top) == k:
            return np.nonzero(top)[0]
    pick = np.argsort(x)[::-1][:k]
    return np.sort(pick[x[pick] > 0])


def _refined_gaps(loss: PrivacyLoss, g: np.ndarray, gap: np.ndarray, theta: np.ndarray,
                  d: float, rows: tuple | None, share: float) -> tuple[np.ndarray, _Tents]:
    """Tighter bounds on how far the true curve lies below its chord, on the intervals of
    the largest tents (at most ``_REFINE_INTERVALS``).

    The single tent of an interval assumes the worst convex curve given only the bin's two
    masses: a kink at ``theta_j`` ``G_j`` below the chord. Where a loss is concentrated on a
    scale much smaller than ``d`` (a tiny sampling rate: the bulk of the losses within
    ``q`` of 0) that is most of the curve's height, and the lowered chords collapse to the
    trivial pair. Refined, the interval is cut into ``_REFINE_SUB`` sub-intervals at which
    the true curve is evaluated (``loss.delta``); on each the same convexity argument gives
    a sub-tent from the sub-bin's masses, so the curve lies above the upper envelope of the
    sub-tents, and the chord minus that envelope is piecewise linear with kinks at the
    sub-nodes and the sub-tents' peaks: its values there are the points ``(s, G)``. Each
    is raised by ``1e-9`` relative and an absolute ``1e-15`` of the curve's values there
    (their rounding). The refinement is kept where its largest point is below the tent's
    ``G_j`` (both bound the same distance); an interval with a sub-bin whose Q-mass
    underflowed keeps its tent. ``rows``: :func:`refined_rows` of the sub-nodes, computed
    with other losses' (else here)."""
    tents = _Tents(theta, gap)
    nodes = _sub_nodes(g, gap, d, share)
    if nodes is None:
        return gap, tents
    pick, ys = nodes
    if rows is None:
        rows = refined_rows(ys, loss.log_cdfs(ys.reshape(-1)), d)
    s_all, g_all, best, fit = rows
    usable = fit & (best < gap[pick])
    gap = gap.copy()
    kept = np.nonzero(usable)[0]
    gap[pick[kept]] = best[kept]
    tents.refine(pick[kept], kept, s_all, g_all)
    return gap, tents


def refined_rows(ys: np.ndarray, values: tuple, d: float) -> tuple[np.ndarray, ...]:
    """The points ``(s, G)`` of :func:`_refined_gaps` for each row of sub-nodes ``ys`` (of
    one loss's intervals, or of many losses' on grids of one step ``d``: rows are computed
    independently), from the loss's log CDFs ``values`` at ``ys.reshape(-1)``; with each
    row's largest ``G`` and whether the row can be used (no sub-bin's Q-mass underflowed,
    all points finite)."""
    m = _REFINE_SUB
    flat = ys.reshape(-1)  # non-decreasing within each row
    cv = delta_from_logs(flat, values[1], values[3]).reshape(ys.shape)  # the true curve
    pb, qb = bin_masses_from_logs(*values)  # the bins between rows are not used
    keep = (np.arange(flat.size - 1) % (m + 1)) < m
    pb, qb = pb[keep].reshape(ys.shape[0], m), qb[keep].reshape(ys.shape[0], m)
    a = np.exp(ys - ys[:, :1])  # alpha / alpha_j: the fraction s is scale-free
    span = a[:, -1:] - a[:, :1]
    rise = cv[:, -1:] - cv[:, :1]
    chord = cv[:, :1] + (a - a[:, :1]) / span * rise
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(pb > 0, qb * np.exp(ys[:, :-1]) / pb, 1.0)
    rho = np.clip(np.nan_to_num(rho, nan=1.0), math.exp(-d / m), 1.0)
    th = np.clip((1 - rho) / (rho * math.expm1(d / m)), 0.0, 1.0)
    tent = pb * (1 - rho) * (1 - th)
    pk = a[:, :-1] + th * (a[:, 1:] - a[:, :-1])  # the sub-tents' peaks
    chord_pk = cv[:, :1] + (pk - a[:, :1]) / span * rise
    env_pk = cv[:, :-1] + th * (cv[:, 1:] - cv[:, :-1]) - tent
    # the interior sub-nodes (at the interval's own nodes the chord is the curve) and the
    # sub-tents' peaks
    s_all = np.concatenate([(a[:, 1:-1] - a[:, :1]) / span, (pk - a[:, :1]) / span], axis=1)
    g_all = np.concatenate([(chord - cv)[:, 1:-1], chord_pk - env_pk], axis=1)
    # rounding: 1e-9 relative and 4e-15 of the curve's values absolute, tapered to 0 over
    # the first and last sub-interval (at the nodes the chord is the curve, and a constant
    # charge there would force c of the next node to charge / s)
    taper = np.clip(np.minimum(s_all, 1.0 - s_all) * m, 0.0, 1.0)
    g_all = np.maximum(g_all, 0.0) * (1 + 1e-9) \
        + 4e-15 * np.max(cv, axis=1, keepdims=True) * taper
    g_all = np.where((s_all > 0) & (s_all < 1), g_all, 0.0)  # nodes: nothing to keep
    fit = ~np.any((pb > 0) & ~(qb > 0), axis=1) & np.all(np.isfinite(g_all), axis=1)
    return s_all, g_all, np.max(g_all, axis=1), fit


def _pool_violators(s: np.ndarray, w: np.ndarray, bad: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Make the slopes ``s`` (weights ``w``) non-decreasing around the violations
    ``s[r - 1] > s[r]`` for ``r`` in ``bad``: their isotonic regression by
    pool-adjacent-violators (Barlow et al. 1972; scipy's ``isotonic_regression``, in C,
    one pass), whose blocks that hold such a violation are kept. The other blocks pool only
    rounding noise of slopes that the accurate masses found convex: they stay as they are,
    and still join the kept blocks monotonically (the first slope of a pooled block is at
    least its mean, its last at most). Pooling replaces a run of segments by their chord
    (the weighted mean of their slopes), so the curve only moves down and becomes convex
    there. Returns the new slopes and the mask of pooled segments."""
    fit = isotonic_regression(s, weights=w, increasing=True)
    ln = np.diff(fit.blocks)
    block = np.repeat(np.arange(ln.size), ln)
    bad = bad[(bad > 0) & (bad < s.size)]
    keep = np.zeros(ln.size, dtype=bool)
    keep[block[bad][block[bad] == block[bad - 1]]] = True
    pooled = np.repeat(keep & (ln > 1), ln)
    return np.where(pooled, fit.x, s), pooled
