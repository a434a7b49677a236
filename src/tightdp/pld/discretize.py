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


def _grid(d: float, lo: float, hi: float, shift: float = 0.0) -> tuple[int, int]:
    j_lo = int(math.floor((lo - shift) / d))
    j_hi = int(math.ceil((hi - shift) / d))
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    return j_lo, j_hi


def connect_the_dots(loss: PrivacyLoss, d: float, lo: float, hi: float,
                     shift: float = 0.0) -> DiscretePLD:
    """Dominating discrete pair on the grid ``shift + j d`` (upper bound); see the module
    docstring."""
    j_lo, j_hi = _grid(d, lo, hi, shift)
    g = shift + np.arange(j_lo, j_hi + 1) * d
    pb, qb = loss.bin_masses(g)  # bins (g_j, g_{j+1}]
    n = g.size
    probs = np.zeros(n)
    # interior bins: split preserving P and Q mass
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rho = np.log(qb) + g[:-1] - np.log(pb)
    rho = np.clip(np.exp(np.nan_to_num(log_rho, nan=0.0, neginf=-d, posinf=0.0)),
                  math.exp(-d), 1.0)
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
    return DiscretePLD(d, j_lo, probs, inf_mass, {"kind": "connect_the_dots"}, shift)


def dominated(loss: PrivacyLoss, d: float, lo: float, hi: float,
              shift: float = 0.0) -> DiscretePLD:
    """Dominated discrete pair on the grid ``shift + j d`` (lower bound); see the module
    docstring."""
    j_lo, j_hi = _grid(d, lo, hi, shift)
    g = shift + np.arange(j_lo, j_hi + 1) * d
    edges = np.concatenate([g - d / 2, [g[-1] + d / 2]])
    pb, qb = loss.bin_masses(edges)
    # everything above the last edge (finite losses) merges into the top atom
    p_above = float(loss.p_sf(np.asarray(edges[-1]))) - loss.inf_mass
    q_above = float(loss.q_sf(np.asarray(edges[-1])))
    pb[-1] += max(p_above, 0.0)
    qb[-1] += q_above
    out = _merge_to_grid(pb, qb, g, d, j_lo, float(loss.inf_mass))
    out.shift = shift
    return out


def _excess(p: np.ndarray, q: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``p e^{-g} - q``: how far an atom's likelihood ratio is above ``e^g`` (scaled)."""
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        pe = np.where(p > 0, np.exp(np.log(np.where(p > 0, p, 1.0)) - g), 0.0)
    return pe - q


def _merge_to_grid(pb: np.ndarray, qb: np.ndarray, g: np.ndarray, d: float, j_lo: int,
                   inf_mass: float) -> DiscretePLD:
    """Merge the bin atoms ``(pb, qb)`` (bin j centred on ``g[j]``) into labels whose
    likelihood ratio is exactly ``e^{g_j}`` where possible, then round every label down.

    Pass 1: a label below its grid point (deficit) takes the fraction of the next bin that
    lifts it to ``e^{g_j}`` (slightly more, so rounding cannot leave it short).
    Pass 2: a label above its grid point (surplus) takes a fraction of the remaining part of
    the bin below that brings it down towards ``e^{g_j}``; the fraction is computed against a
    lower bound of what that label keeps, so it never overshoots (an overshoot would need a
    whole grid step of rounding). Labels that still fall short drop one grid point.
    Every operation merges fractions of outputs, so the result is a post-processing of the
    original pair.
    """
    n = g.size
    e_own = _excess(pb, qb, g)  # excess of bin j against its own point
    e_up = _excess(pb[1:], qb[1:], g[:-1])  # bin j+1 against point j (> 0)
    e_dn = -_excess(pb[:-1], qb[:-1], g[1:])  # bin j-1 against point j (deficit, > 0)
    # pass 1: deficits
    phi = np.zeros(n)
    deficit = np.maximum(-e_own[:-1], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi[:-1] = np.where(deficit > 0, np.minimum(deficit / e_up * (1 + 1e-12), 1.0), 0.0)
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
    demote = exc < -1e-13 * np.maximum(p_lab * np.exp(np.minimum(-g, 700.0)), 1e-300)
    probs = np.zeros(n + 1)  # one extra point below for demoted labels
    probs[1:] += np.where(demote, 0.0, p_lab)
    probs[:-1] += np.where(demote, p_lab, 0.0)
    out = DiscretePLD(d, j_lo - 1, np.maximum(probs, 0.0), inf_mass, {"kind": "dominated"})
    out.meta["demoted"] = int(demote.sum())
    return out
