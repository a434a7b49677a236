"""Privacy loss of the Gaussian mechanism."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from .base import PrivacyLoss

__all__ = ["GaussianLoss"]


class GaussianLoss(PrivacyLoss):
    """PLRV of the Gaussian mechanism with ``mu = sensitivity / sigma``.

    Under P the loss is N(mu^2/2, mu^2), under Q it is N(-mu^2/2, mu^2) (Balle & Wang 2018;
    Koskela et al. 2020, Sec. 6.1 with q = 1).
    """

    def __init__(self, mu: float):
        self.mu = float(mu)
        self.support = (-math.inf, math.inf)

    def _z(self, y, sign):
        mu = self.mu
        return (np.asarray(y, dtype=float) - sign * mu * mu / 2) / mu

    def logp_cdf(self, y):
        return log_ndtr(self._z(y, 1))

    def logp_sf(self, y):
        return log_ndtr(-self._z(y, 1))

    def logq_cdf(self, y):
        return log_ndtr(self._z(y, -1))

    def logq_sf(self, y):
        return log_ndtr(-self._z(y, -1))
