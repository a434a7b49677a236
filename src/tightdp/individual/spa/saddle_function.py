"""The saddle-point function ``g = -log delta_approx`` of one example at a tilt and its
derivatives in ``log t``, from the example's composed CGF rows (Alghamdi et al., "The
Saddle-Point Accountant for Differential Privacy", 2023, eqs. (50), (60), (61)), and the
Halley slope the iteration of :mod:`.solver` steps with."""

from __future__ import annotations

import math

import numpy as np

from ...curves.saddle import saddle_log_delta

__all__ = ["g_slope", "g_msd", "halley_slope", "g_spa"]


def g_slope(ks: np.ndarray, t: np.ndarray, method: str,
             fallback: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and (approximate) second derivative in ``u = log t`` of the saddle-point function
    ``g = -log delta_approx(eps(t))`` of SP-MSD0 (eq. (60)) or SP-MSD1 (eq. (61)) (Alghamdi
    et al., "The Saddle-Point Accountant for Differential Privacy", 2023), from the composed
    rows ``ks = (K, K', ..., K^(5))`` at ``t``.

    With ``phi2, phi3, phi4`` of the SP-MSD1 terms and ``phi5 = K^(5) - 24/t^5 - 24/(1+t)^5``
    (the derivatives in ``t`` of ``phi = K - t eps - log t - log(1+t)`` at fixed eps; at the
    saddle point ``d phi / dt = -t phi2``): ``d(log delta)/dt = -t phi2 - phi3 / (2 phi2) +
    corr' / (1 + corr)``, ``corr = phi4 / (8 phi2^2) - 5 phi3^2 / (24 phi2^3)``, ``corr' =
    phi5 / (8 phi2^2) - 2 phi3 phi4 / (3 phi2^3) + 5 phi3^3 / (8 phi2^4)`` (SP-MSD1 where it
    did not fall back to SP-MSD0). The second derivative leaves out the SP-MSD1 term's. Both
    only steer the iteration (Halley's step): the root is where ``g`` meets the target."""
    it, itp = 1.0 / t, 1.0 / (1.0 + t)
    it2, itp2 = it * it, itp * itp
    phi2 = ks[2] + it2 + itp2
    phi3 = ks[3] - 2.0 * (it2 * it + itp2 * itp)
    phi4 = ks[4] + 6.0 * (it2 * it2 + itp2 * itp2)
    r3 = phi3 / phi2
    dg = t * phi2 + 0.5 * r3  # -d(log delta)/dt
    if method == "msd1":
        phi5 = ks[5] - 24.0 * (it2 * it2 * it + itp2 * itp2 * itp)
        p2 = phi2 * phi2
        r4 = phi4 / p2
        corr = 0.125 * r4 - (5.0 / 24.0) * r3 * r3 / phi2
        dcorr = (0.125 * phi5 / p2 - (2.0 / 3.0) * r3 * r4 + 0.625 * r3 ** 3 / phi2)
        dg = np.where(fallback, dg, dg - dcorr / (1.0 + corr))
    d2 = phi2 + t * phi3 + 0.5 * (phi4 / phi2 - r3 * r3)
    return t * dg, t * t * d2 + t * dg


def g_msd(ks: np.ndarray, t: np.ndarray, method: str) -> tuple[np.ndarray, ...]:
    """The saddle-point function ``g = -log delta_approx`` of SP-MSD0 (eq. (60)) or SP-MSD1
    (eq. (61)) at the saddle-point eps of ``t`` (Alghamdi et al. 2023), that eps (eq. (50)),
    the fallback flag, the size of the SP-MSD1 terms, and the derivatives of :func:`g_slope`,
    from the composed rows ``ks = (K, K', ..., K^(5))``: the formulas of
    :func:`tightdp.curves.saddle.saddle_log_delta` and :func:`g_slope` in one pass, sharing
    ``phi2, phi3, phi4`` and the powers of ``1/t`` and ``1/(1+t)`` (the same numbers up to
    rounding). Returns ``(g, eps, fallback, size, dg/du, d2g/du2)``."""
    it, itp = 1.0 / t, 1.0 / (1.0 + t)
    it2, itp2 = it * it, itp * itp
    eps = ks[1] - it - itp
    phi2 = ks[2] + it2 + itp2
    phi3 = ks[3] - 2.0 * (it2 * it + itp2 * itp)
    phi4 = ks[4] + 6.0 * (it2 * it2 + itp2 * itp2)
    r3 = phi3 / phi2
    p2 = phi2 * phi2
    r4 = phi4 / p2
    term4 = 0.125 * r4
    term3 = (5.0 / 24.0) * r3 * r3 / phi2
    size = np.maximum(np.abs(term4), term3)
    val = ks[0] - t * eps - np.log(t) - np.log1p(t) - 0.5 * np.log(2.0 * math.pi * phi2)
    dg = t * phi2 + 0.5 * r3  # -d(log delta)/dt
    if method == "msd1":
        corr = term4 - term3
        fallback = ~(corr > -1.0)
        val = np.where(fallback, val, val + np.log1p(np.where(fallback, 0.0, corr)))
        phi5 = ks[5] - 24.0 * (it2 * it2 * it + itp2 * itp2 * itp)
        dcorr = (0.125 * phi5 / p2 - (2.0 / 3.0) * r3 * r4 + 0.625 * r3 ** 3 / phi2)
        dg = np.where(fallback, dg, dg - dcorr / (1.0 + corr))
    else:
        fallback = np.zeros(t.shape, dtype=bool)
    d2 = phi2 + t * phi3 + 0.5 * (phi4 / phi2 - r3 * r3)
    return -val, eps, fallback, size, t * dg, t * t * d2 + t * dg


def halley_slope(d1: np.ndarray, d2: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The slope ``d1 - r d2 / (2 d1)`` that makes a Newton step for the residual ``r`` (first
    and second derivatives ``d1, d2``) Halley's step (Halley 1694; e.g. Traub, *Iterative
    Methods for the Solution of Equations*, 1964, Sec. 5.2); ``d1`` (Newton's) where that
    correction would more than quintuple the step."""
    dg = d1 - r * d2 / (2.0 * d1)
    return np.where(dg > 0.2 * d1, dg, d1)


def g_spa(comp: np.ndarray, t: np.ndarray, method: str) -> np.ndarray:
    """The function whose root is the saddle point: ``-log delta_approx`` at the saddle-point
    eps of ``t`` (the accountant's ``f_approx``; increasing in t where the approximation is
    sound), from composed rows ``comp`` (5, ...)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ld = saddle_log_delta(comp, t, None, method)[0]
    return np.where(np.isfinite(ld), -ld, -np.inf)
