"""Exact privacy curves in mpmath, independent of tightdp: the oracle of the edge suite.

Two families have a privacy curve that is a closed form in normal tails:

* ``k`` compositions of the Gaussian mechanism (sensitivity 1, noise ``sigma``) are
  mu-GDP with ``mu = sqrt(k) / sigma`` (Dong, Roth, Su, "Gaussian Differential Privacy",
  2022, Corollary 2.13):
  ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.
* ONE step of the Poisson-subsampled Gaussian mechanism under add/remove adjacency: the
  remove pair P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2) and the add pair (P and Q
  swapped). The privacy loss ``L(x) = log P(x)/Q(x)`` is monotone in ``x`` (increasing for
  remove, decreasing for add), so the hockey-stick divergence
  ``delta(eps) = E_P[(1 - e^(eps - L))_+] = P(L > eps) - e^eps Q(L > eps)`` is a difference
  of normal tails at the single crossing point ``x*`` where the density ratio equals
  ``e^eps`` (Balle and Wang, "Improving the Gaussian mechanism...", 2018, Thm. 8 for the
  form; Zhu, Dong, Wang, "Optimal accounting of differential privacy via characteristic
  function", 2022, Sec. 5 for the subsampled pair). The curve of the mechanism is the max
  of the two directions; eps(delta) is the max of the two directions' eps(delta).

Everything is evaluated with ``mpmath`` at 80 significant digits: no underflow (delta down
to 1e-300 and far below), and the worst cancellation in these formulas (about
``log10(sigma/q)`` <= 13 digits over the suite's ranges) leaves > 60 correct digits.
eps(delta) is solved by bisection on the monotone delta(eps) to a relative width of 1e-30.

Only the definitions above are used: nothing here calls tightdp.
"""

from __future__ import annotations

import mpmath as mp

__all__ = ["gaussian_delta", "gaussian_epsilon", "subsampled_delta", "subsampled_epsilon",
           "subsampled_delta_direction", "subsampled_epsilon_direction", "DPS"]

#: working precision (decimal digits)
DPS = 80


#: beyond this |x| mpmath's erfc overflows a float in its series test (near 1e154): the
#: tails use the asymptotic Mills ratio instead, whose error is below 105 x^-9 relative
_ASYMPTOTIC = mp.mpf("1e10")


def _pdf(x):
    return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)


def _mills(x):
    """The Mills ratio (1 - Phi(x)) / phi(x) for x > 0, by its asymptotic series
    1/x (1 - 1/x^2 + 3/x^4 - 15/x^6) beyond ``_ASYMPTOTIC`` (Abramowitz & Stegun 7.1.23)."""
    if x > _ASYMPTOTIC:
        u = 1 / (x * x)
        return (1 - u + 3 * u * u - 15 * u ** 3) / x
    return (mp.erfc(x / mp.sqrt(2)) / 2) / _pdf(x)


def _sf(x):
    """Upper normal tail 1 - Phi(x), accurate for every x (erfc has no cancellation; the
    Mills ratio beyond |x| = 1e10, where erfc's own argument check overflows)."""
    if x > _ASYMPTOTIC:
        return _pdf(x) * _mills(x)
    if x < -_ASYMPTOTIC:
        return 1 - _pdf(x) * _mills(-x)
    return mp.erfc(x / mp.sqrt(2)) / 2


def _cdf(x):
    """Phi(x)."""
    return _sf(-x)


# --------------------------------------------------------------------------------------
# k-fold Gaussian: mu-GDP
# --------------------------------------------------------------------------------------

def _mu(sigma, steps):
    return mp.sqrt(mp.mpf(steps)) / mp.mpf(sigma)


def _gdp_delta(mu, eps):
    """Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth & Su, Cor. 2.13); with
    a = eps/mu - mu/2 the second term is phi(a) M(a + mu) (e^eps phi(a + mu) = phi(a)),
    which stays finite where e^eps alone would not."""
    eps = mp.mpf(eps)
    a = eps / mu - mu / 2
    if a + mu > _ASYMPTOTIC:
        return _sf(a) - _pdf(a) * _mills(a + mu)
    return _sf(a) - mp.exp(eps) * _sf(a + mu)


def gaussian_delta(sigma: float, steps: float, eps: float) -> mp.mpf:
    """Exact delta(eps) of ``steps`` Gaussian mechanisms of noise ``sigma``, sensitivity 1."""
    with mp.workdps(DPS):
        return +_gdp_delta(_mu(sigma, steps), eps)


def _solve_decreasing(f, target, lo, hi=None):
    """The x in [lo, hi] with f(x) = target for f decreasing (f(lo) > target > f(hi)), by
    bisection (geometric once the bracket spans a factor > 4) to relative width 1e-30;
    ``hi`` is found by doubling when None."""
    lo = mp.mpf(lo)
    if hi is None:
        hi = max(mp.mpf(1), 2 * lo)
        while f(hi) > target:
            lo, hi = hi, 4 * hi
    hi = mp.mpf(hi)
    for _ in range(2000):
        if hi - lo <= mp.mpf("1e-30") * hi:
            break
        mid = mp.sqrt(lo * hi) if lo > 0 and hi > 4 * lo else (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def gaussian_epsilon(sigma: float, steps: float, delta: float) -> mp.mpf:
    """Exact eps(delta) of ``steps`` Gaussian mechanisms of noise ``sigma`` (0 where
    delta >= delta(0))."""
    with mp.workdps(DPS):
        mu = _mu(sigma, steps)
        target = mp.mpf(delta)
        if _gdp_delta(mu, 0) <= target:
            return mp.mpf(0)
        return +_solve_decreasing(lambda e: _gdp_delta(mu, e), target, 0)


# --------------------------------------------------------------------------------------
# one step of the Poisson-subsampled Gaussian, add/remove adjacency
# --------------------------------------------------------------------------------------

def _sub_delta_remove(q, s, eps):
    """P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2). L(x) = log(1 - q + q e^((2x-1)/(2s^2)))
    is increasing with range (log(1-q), inf): for eps >= 0 > log(1-q) the crossing
    x* = 1/2 + s^2 log((e^eps - 1 + q)/q) exists and delta = P(X > x*) - e^eps Q(X > x*)."""
    xs = mp.mpf(1) / 2 + s * s * mp.log((mp.expm1(eps) + q) / q)
    # (1-q) sf(x*/s) + q sf((x*-1)/s) - e^eps sf(x*/s), with (1 - q - e^eps) = -(expm1 + q)
    return q * _sf((xs - 1) / s) - (mp.expm1(eps) + q) * _sf(xs / s)


def _sub_delta_add(q, s, eps):
    """P = N(0,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2). L(x) = -log(1 - q + q e^((2x-1)/(2s^2)))
    is decreasing with range (-inf, -log(1-q)): delta = 0 for eps >= -log(1-q); otherwise
    the crossing x* = 1/2 + s^2 log((e^-eps - 1 + q)/q) and delta = P(X < x*) - e^eps
    Q(X < x*)."""
    if q == 1:
        # Q = N(1, s^2): the plain Gaussian mechanism, symmetric with the remove pair
        return _sub_delta_remove(q, s, eps)
    if eps >= -mp.log1p(-q):
        return mp.mpf(0)
    xs = mp.mpf(1) / 2 + s * s * mp.log((mp.expm1(-eps) + q) / q)
    # Phi(x*/s) - e^eps (1-q) Phi(x*/s) - e^eps q Phi((x*-1)/s)
    return (1 - mp.exp(eps) * (1 - q)) * _cdf(xs / s) - mp.exp(eps) * q * _cdf((xs - 1) / s)


def _direction_fn(direction):
    if direction == "remove":
        return _sub_delta_remove
    if direction == "add":
        return _sub_delta_add
    raise ValueError(f"direction must be 'add' or 'remove', got {direction!r}")


def subsampled_delta_direction(q: float, sigma: float, eps: float, direction: str) -> mp.mpf:
    """Exact delta(eps) of one Poisson-subsampled Gaussian step in one direction."""
    with mp.workdps(DPS):
        q, s, eps = mp.mpf(q), mp.mpf(sigma), mp.mpf(eps)
        return +max(_direction_fn(direction)(q, s, eps), mp.mpf(0))


def subsampled_delta(q: float, sigma: float, eps: float) -> mp.mpf:
    """Exact delta(eps) of one Poisson-subsampled Gaussian step (sampling rate ``q``, noise
    ``sigma``, sensitivity 1), add/remove adjacency: the max of both directions."""
    return max(subsampled_delta_direction(q, sigma, eps, "remove"),
               subsampled_delta_direction(q, sigma, eps, "add"))


def subsampled_epsilon_direction(q: float, sigma: float, delta: float,
                                 direction: str) -> mp.mpf:
    """Exact eps(delta) of one Poisson-subsampled Gaussian step in one direction."""
    with mp.workdps(DPS):
        q, s, target = mp.mpf(q), mp.mpf(sigma), mp.mpf(delta)
        fn = _direction_fn(direction)

        def f(e):
            return fn(q, s, e)

        if f(mp.mpf(0)) <= target:
            return mp.mpf(0)
        hi = None
        if direction == "add" and q < 1:
            hi = -mp.log1p(-q)          # delta_add(hi) = 0 < target
        return +_solve_decreasing(f, target, 0, hi)


def subsampled_epsilon(q: float, sigma: float, delta: float) -> mp.mpf:
    """Exact eps(delta) of one Poisson-subsampled Gaussian step, add/remove adjacency: the
    max over the two directions of each direction's eps(delta)."""
    return max(subsampled_epsilon_direction(q, sigma, delta, "remove"),
               subsampled_epsilon_direction(q, sigma, delta, "add"))
