"""The log CDFs of many privacy losses at once: a composition of many distinct mechanisms of
one family (a noise schedule: one Poisson-subsampled Gaussian per step, each with its own
noise) evaluates them in a few array operations instead of a few dozen per loss.

:func:`log_cdfs_many` gives, for each loss, what its :meth:`~PrivacyLoss.log_cdfs` gives at
its points, bit for bit: the location mixtures of one kernel and shape
(:class:`~tightdp.losses.mixture.LocationMixtureLoss`) are evaluated together, every point
with its own loss's locations, weights and scale, by the same operations on the same floats
as :meth:`LocationMixtureLoss._mix` (a kernel value at a location both mixtures share is
computed once); any other loss is asked itself.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from .._numerics import lse_last
from .base import PrivacyLoss
from .mixture import LocationMixtureLoss

__all__ = ["log_cdfs_many"]

#: points per block of the mixture evaluation (the (points x components) temporaries stay in
#: cache)
_BLOCK = 4096


def log_cdfs_many(losses: list[PrivacyLoss], points: list[np.ndarray]) -> list[tuple]:
    """``[loss.log_cdfs(y) for loss, y in zip(losses, points)]``, the same values, with the
    location mixtures of one kernel and shape evaluated together (see the module
    docstring). ``points``: 1-d arrays."""
    out: list = [None] * len(losses)
    groups: dict = {}
    for i, loss in enumerate(losses):
        if isinstance(loss, LocationMixtureLoss):
            key = (loss.kernel.name, loss.a.size, loss.b.size)
            groups.setdefault(key, []).append(i)
        else:
            out[i] = loss.log_cdfs(np.asarray(points[i], dtype=float))
    for idx in groups.values():
        vals = _mixture_group([losses[i] for i in idx], [points[i] for i in idx])
        for i, v in zip(idx, vals, strict=True):
            out[i] = v
    return out


def _per_point(rows: list[np.ndarray], sizes: np.ndarray) -> np.ndarray:
    """Each loss's row (its locations or log weights) repeated for each of its points."""
    return np.repeat(np.array(rows, dtype=float), sizes, axis=0)


def _mixture_group(losses: list[LocationMixtureLoss], points: list[np.ndarray]) -> list[tuple]:
    """:func:`log_cdfs_many` of location mixtures of one kernel and shape."""
    ys = [np.atleast_1d(np.asarray(y, dtype=float)) for y in points]
    sizes = np.array([y.size for y in ys])
    x = _inverses(losses, ys, sizes)
    s = np.repeat(np.array([loss.s for loss in losses]), sizes)
    a = _per_point([loss.a for loss in losses], sizes)
    b = _per_point([loss.b for loss in losses], sizes)
    # a Q component at the location of a P component in every loss: its kernel values are
    # those of the P component
    same = {j: i for j in range(b.shape[1]) for i in range(a.shape[1])
            if all(loss.b[j] == loss.a[i] for loss in losses)}
    pc, ps, qc, qs = _mixtures(x, s, (a, _per_point([lo.lpw for lo in losses], sizes)),
                               (b, _per_point([lo.lqw for lo in losses], sizes)),
                               losses[0].kernel, same)
    # each mixture's log total weight (lse_last row by row: each row's value as alone)
    lse_p = np.repeat(lse_last(np.array([lo.lpw for lo in losses])), sizes)
    lse_q = np.repeat(lse_last(np.array([lo.lqw for lo in losses])), sizes)
    # the whole mass or none where x*(y) is infinite (LocationMixtureLoss._tail)
    lo_inf, hi_inf = np.isneginf(x), np.isposinf(x)
    if lo_inf.any():  # x*(y) = -inf: no finite loss at or below y
        pc[lo_inf], qc[lo_inf] = -np.inf, -np.inf
        ps[lo_inf], qs[lo_inf] = lse_p[lo_inf], lse_q[lo_inf]
    if hi_inf.any():  # x*(y) = +inf: every finite loss at or below y
        pc[hi_inf], qc[hi_inf] = lse_p[hi_inf], lse_q[hi_inf]
        ps[hi_inf], qs[hi_inf] = -np.inf, -np.inf
    out = []
    ends = np.concatenate([[0], np.cumsum(sizes)])
    for k, loss in enumerate(losses):
        sl = slice(int(ends[k]), int(ends[k + 1]))
        shape = np.shape(points[k])
        vals = [pc[sl], ps[sl], qc[sl], qs[sl]]
        # the atoms outside the finite losses: P's at +inf, Q's at -inf
        if loss.inf_mass > 0:
            vals[1] = np.logaddexp(vals[1], math.log(loss.inf_mass))
        if loss.neg_inf_mass > 0:
            vals[2] = np.logaddexp(vals[2], math.log(loss.neg_inf_mass))
        out.append(tuple(v.reshape(shape) for v in vals))
    return out


def _inverses(losses: list[LocationMixtureLoss], ys: list[np.ndarray], sizes: np.ndarray
              ) -> np.ndarray:
    """``x*(y)`` of each loss at its points, side by side: as
    :meth:`LocationMixtureLoss.inverse`, the closed forms of all losses in one call where
    theirs has a method ``many(inverses, y, owner)`` (each inverse at the points ``y``
    whose index in ``inverses`` is ``owner``; None if it cannot), else loss by loss."""
    invs = [loss.closed_inverse for loss in losses]
    many = getattr(invs[0], "many", None)
    if many is None or losses[0].kernel.name != "gaussian":
        return np.concatenate([loss.inverse(y) for loss, y in zip(losses, ys, strict=True)])
    y = np.concatenate(ys)
    owner = np.repeat(np.arange(len(losses)), sizes)
    lo, hi = (np.array([loss.support[i] for loss in losses])[owner] for i in (0, 1))
    out = np.empty_like(y)
    below, above = y <= lo, y >= hi  # (the Gaussian kernel: the low end is not attained)
    out[below] = -np.inf
    out[above] = np.inf
    mid = ~(below | above)
    got = many(invs, y[mid], owner[mid]) if np.any(mid) else np.empty(0)
    if got is None:
        return np.concatenate([loss.inverse(y) for loss, y in zip(losses, ys, strict=True)])
    out[mid] = got
    return out


def _mixtures(x: np.ndarray, s: np.ndarray, p_side: tuple, q_side: tuple, kernel,
              same: dict) -> tuple[np.ndarray, ...]:
    """``log sum_i w_i F((x - c_i)/s)`` and the same with the survival function for the P
    and the Q mixture, each point with its own locations ``c``, log weights and scale:
    :meth:`LocationMixtureLoss._mix` on every point (a Q component listed in ``same`` takes
    the kernel values of that P component)."""
    n = x.size
    out = [np.empty(n) for _ in range(4)]
    gauss = kernel.name == "gaussian"
    for i in range(0, n, _BLOCK):
        blk = slice(i, i + _BLOCK)
        xb, sb = x[blk], s[blk][:, None]
        kern: dict = {}
        for side, (locs, lw) in enumerate((p_side, q_side)):
            cs, ss = [], []
            for j in range(locs.shape[1]):
                if side == 1 and j in same:
                    c, sf = kern[same[j]]
                else:
                    z = xb - locs[blk, j]
                    z = z[:, None] / sb
                    with np.errstate(invalid="ignore", over="ignore"):
                        if gauss:
                            small = log_ndtr(-np.abs(z))
                            large = np.log1p(-np.exp(small))
                            neg = z <= 0
                            c, sf = np.where(neg, small, large), np.where(neg, large, small)
                        else:
                            c, sf = kernel.logcdf(z), kernel.logsf(z)
                    if side == 0:
                        kern[j] = (c, sf)
                cs.append(c)
                ss.append(sf)
            c = np.concatenate(cs, axis=1) + lw[blk]
            sf = np.concatenate(ss, axis=1) + lw[blk]
            with np.errstate(invalid="ignore", over="ignore"):
                out[2 * side][blk] = lse_last(c)
                out[2 * side + 1][blk] = lse_last(sf)
    return tuple(out)

