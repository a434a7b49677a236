"""The discretizers of :mod:`tightdp.pld.discretize` for many losses at once: a composition
of many distinct mechanisms (a noise schedule: one Poisson-subsampled Gaussian per step, each
with its own noise) evaluates the losses' CDFs at every loss's grid points in a few array
operations (:func:`tightdp.losses.families.log_cdfs_many`) instead of a few dozen per loss.

Each law is the one the single-loss discretizer builds from the same CDF values:
:func:`connect_the_dots_many` gives :func:`~tightdp.pld.discretize.connect_the_dots`'s,
:func:`certified_pairs_lazy_many` :func:`~tightdp.pld.discretize.pair_from_bins`'s with the
lowered chords refined on the larger tents only (``REFINE_SHARE``; the losses evaluate their
CDFs point by point, so the values are the same floats).
:func:`loss_ranges_many` finds ends with the guarantee of the coarse
:func:`~tightdp.pld.discretize.loss_range` (the tail beyond each end holds at most the mass
asked) by a sparser search of the same candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._numerics import log_sub_exp
from ..losses import PrivacyLoss
from ..losses.base import bin_masses_from_logs
from ..losses.families import log_cdfs_many
from .discretize import (
    LazyLower,
    bins_from_values,
    connect_the_dots_from_bins,
    grid_indices,
    pair_from_bins,
)
from .grid import Bins, DiscretePLD
from .lowered_chords import refined_rows

__all__ = ["build_lowers", "certified_pairs_lazy_many", "connect_the_dots_many",
           "loss_ranges_many"]

#: the candidates of the ends' search, as the coarse loss_range's: 0 and 2^-30 .. 2^996
_OUTWARD = np.concatenate([[0.0], np.exp2(np.arange(-30.0, 997.0))])
#: the search first tries every _STRIDE-th candidate, then those just before the first good
_STRIDE = 32
#: the lowered chords of many terms refine only the tents at least this fraction of their
#: largest one (:func:`~tightdp.pld.lowered_chords.refine_points`): with many terms the
#: sub-nodes of every term's refined intervals cost about as many CDF evaluations as all
#: their grids, while the smaller tents carry little of the lowering (the lower bound gives
#: up only their part of the refinement's gain; a dominated pair either way: figures in
#: docs/pld-constants.md)
REFINE_SHARE = 1e-2
#: the most points of one evaluation of many losses' CDFs (its temporaries: about 130 bytes
#: a point for a two-component mixture)
_CHUNK_POINTS = 1 << 20


def _chunks(sizes: list[int]) -> list[slice]:
    """Consecutive runs of items whose sizes add up to at most ``_CHUNK_POINTS`` (one item
    at least): what one evaluation takes, so that its temporaries stay bounded however many
    terms there are."""
    out, start, total = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and total + n > _CHUNK_POINTS:
            out.append(slice(start, i))
            start, total = i, 0
        total += n
    out.append(slice(start, len(sizes)))
    return out


def _bins_many(losses: list[PrivacyLoss], grids: list[tuple[float, float, float]]
               ) -> list[Bins]:
    """The :class:`Bins` of each loss on the grid ``j d`` covering ``[lo, hi]``, for
    ``(d, lo, hi)`` in ``grids``, from one evaluation of the CDFs of each chunk of losses."""
    idx = [grid_indices(d, lo, hi) for d, lo, hi in grids]
    out: list[Bins] = []
    for sl in _chunks([j_hi - j_lo + 1 for j_lo, j_hi in idx]):
        out += _bins_chunk(losses[sl], grids[sl], idx[sl])
    return out


def _bins_chunk(losses: list[PrivacyLoss], grids: list[tuple[float, float, float]],
                idx: list[tuple[int, int]]) -> list[Bins]:
    """:func:`_bins_many` of one chunk of losses, ``idx`` their grids' index ranges."""
    gs = [np.arange(j_lo, j_hi + 1) * d for (j_lo, j_hi), (d, _, _) in zip(idx, grids,
                                                                            strict=True)]
    vals = log_cdfs_many(losses, gs)
    # the bins of all losses side by side: those across two losses' grids are dropped
    cat = [np.concatenate([v[i] for v in vals]) for i in range(4)]
    pb, qb = bin_masses_from_logs(*cat)
    g = np.concatenate(gs)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rho = np.log(qb) + g[:-1] - np.log(pb)
    out = []
    start = 0
    for loss, (j_lo, _), gi, v, (d, _, _) in zip(losses, idx, gs, vals, grids, strict=True):
        sl = slice(start, start + gi.size - 1)
        masses = (pb[sl].copy(), qb[sl].copy(), log_rho[sl].copy())
        out.append(bins_from_values(loss, d, j_lo, gi, v, masses))
        start += gi.size
    return out


def connect_the_dots_many(losses: list[PrivacyLoss], grids: list[tuple[float, float, float]]
                          ) -> list[DiscretePLD]:
    """:func:`~tightdp.pld.discretize.connect_the_dots` of each loss on its grid ``j d``
    over ``[lo, hi]``, for ``(d, lo, hi)`` in ``grids`` (the dominating pairs of Doroshenko
    et al. 2022)."""
    return [connect_the_dots_from_bins(d, b)
            for b, (d, _, _) in zip(_bins_many(losses, grids), grids, strict=True)]


def certified_pairs_lazy_many(losses: list[PrivacyLoss], d: float,
                              ranges: list[tuple[float, float]]
                              ) -> list[tuple[DiscretePLD, Callable[[], DiscretePLD]]]:
    """:func:`~tightdp.pld.discretize.certified_pair_lazy` of each loss on the grid ``j d``
    over its range ``(lo, hi)`` (one grid step of margin at both ends, as there), the lower
    pairs' lowered chords refined where the tents are at least ``REFINE_SHARE`` of the
    largest."""
    bins = _bins_many(losses, [(d, lo - d, hi + d) for lo, hi in ranges])
    return [pair_from_bins(loss, d, lo, hi, 0.0, b, share=REFINE_SHARE)
            for loss, (lo, hi), b in zip(losses, ranges, bins, strict=True)]


def build_lowers(lowers: list) -> list[DiscretePLD]:
    """The lower pairs of :func:`certified_pairs_lazy_many` (:class:`LazyLower` each, else a
    function returning the pair): the CDFs their lowered chords need are evaluated for all
    losses at once, and the refined tents of all of them computed together
    (:func:`~tightdp.pld.lowered_chords.refined_rows` works row by row)."""
    by_step: dict = {}
    for lw in lowers:
        ys = lw.points() if isinstance(lw, LazyLower) else None
        if ys is not None:
            by_step.setdefault(lw.grid[0], []).append((lw, ys))
    for d, every in by_step.items():
        for part in _chunks([ys.size for _, ys in every]):
            todo = every[part]
            vals = log_cdfs_many([lw.loss for lw, _ in todo],
                                 [ys.reshape(-1) for _, ys in todo])
            rows = refined_rows(np.concatenate([ys for _, ys in todo]),
                                tuple(np.concatenate([v[i] for v in vals]) for i in range(4)),
                                d)
            start = 0
            for lw, ys in todo:
                sl = slice(start, start + ys.shape[0])
                lw(tuple(r[sl] for r in rows))
                start += ys.shape[0]
    return [lw() for lw in lowers]


def _small_many(jobs: list[tuple[PrivacyLoss, bool]], points: list[np.ndarray],
                log_mass: float) -> list[np.ndarray]:
    """Per job ``(loss, upper)``: where the P-mass of the finite losses beyond each point
    (above it if ``upper``, else at or below it) is at most ``e^log_mass`` (NaN: not known
    to be small)."""
    vals = log_cdfs_many([loss for loss, _ in jobs], points)
    out = []
    for (loss, upper), v in zip(jobs, vals, strict=True):
        with np.errstate(all="ignore"):
            t = v[1] if upper else v[0]
            if upper and loss.inf_mass > 0:
                t = log_sub_exp(t, np.full(t.shape, math.log(loss.inf_mass)))
        out.append(np.asarray(t, dtype=float) <= log_mass)
    return out


def loss_ranges_many(losses: list[PrivacyLoss], log_tail: float) -> list[tuple[float, float]]:
    """A finite loss interval per loss outside of which each tail has P-mass at most
    ``e^log_tail`` (as the coarse :func:`~tightdp.pld.discretize.loss_range`): a finite end
    of the support, else among the same candidates (``start +- 2^j``) the first one whose
    tail is small found from every ``_STRIDE``-th, then refined by two rounds of 64 points
    across the bracket. Every end returned was checked to hold at most the mass asked."""
    ends: dict = {}
    jobs: list = []
    for i, loss in enumerate(losses):
        s_lo, s_hi = loss.support
        for upper, end, other in ((False, s_lo, s_hi), (True, s_hi, s_lo)):
            if math.isfinite(end):
                ends[(i, upper)] = float(end)
            else:
                start = float(other) if math.isfinite(other) else 0.0
                jobs.append((i, upper, start + (1.0 if upper else -1.0) * _OUTWARD))
    if jobs:
        _search_ends(losses, jobs, log_tail, ends)
    out = []
    for i in range(len(losses)):
        lo, hi = ends[(i, False)], ends[(i, True)]
        out.append((lo, max(hi, lo)))
    return out


def _search_ends(losses: list[PrivacyLoss], jobs: list, log_tail: float, ends: dict) -> None:
    """The ends of :func:`loss_ranges_many` for ``jobs`` ``(loss index, upper, candidates)``,
    into ``ends``."""
    pairs = [(losses[i], upper) for i, upper, _ in jobs]
    sparse = np.unique(np.concatenate([np.arange(0, _OUTWARD.size, _STRIDE),
                                       [_OUTWARD.size - 1]]))
    oks = _small_many(pairs, [c[sparse] for _, _, c in jobs], log_tail)
    brackets: list = []
    second: list = []
    for (i, upper, cand), ok in zip(jobs, oks, strict=True):
        if not ok.any():
            ends[(i, upper)] = float(cand[-1])
            continue
        k = int(sparse[int(np.argmax(ok))])
        if k == 0:
            ends[(i, upper)] = float(cand[0])
            continue
        prev = int(sparse[int(np.argmax(ok)) - 1])
        second.append((i, upper, cand, prev, k))
    oks = _small_many([(losses[i], u) for i, u, _, _, _ in second],
                      [c[p + 1:k] for _, _, c, p, k in second], log_tail)
    for (i, upper, cand, prev, k), ok in zip(second, oks, strict=True):
        j = prev + 1 + int(np.argmax(ok)) if ok.any() else k  # cand[k] is small
        brackets.append([i, upper, float(cand[j - 1]), float(cand[j])])
    for _ in range(2):  # two rounds of 64 points across [inner, outer]
        pts = [np.linspace(b[2], b[3], 65) for b in brackets]
        oks = _small_many([(losses[b[0]], b[1]) for b in brackets], pts, log_tail)
        for b, p, ok in zip(brackets, pts, oks, strict=True):
            ok[-1] = True  # the outer end is small (checked)
            j = int(np.argmax(ok))
            if j > 0:
                b[2], b[3] = float(p[j - 1]), float(p[j])
    for i, upper, _, outer in brackets:
        ends[(i, upper)] = outer
