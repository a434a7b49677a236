"""Privacy loss of a pair of discrete distributions given by its atoms."""

from __future__ import annotations

import numpy as np

from .base import PrivacyLoss

__all__ = ["DiscreteLoss"]


class DiscreteLoss(PrivacyLoss):
    """PLRV of a pair of discrete distributions, given by its atoms.

    Parameters
    ----------
    losses : finite loss values of the atoms
    p_masses, q_masses : P- and Q-mass of each atom (``q = p * exp(-loss)`` for a true pair)
    inf_mass : P-mass of outputs Q cannot produce
    neg_inf_mass : Q-mass of outputs P cannot produce
    """

    def __init__(self, losses, p_masses, q_masses, inf_mass: float = 0.0,
                 neg_inf_mass: float = 0.0):
        y = np.asarray(losses, dtype=float)
        p = np.asarray(p_masses, dtype=float)
        q = np.asarray(q_masses, dtype=float)
        order = np.argsort(y)
        y, p, q = y[order], p[order], q[order]
        keep = (p > 0) | (q > 0)
        self.y, self.p, self.q = y[keep], p[keep], q[keep]
        self.inf_mass = float(inf_mass)
        self.neg_inf_mass = float(neg_inf_mass)
        self.support = (float(self.y[0]), float(self.y[-1])) if self.y.size else (0.0, 0.0)
        self._pc = np.concatenate([[0.0], np.cumsum(self.p)])
        self._ps = np.concatenate([np.cumsum(self.p[::-1])[::-1], [0.0]])
        self._qc = np.concatenate([[0.0], np.cumsum(self.q)])
        self._qs = np.concatenate([np.cumsum(self.q[::-1])[::-1], [0.0]])

    def _idx(self, y):
        return np.searchsorted(self.y, np.asarray(y, dtype=float), side="right")

    @staticmethod
    def _log(x):
        with np.errstate(divide="ignore"):
            return np.log(x)

    def logp_cdf(self, y):
        return self._log(self._pc[self._idx(y)])

    def logp_sf(self, y):
        return self._log(self._ps[self._idx(y)] + self.inf_mass)

    def logq_cdf(self, y):
        return self._log(self._qc[self._idx(y)] + self.neg_inf_mass)

    def logq_sf(self, y):
        return self._log(self._qs[self._idx(y)])
