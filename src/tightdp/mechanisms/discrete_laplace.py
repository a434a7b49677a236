"""The discrete Laplace mechanism (integer-valued queries, integer noise)."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..losses import DiscreteLoss
from .base import Mechanism

__all__ = ["DiscreteLaplace"]


class DiscreteLaplace(Mechanism):
    """The discrete Laplace mechanism ``f(D) + Z`` for an integer query ``f`` with L1
    sensitivity ``sensitivity`` (an integer), where ``Z`` has the probability mass function
    ``tanh(a/2) e^{-a|z|}`` on the integers, ``a = noise_parameter`` (Inusah & Kozubowski 2006,
    "A discrete analogue of the Laplace distribution"; Ghosh, Roughgarden, Sundararajan 2012 for
    its use in DP; the parameterization of dp_accounting's ``DiscreteLaplaceDpEvent``).

    Dominating pair ``(DLap(C), DLap(0))`` with ``C = sensitivity``. Its loss
    ``a (|x| - |x - C|)`` takes the ``C + 1`` values ``a (2k - C)``, ``k = 0..C`` (``k = 0``
    for ``x <= 0``, ``k = C`` for ``x >= C``), with masses from ``P(Z >= m) = e^{-a m} /
    (1 + e^{-a})`` for ``m >= 1``. The pair is symmetric (the reflection ``x -> C - x``
    swaps its two laws), so one loss serves both directions; the mechanism is
    ``a C``-DP. Defined under every relation, ``sensitivity`` being the query's under the
    accountant's relation (as for :class:`~tightdp.mechanisms.Gaussian`).
    """

    relations = v.RELATIONS

    def __init__(self, noise_parameter: float, sensitivity: int = 1):
        self.noise_parameter = v.positive("noise_parameter", noise_parameter)
        self.sensitivity = v.count("sensitivity", sensitivity, minimum=1)

    @property
    def eps(self) -> float:
        """The pure-DP level ``a * sensitivity``."""
        return self.noise_parameter * self.sensitivity

    def _atoms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(losses, log P-masses, log Q-masses) of the ``C + 1`` atoms of the loss."""
        a, c = self.noise_parameter, self.sensitivity
        k = np.arange(c + 1, dtype=float)
        log_tail0 = -math.log1p(math.exp(-a))           # log P(Z >= 0) = log P(Z <= 0)
        log_tanh = math.log(math.tanh(a / 2.0)) if a < 40.0 else -2.0 * math.exp(-a)
        # Q = DLap(0): k = 0 is x <= 0, k = C is x >= C, else the single point x = k
        log_q = log_tanh - a * k
        log_q[0] = log_tail0
        log_q[-1] = -a * c + log_tail0
        # P = DLap(C) is the mirror image: P-mass of atom k is Q-mass of atom C - k
        log_p = log_q[::-1].copy()
        return a * (2.0 * k - c), log_p, log_q

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1), exact: ``log(sum_k p_k^alpha q_k^(1-alpha)) /
        (alpha - 1)`` over the atoms of the pair (Mironov 2017, Def. 3), symmetric."""
        y, lp, lq = self._atoms()
        alpha = np.asarray(orders, dtype=float)
        terms = alpha[..., None] * lp + (1.0 - alpha[..., None]) * lq
        return np.logaddexp.reduce(terms, axis=-1) / (alpha - 1.0)

    def _build_losses(self):
        y, lp, lq = self._atoms()
        loss = DiscreteLoss(y, np.exp(lp), np.exp(lq))
        return loss, loss

    FIELDS = ("noise_parameter", "sensitivity")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"noise_parameter": float(self.noise_parameter),
                "sensitivity": int(self.sensitivity)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> DiscreteLaplace:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.positive(f"{path}.noise_parameter", params["noise_parameter"]),
                   v.count(f"{path}.sensitivity", params["sensitivity"], minimum=1))
