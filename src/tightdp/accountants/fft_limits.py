"""What the Fourier accountant (Koskela, Jälkö, Honkela 2020) can resolve, estimated before
and after its work: the composed loss's mass beyond the largest domain, and the float64
rounding of its FFT.

Two limits of :class:`tightdp.accountants.fft.FFTAccountant` that no choice of ``L`` or
``n`` removes:

* **the domain**: where the composed loss has more mass above the largest admissible ``L``
  than delta allows, the accountant refuses. :func:`log_tail_lower` gives a lower bound on that
  mass from a few closed-form tail values of the single steps (microseconds), so that the
  refusal comes before any quadrature or discretization;
* **the rounding**: the FFT computes the composed law in float64, so every point carries an
  error of about ``1e-16`` of the law's scale, and a sum over ``m`` points of the
  ``delta(eps)`` Riemann sum (5.2) is uncertain by about ``m`` times that. A delta far below
  that level is not resolved: the eps found for it sits where the sum is rounding noise,
  possibly far below the true one. :func:`rounding_per_point` estimates the per-point error
  from the composed law itself.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .._numerics import UNIT_ROUNDOFF

if TYPE_CHECKING:
    from ..losses.base import PrivacyLoss

__all__ = ["log_tail_lower", "rounding_per_point"]

#: fraction of the probability given up to the lower tails of the steps in
#: :func:`log_tail_lower`
_LOW_MASS = 1e-3


def log_tail_lower(terms: list[tuple[PrivacyLoss, int]], at: float) -> float:
    """log of a lower bound on ``P(Y_1 + ... + Y_K > at)``, the finite part of the composed
    privacy loss under P, for the (loss, count) pairs ``terms`` (``-inf`` if none is found).

    With ``y_i`` the lower ``_LOW_MASS / K`` quantile of step i's loss and
    ``c = sum_i k_i y_i - max(0, max_i y_i)`` (the least the other steps add), the event "every
    step is finite and at least its ``y_i``, and some step exceeds ``at - c``" implies the sum
    exceeds ``at``. So (union bound on the complement)

        P(sum > at) >= 1 - prod_i (1 - s_i)^{k_i} - _LOW_MASS - sum_i k_i inf_i,

    with ``s_i = P(at - c < Y_i < inf)`` and ``inf_i`` step i's mass at ``+inf``. Each term
    needs one quantile search and one survival-function value of the loss
    (:meth:`tightdp.losses.base.PrivacyLoss.loss_quantile`, ``log_finite_sf``).
    """
    total = sum(k for _, k in terms)
    if total <= 0:
        return -math.inf
    lows = [loss.loss_quantile(math.log(_LOW_MASS / total), upper=False) for loss, _ in terms]
    if not all(math.isfinite(y) for y in lows):
        return -math.inf
    c = sum(k * y for (_, k), y in zip(terms, lows, strict=True)) - max(0.0, max(lows))
    log_none = 0.0  # log prod_i (1 - s_i)^{k_i}
    lost = _LOW_MASS
    for loss, k in terms:
        s = math.exp(loss.log_finite_sf(at - c))
        log_none += k * math.log1p(-min(s, 1.0)) if s < 1.0 else -math.inf
        lost += k * loss.inf_mass
    lower = -math.expm1(log_none) - lost
    return math.log(lower) if lower > 0 else -math.inf


def rounding_per_point(probs: np.ndarray) -> float:
    """Estimated float64 rounding error per point of a law computed by FFT: the root mean
    square of its negative values (every one is rounding error, the true law being
    nonnegative), and at least one unit roundoff of its largest value.

    A sum over ``m`` points then carries at most about ``m`` times this (Cauchy–Schwarz on
    errors of that size; the FFT's errors are correlated between neighbouring points, so the
    square-root-of-``m`` growth of independent errors does not hold). Measured on one to a
    thousand compositions of Gaussian, Laplace and subsampled Gaussian steps, ``m`` times this
    is 2 to 500 times the actual error of the Riemann sum (5.2).
    """
    neg = probs[probs < 0]
    rms = math.sqrt(float(np.mean(neg * neg))) if neg.size else 0.0
    return max(rms, UNIT_ROUNDOFF * float(np.max(np.abs(probs), initial=0.0)))

