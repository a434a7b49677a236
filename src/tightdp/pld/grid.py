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

import numpy as np
from scipy.special import logsumexp

__all__ = ["DiscretePLD", "delta_from_pmf", "epsilon_from_pmf"]


def _suffix(x: np.ndarray) -> np.ndarray:
    """Suffix sums ``out[i] = sum_{j >= i} x[j]`` with a trailing 0, summed smallest-first."""
    out = np.zeros(x.size + 1)
    out[:-1] = np.cumsum(x[::-1])[::-1]
    return out


def _qmass(ys: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``probs * exp(-ys)``, the Q-mass of each atom (at most 1 for a true pair), capped at
    e^700 so that rounding noise far below zero loss cannot overflow."""
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        return np.where(probs > 0, np.exp(np.minimum(
            np.log(np.where(probs > 0, probs, 1.0)) - ys, 700.0)), 0.0)


def delta_from_pmf(ys: np.ndarray, probs: np.ndarray, inf_mass: float, eps) -> np.ndarray:
    """Privacy curve ``delta(eps)`` of a discrete P-law of losses (vectorized over eps).

    ``ys`` must be increasing. Negative masses (rounding of an inverse FFT) are used as they
    are; callers clip beforehand where the direction of their bound requires it.
    """
    eps = np.asarray(eps, dtype=float)
    s0 = _suffix(probs)
    s1 = _suffix(_qmass(ys, probs))
    idx = np.searchsorted(ys, eps, side="right")
    with np.errstate(over="ignore", invalid="ignore"):
        val = s0[idx] - np.exp(np.minimum(eps, 700.0)) * s1[idx]
    val = np.where(idx >= ys.size, 0.0, val)
    return np.maximum(val, 0.0) + inf_mass


def epsilon_from_pmf(ys: np.ndarray, probs: np.ndarray, inf_mass: float, delta: float) -> float:
    """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` for a discrete P-law (exact for that
    law: on each interval between grid points the curve is ``S0 - e^eps S1``, solved in closed
    form). Returns ``inf`` when no finite eps meets the target.
    """
    if inf_mass >= delta:
        return math.inf
    s0 = _suffix(probs)
    s1 = _suffix(_qmass(ys, probs))
    # delta just right of each grid point y_i: atoms above are those with index > i
    with np.errstate(over="ignore", invalid="ignore"):
        d_at = s0[1:] - np.exp(np.minimum(ys, 700.0)) * s1[1:] + inf_mass
    ok = np.nonzero(d_at <= delta)[0]
    if ok.size == 0:
        return math.inf
    i = int(ok[0])
    # on [y_{i-1}, y_i) the atoms above eps are those with index >= i
    lo_eps = float(ys[i - 1]) if i > 0 else -math.inf
    num = s0[i] + inf_mass - delta
    if num <= 0:
        e = lo_eps
    elif s1[i] > 0:
        e = min(max(math.log(num / s1[i]), lo_eps), float(ys[i]))
    else:
        e = float(ys[i])
    return max(e, 0.0)


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
        ys = self.ys[pos]
        lp = np.log(self.probs[pos])
        # stabilize each row by a bound on its maximum: max lp + t * (max or min y)
        m = lp.max() + np.where(t >= 0, t * ys.max(), t * ys.min())
        with np.errstate(under="ignore"):
            s = np.exp(lp[None, :] + t[:, None] * ys[None, :] - m[:, None]).sum(axis=1)
        with np.errstate(divide="ignore"):
            out = m + np.log(s)
        # a row whose terms all underflowed: fall back to the exact logsumexp
        bad = ~(s > 1e-250)
        if bad.any():
            out[bad] = logsumexp(lp[None, :] + t[bad][:, None] * ys[None, :], axis=1)
        return out

    def delta(self, eps) -> np.ndarray:
        return delta_from_pmf(self.ys, self.probs, self.inf_mass, eps)

    def epsilon(self, delta: float) -> float:
        return epsilon_from_pmf(self.ys, self.probs, self.inf_mass, delta)
