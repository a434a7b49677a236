"""The PLD accountant's per-term discretization: each term's loss range, its pilot law and
its certified pair on a grid, one loss at a time for a few terms and all losses together for
many (:mod:`tightdp.pld.families`: a noise schedule composes one distinct mechanism per
step).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..curves.saddle import rma_eps
from ..losses import PrivacyLoss
from ..pld.discretize import certified_pair_lazy, connect_the_dots, loss_range
from ..pld.families import certified_pairs_lazy_many, connect_the_dots_many, loss_ranges_many
from ..pld.grid import DiscretePLD
from ..pld.mgf import MANY_PARTS

__all__ = ["PILOT_TILTS", "discretize_seconds", "pilot_laws", "refined_moments_eps",
           "term_pairs", "term_ranges"]

#: bins of the pilot discretization across each loss's range
PILOT_BINS = 1024
#: the tilts at which a many-law pilot's refined-moments bound is evaluated exactly
#: (``PLDAccountant._pilot_eps_upper``)
PILOT_TILTS = 3

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


def refined_moments_eps(mgf, ts: np.ndarray, room: float) -> np.ndarray:
    """The refined-moments bound on eps where ``delta - P(S = inf) = room`` (Alghamdi et al.,
    eqs. (38), (42)) from the pilot's log-MGF ``mgf`` at each tilt of ``ts``, its ``K``
    raised by ``1e-11 k (1 + t max|y| + max|log p|)`` per law of count ``k`` (its rounding:
    a few ulps of the exponents ``log p + t y`` and of the sum, per law and step); NaN or
    inf where it gives none."""
    kk, _, _ = mgf.cumulants(ts)
    for ys, lp, k in mgf.parts:
        kk = kk + 1e-11 * k * (1.0 + ts * float(np.max(np.abs(ys)))
                               + float(np.max(np.abs(lp))))
    with np.errstate(invalid="ignore", over="ignore"):
        return rma_eps(kk, ts, math.log(room))
