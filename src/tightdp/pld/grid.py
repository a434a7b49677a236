"""The discrete privacy loss distribution: P-masses on a uniform grid of loss values, plus
mass at +infinity, and the privacy-curve queries on it.

A :class:`DiscretePLD` with grid step ``d`` holds ``probs[i]``, the P-probability that the
loss equals ``(offset + i) * d``, and ``inf_mass = P(loss = +inf)``. Its privacy curve is

    delta(eps) = inf_mass + sum_{y_i > eps} probs[i] * (1 - exp(eps - y_i))

(Koskela et al. 2020, eq. (4.2); Gopi et al. 2021, Prop. 2.4). This expression depends only on
the P-law of the loss and is non-decreasing in every loss value, which is what makes rounding
losses up (down) an upper (lower) bound and lets the discretizers prove their bounds.

Grids are anchored at 0: every value is an integer multiple of ``d``, so sums of losses of
PLDs with a common ``d`` stay on the grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = ["Bins", "DiscretePLD", "atom_cumulants", "atom_log_mgf", "delta_from_pmf",
           "epsilon_from_pmf", "tail_sums"]


def _suffix(x: np.ndarray) -> np.ndarray:
    """Suffix sums ``out[i] = sum_{j >= i} x[j]`` with a trailing 0, summed smallest-first."""
    out = np.zeros(x.size + 1)
    out[:-1] = np.cumsum(x[::-1])[::-1]
    return out


def tail_sums(probs: np.ndarray, d: float) -> tuple[np.ndarray, np.ndarray]:
    """``S0[i] = sum_{j>=i} p_j`` and ``T[i] = sum_{j>=i} p_j e^{-(j-i) d}`` (trailing 0).

    With them the privacy curve on ``[y_{i-1}, y_i)`` is ``S0[i] - e^{eps - y_i} T[i]``, where
    the exponent lies in ``[-d, 0]``: no overflow or underflow for losses in the thousands.
    ``T`` is summed block by block (blocks short enough that ``e^{block d}`` stays finite),
    smallest terms first.
    """
    n = probs.size
    s0 = _suffix(probs)
    t = np.zeros(n + 1)
    block = max(1, int(600.0 / d))
    if block < 64 and n > 4 * block:
        # coarse grids (d > ~10): blocks would be too short for numpy to pay; the recursion
        # T[i] = p_i + e^{-d} T[i+1] (a first-order filter, stable since e^{-d} < 1) in C
        from scipy.signal import lfilter

        t[:-1] = lfilter([1.0], [1.0, -math.exp(-d)], probs[::-1])[::-1]
        return s0, t
    carry = 0.0
    for start in range(((n - 1) // block) * block, -1, -block):
        stop = min(start + block, n)
        k = np.arange(stop - start)
        w = probs[start:stop] * np.exp(-k * d)
        part = np.cumsum(w[::-1])[::-1] * np.exp(k * d)
        t[start:stop] = part + carry * np.exp(-(stop - start - k) * d)
        carry = t[start]
    return s0, t


def delta_from_pmf(ys: np.ndarray, probs: np.ndarray, inf_mass: float, eps,
                   sums: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Privacy curve ``delta(eps)`` of a discrete P-law on a uniform grid (vectorized).

    ``ys`` must be increasing and uniform. Negative masses (rounding of an inverse FFT) are
    used as they are; callers clip beforehand where the direction of their bound requires it.
    """
    eps = np.asarray(eps, dtype=float)
    d = float(ys[1] - ys[0]) if ys.size > 1 else 1.0
    s0, t = sums if sums is not None else tail_sums(probs, d)
    idx = np.searchsorted(ys, eps, side="right")
    safe = np.minimum(idx, ys.size - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        val = s0[idx] - np.exp(np.minimum(eps - ys[safe], 0.0)) * t[idx]
    val = np.where(idx >= ys.size, 0.0, val)
    return np.maximum(val, 0.0) + inf_mass


def epsilon_from_pmf(ys: np.ndarray, probs: np.ndarray, inf_mass: float, delta: float) -> float:
    """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` for a discrete P-law (exact for that
    law: on each interval between grid points the curve is ``S0 - e^{eps - y_i} T``, solved in
    closed form). Returns ``inf`` when no finite eps meets the target.
    """
    if inf_mass >= delta:
        return math.inf
    d = float(ys[1] - ys[0]) if ys.size > 1 else 1.0
    s0, t = tail_sums(probs, d)
    d_at = s0[1:] - math.exp(-d) * t[1:] + inf_mass  # just right of each grid point
    ok = np.nonzero(d_at <= delta)[0]
    if ok.size == 0:
        return math.inf
    i = int(ok[0])
    lo_eps = float(ys[i - 1]) if i > 0 else -math.inf
    num = s0[i] + inf_mass - delta
    if num <= 0:
        e = lo_eps
    elif t[i] > 0:
        e = min(max(float(ys[i]) + math.log(num / t[i]), lo_eps), float(ys[i]))
    else:
        e = float(ys[i])
    return max(e, 0.0)


#: most entries of the ``t x atoms`` work array of one block of :func:`atom_log_mgf`
_MGF_BLOCK = 1 << 22


def _tilted_weights(ys: np.ndarray, log_p: np.ndarray, t: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(m, w)``: per row ``j``, ``m_j = max_i (log_p_i + t_j y_i)`` (shape ``(T, 1)``) and
    the weights ``w_ji = e^{log_p_i + t_j y_i - m_j}`` of the law tilted by ``t_j``, each row
    stabilized by its own maximum, so nothing under- or overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = log_p[None, :] + t[:, None] * ys[None, :]
    m = z.max(axis=1, keepdims=True)
    with np.errstate(under="ignore", invalid="ignore"):
        np.subtract(z, m, out=z)
        np.exp(z, out=z)  # in place: these rows are long, and memory-bound
    return m, z


def atom_log_mgf(ys: np.ndarray, log_p: np.ndarray, t) -> np.ndarray:
    """``K(t) = log sum_i e^{log_p_i + t y_i}``, the log moment generating function of finitely
    many atoms (``y_i`` with log masses ``log_p_i``), for every ``t`` of a 1-d array (any
    sign). The one discrete log-MGF of the library: :meth:`DiscretePLD.log_mgf`, the engine's
    Chernoff bounds and window placement and the Fourier accountant's tail estimate use it.
    Rows are worked in blocks of at most ``_MGF_BLOCK`` entries (memory stays bounded for
    many ``t`` on long grids; each row's value does not depend on the blocking)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    out = np.empty(t.size)
    rows = max(1, _MGF_BLOCK // max(ys.size, 1))
    for i in range(0, t.size, rows):
        m, w = _tilted_weights(ys, log_p, t[i:i + rows])
        out[i:i + rows] = m[:, 0] + np.log(w.sum(axis=1))
    return out


def atom_cumulants(ys: np.ndarray, log_p: np.ndarray, t: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``K(t)`` (as :func:`atom_log_mgf`), ``K'(t)`` and ``K''(t)`` (the mean and variance
    of the law tilted by ``t``) of finitely many atoms, for every ``t`` of a 1-d array.
    Elementwise sums, not BLAS products: their threads only contend with the caller's on
    these memory-bound rows."""
    m, w = _tilted_weights(ys, log_p, t)
    s = w.sum(axis=1)
    mu = (w * ys).sum(axis=1) / s
    dev = ys[None, :] - mu[:, None]
    var = (w * dev * dev).sum(axis=1) / s
    return m[:, 0] + np.log(s), mu, var


@dataclass
class DiscretePLD:
    """P-law of a privacy loss on the grid ``shift + (offset + i) * d`` with mass at +inf.

    Attributes
    ----------
    d : grid step
    offset : integer index of ``probs[0]``
    shift : the grid is ``shift + j * d`` (0 unless a discretizer aligns the grid with the end
        of a bounded loss); sums of PLDs add their shifts, so composition stays on a grid
    probs : P-masses (non-negative for a single mechanism; a composed PLD may carry rounding)
    inf_mass : P(loss = +inf)
    """

    d: float
    offset: int
    probs: np.ndarray
    inf_mass: float = 0.0
    meta: dict = field(default_factory=dict)
    shift: float = 0.0

    @property
    def ys(self) -> np.ndarray:
        return self.shift + (self.offset + np.arange(self.probs.size)) * self.d

    @property
    def finite_mass(self) -> float:
        return float(self.probs.sum())

    def trimmed(self, tol: float = 0.0) -> DiscretePLD:
        """Drop leading and trailing atoms with mass <= tol (only zeros by default)."""
        nz = np.nonzero(self.probs > tol)[0]
        if nz.size == 0:
            return DiscretePLD(self.d, 0, np.zeros(1), self.inf_mass, dict(self.meta),
                               self.shift)
        a, b = int(nz[0]), int(nz[-1]) + 1
        return DiscretePLD(self.d, self.offset + a, self.probs[a:b].copy(), self.inf_mass,
                           dict(self.meta), self.shift)

    def log_mgf(self, t) -> np.ndarray:
        """``log E[e^{t Y}; Y finite]`` of the discrete law (vectorized over t)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        pos = self.probs > 0
        if not pos.any():
            return np.full(t.shape, -np.inf)
        return atom_log_mgf(self.ys[pos], np.log(self.probs[pos]), t)

    def delta(self, eps) -> np.ndarray:
        return delta_from_pmf(self.ys, self.probs, self.inf_mass, eps)

    def epsilon(self, delta: float) -> float:
        return epsilon_from_pmf(self.ys, self.probs, self.inf_mass, delta)


class Bins(NamedTuple):
    """One evaluation of a loss's CDFs on the grid ``g``: what both certified discretizers
    are built from."""

    j_lo: int  # grid index of g[0]
    g: np.ndarray
    pb: np.ndarray  # P-mass of the bins (g_j, g_{j+1}]
    qb: np.ndarray  # Q-mass of the bins
    log_rho: np.ndarray  # log(Q_bin e^{g_j} / P_bin), in [-d, 0]
    p_low: float  # P(Y <= g_0)
    q_low: float  # Q(Y <= g_0), Q's mass at -inf included
    p_top: float  # P(Y > g_top), P's mass at +inf included
    lq_top: float  # log Q(Y > g_top)
