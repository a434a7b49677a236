"""The part of random allocation's lattice laws where exactly one coordinate's likelihood ratio
is large (:mod:`tightdp.losses.allocation`).

The coordinates' ratios ``w_i`` are lognormal, heavy-tailed: a lattice of one step fine
enough for the body of the sum ``S = sum_i w_i`` and long enough for the tail of one large
``w_i`` would be far too long. The event ``N = #{i : w_i > c}`` (a function of the output)
splits the laws exactly: on ``N = 0`` every coordinate is at most ``c`` (the body: one FFT
on a fine lattice, :mod:`tightdp.losses.allocation`); on ``N = 1`` the sum is ``B + W``,
``B`` the sum of the others (each at most ``c``: the body's law of one coordinate fewer),
``W > c`` the large one. Since the privacy loss is ``log(S / t)``, ``S >= c`` there needs
resolving only relatively: ``W`` is split into octaves ``(R H_j, 2 R H_j]`` with
``H_j = 2^(e0 + j) h`` (``R H_0 = c``), and on octave ``j`` both ``W`` and ``B`` are rounded
at random to ``H_j Z`` keeping their means (``B`` from its fine law: ``2^(e0 + j)`` divides
the fine lattice, so the split weights ``r / 2^m`` are exact in binary), and their sum's law
is a direct convolution of two short nonnegative arrays (relative error at most the shorter
length times ``u`` per value: Higham 2002, Sec. 4.2). The outcome (the octave, the rounded
sum) is a randomized function of the output whose mean given the output is ``S``, so it
serves both sides of :mod:`tightdp.losses.allocation`: above in convex order, and a
post-processing. The event ``N >= 2`` is left out: the pairs complete it (the upper one by
the extreme spread, the lower one merged into one atom).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._numerics import UNIT_ROUNDOFF

__all__ = ["TailPart", "coarsen", "octaves", "tail_part"]


class TailPart(NamedTuple):
    """The ``N = 1`` part of one law (a measure of mass at most ``P(N = 1)``): atoms at the
    values ``s`` with masses ``mass``; the computed masses differ from the exact ones by at
    most ``pointwise`` (an array, per atom) and by ``l1`` in sum, and ``l1_s`` bounds
    ``sum_i |error_i| s_i``."""

    s: np.ndarray
    mass: np.ndarray
    pointwise: np.ndarray
    l1: float
    l1_s: float


def coarsen(law: np.ndarray, lo: int, shift: int) -> tuple[np.ndarray, int]:
    """``law`` (masses at ``(lo + i) h``) rounded at random to ``2^shift h Z`` keeping its
    mean: atom ``n = f 2^shift + r`` sends ``r / 2^shift`` of its mass to ``f + 1`` and the
    rest to ``f`` (exact weights). Returns the masses and the index of the first atom."""
    if shift == 0:
        return law, lo
    m = 1 << shift
    idx = lo + np.arange(law.size)
    f, r = idx >> shift, idx & (m - 1)
    up = law * (r / m)
    f0 = int(f[0])
    out = np.bincount(f - f0, weights=law - up, minlength=int(f[-1]) - f0 + 2)
    out[1:] += np.bincount(f - f0, weights=up, minlength=int(f[-1]) - f0 + 1)
    return out, f0


def tail_part(bodies: list[tuple[float, np.ndarray, float, float]], lo: int, h: float,
              e0: int, r_cells: int, tails: list) -> TailPart:
    """The ``N = 1`` part of a law: ``sum_b count_b conv(B_b, W_b)`` over octaves, from the
    fine laws ``bodies`` = [(count, law on ``lo ..`` of ``h Z``, its error bound in sum,
    at every point)] and the tail coordinates' rounded laws ``tails[j][b]`` (the pmf on
    ``R .. 2R`` of ``H_j Z`` of the large coordinate paired with body ``b``, as
    :func:`tightdp.losses.allocation.rounded_lognormal` gives it).

    Errors: a body computed within ``e`` in sum (``e_pt`` at every point) is, rounded, within
    ``e`` in sum and ``min(e, 2^j (2^e0 + 1) e_pt)`` at every point on octave ``j``;
    convolved with ``W`` (mass ``|W|``) within ``|W|`` times
    that; the roundings (the convolution's sums, the halvings' splits) add a relative
    ``(len + 7 + 3 j) u`` per value and body."""
    u = UNIT_ROUNDOFF
    s_all, m_all, pw_all = [], [], []
    l1 = l1_s = 0.0
    # each body rounded to the first octave's lattice, then halved octave by octave (a
    # chain of mean-preserving roundings is one); a coarse atom collects at most
    # ``2^e0 + 1`` fine ones, then twice the previous level's bound
    coarse = [coarsen(np.maximum(law, 0.0), lo, e0) for _, law, _, _ in bodies]
    for j, ws in enumerate(tails):
        shift = e0 + j
        if j:
            coarse = [coarsen(bc, f, 1) for bc, f in coarse]
        acc = None
        err_sum = err_pt = 0.0
        f0 = coarse[0][1]   # the bodies share their window: one first atom
        for (count, _, e_sum, e_pt), (bc, _), w in zip(bodies, coarse, ws, strict=True):
            if count == 0:
                continue
            c = count * np.convolve(bc, w)
            acc = c if acc is None else acc + c
            wm = float(w.sum())
            err_sum += count * wm * e_sum
            err_pt += count * wm * min(e_sum, float(1 << j) * ((1 << e0) + 1) * e_pt)
        if acc is None:
            continue
        big = float(1 << shift) * h
        s = big * (f0 + r_cells + np.arange(acc.size, dtype=float))
        # the convolution's sums, the scaling and the bodies' sum, and the chain of
        # roundings (two products and a sum per halving)
        rel = (min(acc.size, 2 * r_cells + 1) + 4 + 3 * (j + 1)) * u * len(bodies)
        pw = err_pt + rel * acc
        e_j = (err_sum + rel * float(acc.sum())) * (1.0 + 1e-12)
        s_all.append(s)
        m_all.append(acc)
        pw_all.append(pw)
        l1 += e_j
        l1_s += e_j * float(s[-1])
    if not s_all:
        empty = np.zeros(0)
        return TailPart(empty, empty, empty, 0.0, 0.0)
    return TailPart(np.concatenate(s_all), np.concatenate(m_all), np.concatenate(pw_all),
                    l1, l1_s)


def octaves(c_cells: int, e0: int, h: float, top: float) -> int:
    """The number of octaves ``(R H_j, 2 R H_j]`` (``R = c_cells``, ``H_j = 2^(e0+j) h``)
    reaching ``top``."""
    first = c_cells * float(1 << e0) * h
    return max(1, int(math.ceil(math.log2(max(top / first, 1.0)))))
