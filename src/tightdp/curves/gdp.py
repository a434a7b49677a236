"""mu-Gaussian differential privacy: the exact privacy curve of mu-GDP and its inverses.

A mechanism is mu-GDP when its trade-off curve is at least that of ``N(0,1)`` vs ``N(mu,1)``
(Dong, Roth, Su 2022, Def. 2.6). Equivalently it is (eps, delta(eps))-DP for every eps with

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)

(Dong, Roth, Su 2022, Cor. 2.13; Balle & Wang 2018, Thm. 8; eq. (2.3) of Koskela, Tobaben,
Honkela, *Individual privacy accounting with Gaussian DP*). Composition of mu_i-GDP mechanisms
is ``sqrt(sum mu_i^2)``-GDP (Dong, Roth, Su 2022, Cor. 3.3).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfcx, log_ndtr

from .. import _validate as v
from .._numerics import BracketError, grow_until

__all__ = ["gdp_delta", "gdp_log_delta", "gdp_log_delta_values", "gdp_epsilon", "gdp_mu",
           "compose_mu"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT2 = math.sqrt(2.0)


def gdp_log_delta_values(mu, eps: np.ndarray) -> np.ndarray:
    """log delta(eps) of mu-GDP, accurate where delta is tiny and free of overflow, elementwise
    over broadcasting arrays ``mu`` (> 0) and ``eps`` (>= 0), without validation (the
    validated front door is :func:`gdp_log_delta`).

    With ``a = -eps/mu + mu/2`` and ``b = a - mu``: for ``a >= 0`` the direct difference
    ``Phi(a) - e^eps Phi(b)`` (there ``delta >= Phi(0) - ...`` has no cancellation
    problem), its second term for ``b < 0`` as ``phi(a) sqrt(pi/2) erfcx(-b/sqrt2)``; for
    ``a < 0`` the identity ``e^eps phi(b) = phi(a)`` gives
    ``delta = phi(a) sqrt(pi/2) [erfcx(-a/sqrt2) - erfcx(-b/sqrt2)]`` (scaled complementary
    error function), so no factor ``e^eps`` is ever formed and the result is exact in relative
    terms down to the smallest doubles (Dong, Roth, Su 2022, Cor. 2.13 rewritten).
    """
    e = np.asarray(eps, dtype=float)
    a = -e / mu + mu / 2.0
    b = a - mu
    out = np.empty_like(a)
    pos = a >= 0
    if np.any(pos):
        ap, bp = a[pos], b[pos]
        la = log_ndtr(ap)
        # log(e^eps Phi(b)): for b < 0 as log(phi(a) sqrt(pi/2) erfcx(-b/sqrt2)) (the same
        # identity), never as eps + log Phi(b), which cancels catastrophically for large mu
        # (eps ~ mu^2/2 against log Phi(b) ~ -mu^2/2: an error of one ulp of mu^2/2)
        with np.errstate(over="ignore", divide="ignore"):
            lr = np.where(bp < 0, -0.5 * ap * ap - _LOG_SQRT_2PI + 0.5 * math.log(math.pi / 2)
                          + np.log(erfcx(-np.minimum(bp, 0.0) / _SQRT2)),
                          e[pos] + log_ndtr(bp))
            r = np.exp(lr - la)
            out[pos] = la + np.log1p(-np.minimum(r, 1.0))  # r = 1: delta rounds to 0
    neg = ~pos
    if np.any(neg):
        an, bn = a[neg], b[neg]
        diff = erfcx(-an / _SQRT2) - erfcx(-bn / _SQRT2)
        with np.errstate(divide="ignore"):
            out[neg] = (-0.5 * an * an - _LOG_SQRT_2PI + 0.5 * math.log(math.pi / 2)
                        + np.log(np.maximum(diff, 0.0)))
    return out


def gdp_log_delta(mu: float, eps) -> np.ndarray | float:
    """Natural log of :func:`gdp_delta` (finite wherever delta is representable, ``-inf`` only
    when delta underflows even in log form, i.e. never for finite inputs in practice)."""
    mu = v.positive("mu", mu)
    e = v.eps_values("eps", eps)
    out = gdp_log_delta_values(mu, np.atleast_1d(e))
    return float(out[0]) if e.ndim == 0 else out.reshape(e.shape)


def gdp_delta(mu: float, eps) -> np.ndarray | float:
    """Exact delta(eps) of mu-GDP (Dong, Roth, Su 2022, Cor. 2.13; Balle & Wang 2018, Thm. 8):
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, computed in log space (see
    :func:`gdp_log_delta`) so that values down to 1e-300 keep full relative accuracy and large
    eps does not overflow.

    Parameters
    ----------
    mu : GDP parameter in (0, inf).
    eps : one eps or an array (any finite reals).

    Examples
    --------
    >>> round(gdp_delta(1.0, 0.0), 12)   # 2 Phi(1/2) - 1
    0.382924922548
    """
    mu = v.positive("mu", mu)
    e = v.eps_values("eps", eps)
    out = np.exp(gdp_log_delta_values(mu, np.atleast_1d(e)))
    return float(out[0]) if e.ndim == 0 else out.reshape(e.shape)


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with delta(eps) <= ``delta`` for mu-GDP: the inverse of
    :func:`gdp_delta` (which is strictly decreasing in eps), solved by Brent's method on
    ``log delta(eps)`` to full double precision. Returns 0 when ``delta >= delta(0) =
    2 Phi(mu/2) - 1``."""
    mu = v.positive("mu", mu)
    delta = v.delta_value("delta", delta)
    ld = math.log(delta)

    def f(e: float) -> float:
        return float(gdp_log_delta_values(mu, np.array([e]))[0]) - ld

    if f(0.0) <= 0:
        return 0.0
    hi = grow_until(lambda e: f(e) > 0, max(1.0, mu * mu), 2.0)
    from scipy.optimize import brentq  # lazy: keeps the command's start-up short

    return float(brentq(f, 0.0, hi, xtol=1e-300, rtol=1e-15, maxiter=500))


def gdp_mu(eps: float, delta: float) -> float:
    """The largest mu such that mu-GDP implies (eps, delta)-DP, i.e. the root of
    ``delta(eps; mu) = delta`` (delta(eps; mu) is strictly increasing in mu; Dong, Roth, Su
    2022, Cor. 2.13), by Brent's method on the log."""
    eps = v.nonnegative("eps", eps)
    delta = v.delta_value("delta", delta)
    ld = math.log(delta)

    def f(m: float) -> float:
        return float(gdp_log_delta_values(m, np.array([eps]))[0]) - ld

    try:
        lo = grow_until(lambda m: f(m) > 0, 1.0, 0.5, limit=1e-300)
    except BracketError:  # pragma: no cover - delta(eps; mu) -> 0 as mu -> 0
        raise ValueError("no mu > 0 reaches the requested (eps, delta)") from None
    hi = grow_until(lambda m: f(m) < 0, 1.0, 2.0)
    from scipy.optimize import brentq

    return float(brentq(f, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500))


def compose_mu(mus, counts=None) -> float:
    """mu of the composition of mu_i-GDP mechanisms (``counts[i]`` times each):
    ``sqrt(sum counts_i mu_i^2)`` (Dong, Roth, Su 2022, Cor. 3.3)."""
    m = np.asarray(mus, dtype=float).ravel()
    c = np.ones_like(m) if counts is None else np.asarray(counts, dtype=float).ravel()
    if m.shape != c.shape:
        raise ValueError("mus and counts must have the same length")
    if np.any(~np.isfinite(m)) or np.any(m < 0):
        raise ValueError("mus must be finite and in [0, inf)")
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise ValueError("counts must be finite and in [0, inf)")
    return float(math.sqrt(float(np.sum(c * m * m))))
