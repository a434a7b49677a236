"""Privacy loss of a public-coin mixture of pairs: a coin ``k`` (probability ``w_k``, the same
under P and Q) is drawn and revealed, then the output of the pair ``(P_k, Q_k)``."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .base import PrivacyLoss

__all__ = ["CoinMixtureLoss"]


class CoinMixtureLoss(PrivacyLoss):
    """PLRV of ``P = sum_k w_k (k, P_k)`` against ``Q = sum_k w_k (k, Q_k)``.

    With the coin revealed the loss of an output ``(k, o)`` is ``log(w_k p_k(o) / (w_k
    q_k(o)))``, the loss of the pair ``k``: the law of ``Y`` under P is the mixture
    ``sum_k w_k`` (law of ``Y_k`` under ``P_k``), under Q likewise, and the masses at
    ``+-inf`` mix with the same weights. Its hockey-stick divergence is
    ``sum_k w_k H(P_k || Q_k)``, so a mixture of dominating pairs dominates the mixture of the
    pairs they dominate, for every ``eps`` at once (and composes as one pair).

    Parameters
    ----------
    weights : the coin's probabilities (positive, summing to 1 within rounding; zeros dropped).
    losses : the privacy loss of each pair, in the order of ``weights``.
    """

    def __init__(self, weights: Sequence[float], losses: Sequence[PrivacyLoss]):
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(losses),) or w.size == 0:
            raise ValueError("weights must hold one probability per loss (at least one)")
        if np.any(~np.isfinite(w)) or np.any(w < 0) or abs(float(w.sum()) - 1.0) > 1e-9:
            raise ValueError(f"weights must be probabilities summing to 1, got {w.tolist()}")
        keep = w > 0
        self.weights = w[keep]
        self.parts = [loss for loss, k in zip(losses, keep, strict=True) if k]
        self.log_w = np.log(self.weights)
        self.inf_mass = float(sum(x * loss.inf_mass for x, loss in zip(self.weights, self.parts,
                                                                        strict=True)))
        self.neg_inf_mass = float(sum(x * loss.neg_inf_mass
                                      for x, loss in zip(self.weights, self.parts, strict=True)))
        self.support = (min(loss.support[0] for loss in self.parts),
                        max(loss.support[1] for loss in self.parts))

    def _mix(self, name: str, y) -> np.ndarray:
        """``log sum_k w_k exp(f_k(y))`` for the log-space function ``name`` of each part."""
        y = np.asarray(y, dtype=float)
        terms = [lw + getattr(loss, name)(y) for lw, loss in zip(self.log_w, self.parts,
                                                                 strict=True)]
        return functools.reduce(np.logaddexp, terms)

    def logp_cdf(self, y):
        return self._mix("logp_cdf", y)

    def logp_sf(self, y):
        return self._mix("logp_sf", y)

    def logq_cdf(self, y):
        return self._mix("logq_cdf", y)

    def logq_sf(self, y):
        return self._mix("logq_sf", y)
