"""Discretizers: turn a :class:`~tightdp.mechanisms.loss.PrivacyLoss` into a
:class:`~tightdp.pld.grid.DiscretePLD` on the grid ``j * d``.

Two certified discretizers live here, one per side of the bracket. Both have a per-step
error of second order in ``d``, so the bracket of a k-fold composition stays tight where
plain rounding of the losses (first order, bias ``k d / 2``) drifts.

``connect_the_dots`` (upper bound)
    Doroshenko, Ghazi, Kamath, Kumar, Manurangsi (2022), "Connect the dots". Every output whose
    loss ``y`` lies in the bin ``(g_j, g_{j+1}]`` is split between the two grid points with
    weights chosen so that *both* the P-mass and the Q-mass of the bin are preserved:
    mass at ``g_{j+1}`` is ``(e^{-g_j} P_bin - Q_bin) / (e^{-g_j} - e^{-g_{j+1}})``. Splitting
    an output into two more informative outputs is the inverse of a post-processing, so the
    new pair dominates the old one (its hockey-stick curve is the chord of the convex curve
    ``alpha -> delta``, alpha = e^eps, between grid points), and domination is preserved by
    composition. The bin below the grid is split between ``-inf`` and the lowest point (all
    its P-mass moves up to it), the bin above between the top point and ``+inf``.

``dominated`` (lower bound)
    A post-processing of the mechanism's output, so its curve is below the true one at every
    eps and for every composition (data-processing inequality), followed by rounding losses
    *down*, which can only lower ``delta`` (``delta`` is non-decreasing in each loss value).
    Outputs are merged into centred bins ``(g_j - d/2, g_j + d/2]``; a merged atom whose
    loss falls below ``g_j`` receives the fraction of its upper neighbour's atom that lifts
    its likelihood ratio to exactly ``e^{g_j}`` (a merge again, hence a post-processing);
    every atom is then rounded down to its grid point. The rounding moves a loss by
    ``O(d^2)`` for a smooth loss density, so the bias per step is second order.
    Mass below the grid is dropped (its loss rounded down to -inf).
"""

from __future__ import annotations

import math

import numpy as np

from ..mechanisms.loss import PrivacyLoss
from .grid import DiscretePLD

__all__ = ["connect_the_dots", "dominated", "loss_range"]


def loss_range(loss: PrivacyLoss, log_tail: float) -> tuple[float, float]:
    """Finite loss interval outside of which each tail has P-mass at most ``e^log_tail``."""
    lo = loss.loss_quantile(log_tail, upper=False)
    hi = loss.loss_quantile(log_tail, upper=True)
    if hi < lo:
        hi = lo
    return lo, hi


def _grid(d: float, lo: float, hi: float) -> tuple[int, int]:
    j_lo = int(math.floor(lo / d))
    j_hi = int(math.ceil(hi / d))
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    return j_lo, j_hi


def connect_the_dots(loss: PrivacyLoss, d: float, lo: float, hi: float) -> DiscretePLD:
    """Dominating discrete pair on the grid (upper bound); see the module docstring."""
    j_lo, j_hi = _grid(d, lo, hi)
    g = np.arange(j_lo, j_hi + 1) * d
    pb, qb = loss.bin_masses(g)  # bins (g_j, g_{j+1}]
    n = g.size
    probs = np.zeros(n)
    # interior bins: split preserving P and Q mass
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rho = np.log(qb) + g[:-1] - np.log(pb)
    rho = np.clip(np.exp(np.nan_to_num(log_rho, nan=0.0, neginf=-d)), math.exp(-d), 1.0)
    up = pb * (1.0 - rho) / (-math.expm1(-d))
    up = np.clip(np.where(pb > 0, up, 0.0), 0.0, pb)
    probs[:-1] += pb - up
    probs[1:] += up
    # below the grid: all P-mass moves up to g_0 (the rest of Q goes to -inf)
    probs[0] += float(loss.p_cdf(np.asarray(g[0])))
    # above the grid: split between g_top and +inf preserving P and Q mass
    p_top = float(loss.p_sf(np.asarray(g[-1])))  # includes the mechanism's own +inf mass
    lq_top = float(loss.logq_sf(np.asarray(g[-1])))
    at_top = min(p_top, math.exp(min(lq_top + g[-1], 0.0))) if lq_top > -math.inf else 0.0
    probs[-1] += at_top
    inf_mass = max(p_top - at_top, 0.0)
    return DiscretePLD(d, j_lo, probs, inf_mass, {"kind": "connect_the_dots"})


def dominated(loss: PrivacyLoss, d: float, lo: float, hi: float) -> DiscretePLD:
    """Dominated discrete pair on the grid (lower bound); see the module docstring."""
    j_lo, j_hi = _grid(d, lo, hi)
    g = np.arange(j_lo, j_hi + 1) * d
    edges = np.concatenate([g - d / 2, [g[-1] + d / 2]])
    pb, qb = loss.bin_masses(edges)
    # everything above the last edge (finite losses) merges into the top atom
    p_above = float(loss.p_sf(np.asarray(edges[-1]))) - loss.inf_mass
    q_above = float(loss.q_sf(np.asarray(edges[-1])))
    pb[-1] += max(p_above, 0.0)
    qb[-1] += q_above
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(pb) - np.log(qb)  # merged loss of each bin (inf where Q-mass is 0)
    has = pb > 0
    # deficiency of bin j w.r.t. e^{g_j} and surplus of bin j+1 w.r.t. e^{g_j}, both / e^{g_j}
    with np.errstate(invalid="ignore", over="ignore"):
        deficit = np.where(has, pb * np.expm1(np.minimum(g - y, 700.0)), 0.0)
        deficit = np.maximum(deficit, 0.0)
        surplus = np.where(has[1:], -pb[1:] * np.expm1(np.minimum(g[:-1] - y[1:], 0.0)), 0.0)
    phi = np.zeros(g.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(surplus > 0, deficit[:-1] / surplus * (1 + 1e-12), np.inf)
    phi[:-1] = np.where(deficit[:-1] > 0, np.minimum(ratio, 1.0), 0.0)
    keep = np.ones(g.size)
    keep[1:] -= phi[:-1]  # bin j+1 gives phi_j of itself to label j
    p_lab = keep * pb
    p_lab[:-1] += phi[:-1] * pb[1:]
    # excess of each label over e^{g_j} (scaled): still deficient labels drop one grid point
    with np.errstate(invalid="ignore", over="ignore"):
        exc = keep * np.where(has, -pb * np.expm1(np.minimum(g - y, 700.0)), 0.0)
        exc[:-1] += phi[:-1] * np.where(has[1:], -pb[1:] * np.expm1(
            np.minimum(g[:-1] - y[1:], 700.0)), 0.0)
    demote = exc < -1e-15 * np.maximum(p_lab, 1e-300)
    probs = np.zeros(g.size + 1)  # one extra point below for demoted labels
    probs[1:] += np.where(demote, 0.0, p_lab)
    probs[:-1] += np.where(demote, p_lab, 0.0)
    return DiscretePLD(d, j_lo - 1, np.maximum(probs, 0.0), float(loss.inf_mass),
                       {"kind": "dominated"})
