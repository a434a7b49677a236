"""Bounds on the mass of a sum of independent lattice variables outside a window: the
Chernoff bounds of random allocation's lattice (:mod:`tightdp.losses.allocation`), from
log-MGF bounds of the variables' pmfs (exact on their first atoms, blocks beyond)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["THETAS", "MgfTable", "chernoff", "mass_above", "mass_below", "mgf_table",
           "right_tail", "window_bottom"]

#: atoms of a pmf whose MGF the Chernoff bounds take exactly
_EXACT = 2048
#: blocks of the atoms beyond them
_BLOCKS = 1024
#: the Chernoff bounds' tilts (per lattice step): both signs, many scales
THETAS = np.concatenate([-np.geomspace(1e-9, 3.0, 28), np.geomspace(1e-12, 1.0, 36)])


class MgfTable(NamedTuple):
    """Log-MGF upper bounds of the prefixes of a pmf (:func:`mgf_table`)."""

    starts: np.ndarray
    prefix: np.ndarray
    suffix: np.ndarray

    def mass_from(self, cut: int) -> float:
        """An upper bound on the pmf's mass at and above ``cut`` (its suffix sums, with a
        margin for their rounding)."""
        return float(self.suffix[min(cut, self.suffix.size - 1)]) * (1.0 + 1e-9)

    def bounds(self, cut: int | None = None) -> np.ndarray:
        """Upper bounds on ``log sum_{n < cut} pmf(n) e^{theta n}`` (all atoms when None):
        the prefix through the block holding ``cut - 1`` (a block past ``cut`` only adds
        mass: still a bound)."""
        if cut is None:
            return self.prefix[:, -1]
        j = max(int(np.searchsorted(self.starts, cut, side="left")) - 1, 0)
        return self.prefix[:, j]


def mgf_table(pmf: np.ndarray, thetas: np.ndarray) -> MgfTable:
    """Upper bounds on ``log sum_n pmf(n) e^{theta n}`` for each theta and every prefix of
    blocks: exact on the first :data:`_EXACT` atoms (a sum of many variables multiplies any
    slack by their count), beyond them blocks of atoms each placed at its block's end in
    the direction of theta."""
    head = pmf[:_EXACT]
    tail = pmf[_EXACT:]
    bs = max(1, -(-tail.size // _BLOCKS))
    nb = -(-tail.size // bs)
    mass = np.zeros(nb * bs)
    mass[:tail.size] = tail
    mass = np.concatenate([head, mass.reshape(nb, bs).sum(axis=1)])
    starts = np.concatenate([np.arange(head.size, dtype=float),
                             head.size + bs * np.arange(nb, dtype=float)])
    width = np.concatenate([np.zeros(head.size), np.full(nb, bs - 1.0)])
    with np.errstate(divide="ignore"):
        lm = np.log(mass)
    pos = starts[None, :] + np.where(thetas > 0, 1.0, 0.0)[:, None] * width[None, :]
    suffix = np.append(np.cumsum(pmf[::-1])[::-1], 0.0)
    return MgfTable(starts, np.logaddexp.accumulate(lm[None, :] + thetas[:, None] * pos,
                                                     axis=1), suffix)


def chernoff(tables, thetas: np.ndarray, x: float, right: bool) -> float:
    """log of a bound on ``P(X >= x)`` (right) or ``P(X <= x)`` of the sum ``X`` of
    independent lattice variables, ``tables`` = [(log-MGF bounds at ``thetas``, count)]:
    ``min_theta sum_i k_i Lambda_i(theta) - theta x`` over theta of the tail's sign."""
    sel = thetas > 0 if right else thetas < 0
    tot = sum(k * lam[sel] for lam, k in tables if k)
    return float(np.min(tot - thetas[sel] * x))


def window_bottom(lam_q: np.ndarray, t: int, h: float) -> int:
    """The largest index below which the Q-law of the sum holds less than 1e-30 (Chernoff),
    by bisection."""
    lo_idx, hi_idx = 0, max(int(t / h), 1)
    if chernoff([(lam_q, t)], THETAS, 0.0, right=False) < math.log(1e-30):
        while hi_idx - lo_idx > 1:
            mid = (lo_idx + hi_idx) // 2
            ok = chernoff([(lam_q, t)], THETAS, mid, right=False) < math.log(1e-30)
            lo_idx, hi_idx = (mid, hi_idx) if ok else (lo_idx, mid)
    return lo_idx


def right_tail(pmfs, x: int) -> float:
    """Bound on ``P(X >= x)`` for the sum ``X`` of independent lattice variables (``pmfs``
    as in :func:`_outside`): a union bound on one variable reaching ``c`` plus Chernoff for
    the sum of the variables cut at ``c`` (the lognormal's MGF is dominated by its far
    tail), at the best of a few cuts ``c``."""
    right = 1.0
    for frac in (1.0, 0.5, 0.25, 0.125, 0.0625):
        c = max(int(x * frac), 1)
        tail = sum(k * tab.mass_from(c) for _, tab, k in pmfs)
        cut = [(tab.bounds(c), k) for _, tab, k in pmfs]
        right = min(right, tail + math.exp(min(chernoff(cut, THETAS, x, right=True), 0.0)))
    return right


def mass_below(pmfs, lo: int) -> float:
    """Bound on the mass of the sum of independent lattice variables (``pmfs`` = [(pmf,
    its :func:`mgf_table`, count)]) below ``lo``: Chernoff,
    ``min_{theta<0} sum_i k_i Lambda_i(theta) - theta x``."""
    if lo <= 0:
        return 0.0
    left = chernoff([(tab.bounds(), k) for _, tab, k in pmfs], THETAS, lo - 1, right=False)
    return math.exp(min(left, 0.0))


def mass_above(pmfs, end: int) -> float:
    """Bound on the mass of the sum (as :func:`mass_below`) at or above ``end``: the better of
    :func:`right_tail` and, for a cut ``c``, Chernoff for all variables below ``c`` plus,
    for each variable reaching ``c``, the mass of a range of its values times
    :func:`right_tail` of the others at ``end`` less the range's top (independence: the
    variables are capped and heavy-tailed, and the sum leaves the window mostly by one
    large variable and a large rest). The variables are nonnegative: the bound holds for
    the sum of any subset of them too. With :func:`mass_below`, the mass the circular
    convolution folds onto the window ``lo .. end - 1``."""
    right = right_tail(pmfs, end)
    for frac in (0.5, 0.25):
        c = max(int(end * frac), 1)
        out = math.exp(min(chernoff([(tab.bounds(c), k) for _, tab, k in pmfs], THETAS,
                                     end, right=True), 0.0))
        for i, (p, _, k) in enumerate(pmfs):
            if k == 0 or p.size <= c:
                continue
            others = [(q, tab, kk - (j == i)) for j, (q, tab, kk) in enumerate(pmfs)]
            edges = np.unique(np.geomspace(c, p.size, 17).astype(int))
            for b0, b1 in zip(edges[:-1], edges[1:], strict=True):
                m = float(p[b0:b1].sum()) * (1.0 + 1e-9)
                if m > 0:
                    out += k * m * right_tail(others, end - b1 + 1)
        right = min(right, out)
    return right
