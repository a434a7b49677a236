"""Privacy loss of a pair of discrete distributions given by its atoms."""

from __future__ import annotations

import numpy as np

from .._numerics import UNIT_ROUNDOFF
from .base import PrivacyLoss, delta_from_logs

__all__ = ["DiscreteLoss", "hockey_stick_charge"]


def hockey_stick_charge(eps, log_p, log_q, rel: float) -> np.ndarray:
    """A bound on the floating-point error of ``P(A) - e^eps Q(A)`` as
    :func:`~tightdp.losses.base.delta_from_logs` computes it from ``log_p = log P(A)`` and
    ``log_q = log Q(A)``, the masses being within ``rel`` units of roundoff ``u`` of their
    values (relative): each log is within ``(rel + 1) u`` plus ``|log| u`` of its value
    (absolute), ``eps + log Q - log P`` and its ``expm1`` add ``(|eps| + 4) u``, the
    product and the exponential ``2 u``; hence an error below
    ``(2 rel + 8 + 2 (|eps| + |log_p| + |log_q|)) u (P(A) + e^eps Q(A))`` (first order,
    with room for the second-order terms; Higham 2002, Sec. 3.1). A zero mass adds
    nothing."""
    e = np.asarray(eps, dtype=float)
    lp, lq = np.asarray(log_p, dtype=float), np.asarray(log_q, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.exp(lp) + np.where(np.isneginf(lq), 0.0, np.exp(e + lq))
        logs = np.where(np.isneginf(lp), 0.0, np.abs(lp)) + np.where(np.isneginf(lq), 0.0,
                                                                      np.abs(lq))
    return (2.0 * rel + 8.0 + 2.0 * (np.abs(e) + logs)) * UNIT_ROUNDOFF * scale


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

    def delta_lower(self, eps) -> np.ndarray:
        """A certified lower bound on the hockey-stick divergence of ONE application of the
        pair, ``sum_i (p_i - e^eps q_i)_+`` (Koskela et al. 2020, Lemma 5:
        ``P(Y > eps) - e^eps Q(Y > eps)``, the sum over the atoms of loss above ``eps``),
        less its rounding (:func:`hockey_stick_charge`: each atom's mass within ``64 u``,
        a tail sum of ``n`` of them within ``(n + 64) u``, Higham 2002, eq. (4.4)), at
        least 0."""
        value, charge = self._hockey_stick(eps)
        return np.maximum(value - charge, 0.0)

    def delta_upper(self, eps) -> np.ndarray:
        """A certified upper bound on the same sum: :meth:`delta_lower`'s value plus its
        rounding charge instead of less."""
        value, charge = self._hockey_stick(eps)
        return value + charge

    def _hockey_stick(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``sum_i (p_i - e^eps q_i)_+`` as computed, and the bound on its rounding
        (:func:`hockey_stick_charge`; see :meth:`delta_lower`)."""
        eps = np.asarray(eps, dtype=float)
        lp, lq = self.logp_sf(eps), self.logq_sf(eps)
        return (delta_from_logs(eps, lp, lq),
                hockey_stick_charge(eps, lp, lq, self.y.size + 64.0))
