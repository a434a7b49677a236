"""The PLD accountant's per-term discretization: each term's loss range, its pilot law and
its certified pair on a grid, one loss at a time for a few terms and all losses together for
many (:mod:`tightdp.pld.families`: a noise schedule composes one distinct mechanism per
step).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..curves.saddle import rma_eps, rma_log_delta
from ..losses import PrivacyLoss
from ..pld.discretize import certified_pair_lazy, connect_the_dots, loss_range
from ..pld.families import certified_pairs_lazy_many, connect_the_dots_many, loss_ranges_many
from ..pld.grid import DiscretePLD
from ..pld.mgf import MANY_PARTS

__all__ = ["PILOT_TILTS", "discretize_seconds", "pilot_delta_upper", "pilot_eps_upper",
           "pilot_laws", "refined_moments_eps", "term_pairs", "term_ranges"]

#: bins of the pilot discretization across each loss's range
PILOT_BINS = 1024
#: the tilts at which a many-law pilot's refined-moments bound is evaluated exactly
#: (``PLDAccountant._pilot_eps_upper``)
PILOT_TILTS = 3

#: the first tilts of the pilot's refined-moments bounds on delta, ``2^{j/8}`` for ``j`` in
#: this range (step 4): from 1e-3 to 1e4
PILOT_DELTA_TILTS = (-80, 107)

#: seconds per grid point of a certified pair's discretization (both laws), with room for a
#: loaded machine (docs/pld-constants.md)
SECONDS_PER_ATOM = 1e-6


def discretize_seconds(ranges: list[tuple[float, float]], d: float) -> float:
    """An estimate of the time :func:`term_pairs` takes on the loss ``ranges`` with grid step
    ``d`` (its work is proportional to the grid points), to refuse before starting it."""
    return SECONDS_PER_ATOM * sum((hi - lo) / d + 4 for lo, hi in ranges)


def term_ranges(cache: dict, losses: list[PrivacyLoss], log_tail: float
                ) -> list[tuple[float, float]]:
    """The coarse :func:`~tightdp.pld.discretize.loss_range` of each loss at ``log_tail``,
    remembered in ``cache`` (with the loss, so that its id stays its own); those of many
    losses by :func:`~tightdp.pld.families.loss_ranges_many`."""
    todo = [loss for loss in losses if ("range", id(loss), log_tail) not in cache]
    if len(todo) >= MANY_PARTS:
        found = loss_ranges_many(todo, log_tail)
    else:
        found = [loss_range(loss, log_tail, coarse=True) for loss in todo]
    for loss, r in zip(todo, found, strict=True):
        cache[("range", id(loss), log_tail)] = (r, loss)
    return [cache[("range", id(loss), log_tail)][0] for loss in losses]


def pilot_laws(losses: list[PrivacyLoss], ranges: list[tuple[float, float]]
               ) -> list[DiscretePLD]:
    """Connect-the-dots laws of the losses, each on ``PILOT_BINS`` bins of its own range."""
    grids = [(max(hi - lo, 1e-12) / PILOT_BINS, lo, hi) for lo, hi in ranges]
    if len(losses) >= MANY_PARTS:
        return connect_the_dots_many(losses, grids)
    return [connect_the_dots(loss, step, lo, hi)
            for loss, (step, lo, hi) in zip(losses, grids, strict=True)]


def term_pairs(losses: list[PrivacyLoss], d: float, ranges: list[tuple[float, float]]
               ) -> list[tuple[DiscretePLD, Callable[[], DiscretePLD]]]:
    """:func:`~tightdp.pld.discretize.certified_pair_lazy` of each loss on the grid ``j d``
    over its range."""
    if len(losses) >= MANY_PARTS:
        return certified_pairs_lazy_many(losses, d, ranges)
    return [certified_pair_lazy(loss, d, lo, hi) for loss, (lo, hi) in zip(losses, ranges,
                                                                          strict=True)]


def _raised_cgf(mgf, ts: np.ndarray) -> np.ndarray:
    """The log-MGF ``mgf``'s ``K`` at the tilts ``ts`` raised by ``1e-11 k (1 + t max|y| +
    max|log p|)`` per law of count ``k``: its rounding (a few ulps of the exponents ``log p
    + t y`` and of the sum, per law and step), so that it bounds the exact ``K`` above."""
    kk, _, _ = mgf.cumulants(ts)
    for ys, lp, k in mgf.parts:
        kk = kk + 1e-11 * k * (1.0 + ts * float(np.max(np.abs(ys)))
                               + float(np.max(np.abs(lp))))
    return kk


def refined_moments_eps(mgf, ts: np.ndarray, room: float) -> np.ndarray:
    """The refined-moments bound on eps where ``delta - P(S = inf) = room`` (Alghamdi et al.,
    eqs. (38), (42)) from the pilot's log-MGF ``mgf`` at each tilt of ``ts``, its ``K``
    raised for rounding (:func:`_raised_cgf`); NaN or inf where it gives none."""
    kk = _raised_cgf(mgf, ts)
    with np.errstate(invalid="ignore", over="ignore"):
        return rma_eps(kk, ts, math.log(room))


def pilot_eps_upper(mgf, t0: float, room: float) -> float:
    """A certified upper bound on eps(delta) of one direction from its pilot's log-MGF
    ``mgf`` (``PLDAccountant._pilot_eps_upper``): the smallest refined-moments bound
    (:func:`refined_moments_eps`, ``room = delta - P(S = inf)``) over the tilts
    ``t0 2^{j/8}``, ``|j| <= 8`` around the saddle point's ``t0``; where the pilot's searcher
    is a coarsened copy (many laws), the tilts are ranked on it and the bound evaluated
    exactly at the ``PILOT_TILTS`` best (any tilt gives a bound). ``inf`` if none."""
    if not (room > 0 and math.isfinite(t0) and t0 > 0 and mgf.parts):
        return math.inf
    ts = t0 * np.exp2(np.arange(-8, 9) / 8.0)
    search = mgf.searcher()
    if search is not mgf:
        rough = refined_moments_eps(search, ts, room)
        ts = ts[np.argsort(np.where(np.isfinite(rough), rough, np.inf))[:PILOT_TILTS]]
    eps = refined_moments_eps(mgf, ts, room)
    eps = eps[np.isfinite(eps)]
    return max(float(np.min(eps)), 0.0) if eps.size else math.inf


def pilot_delta_upper(mgf, inf_mass: float, eps: np.ndarray) -> np.ndarray:
    """A certified upper bound on delta at each ``eps`` of one direction from its pilot's
    log-MGF ``mgf`` (no fine grid), ``inf_mass`` the pilot's ``P(S = inf)``.

    The pilot's laws are connect-the-dots pairs with their tails accounted for, so they
    dominate the direction's pair, and so does their composition ``S``; for every ``t > 0``
    ``delta(eps) <= P(S = inf) + M_t e^{K(t) - t eps}`` (the refined-moments bound,
    Alghamdi et al., eqs. (38), (42), (43)), ``K`` raised for rounding
    (:func:`_raised_cgf`), exact at every tilt (the coarsened searcher of many laws is
    far below ``K`` at large tilts, and may rank them wrongly): first at the points
    ``2^{j/2}`` of ``PILOT_DELTA_TILTS`` (1e-3 to 1e4: a law whose largest loss is near eps
    needs a large one), then at ``2^{j/8}`` around the best of each eps (the bound is convex
    in ``t``: ``K`` and ``log M_t`` are), the smallest kept. 1 where none is finite
    (``delta <= 1``)."""
    eps = np.asarray(eps, dtype=float)
    out = np.ones(eps.shape)
    ok = np.isfinite(eps)
    if not (ok.any() and mgf.parts):
        return out
    grid = np.exp2(np.arange(*PILOT_DELTA_TILTS, 4) / 8.0)
    with np.errstate(invalid="ignore", over="ignore"):
        first = rma_log_delta(_raised_cgf(mgf, grid)[None, :], grid[None, :],
                              eps[ok][:, None])
        best = grid[np.argmin(np.where(np.isnan(first), np.inf, first), axis=1)]
        ts = np.unique(best[:, None] * np.exp2(np.array([-3, -2, -1, 1, 2, 3]) / 8.0))
        exact = rma_log_delta(_raised_cgf(mgf, ts)[None, :], ts[None, :], eps[ok][:, None])
        exact = np.concatenate([first, exact], axis=1)
        log_b = np.min(np.where(np.isnan(exact), np.inf, exact), axis=1)
        # the sum rounded up: one ulp of each term is far inside the raise of K
        out[ok] = np.minimum(1.0, (inf_mass + np.exp(log_b)) * (1.0 + 1e-12))
    return out
