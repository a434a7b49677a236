"""Rényi divergences of the library's mechanisms and the RDP -> (eps, delta) conversions.

Every function returns the Rényi divergence ``D_alpha(P || Q)`` of a dominating pair at an
array of orders ``alpha > 1`` (RDP in the sense of Mironov 2017, Def. 3). They are upper
bounds (exact where a closed form exists); composition adds them order by order
(Mironov 2017, Prop. 1). The conversions to ``(eps, delta)`` take the best of the classic
bound (Mironov 2017, Prop. 3) and the improved one of Canonne, Kamath, Steinke (2020),
Prop. 12 (equation (C.3) of Koskela, Tobaben, Honkela, *Individual privacy accounting with
Gaussian differential privacy*).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr, logsumexp

from .._numerics import MACHINE_EPSILON, grow_until

__all__ = [
    "DEFAULT_ORDERS",
    "check_orders",
    "gaussian_rdp",
    "laplace_rdp",
    "randomized_response_rdp",
    "pure_dp_rdp",
    "poisson_subsampled_gaussian_rdp",
    "sampled_without_replacement_rdp",
    "sampled_without_replacement_gaussian_rdp",
    "eps_from_rdp",
    "delta_from_rdp",
]


def _default_orders() -> np.ndarray:
    # dp_accounting's default grid (1.1 .. 10.9 step 0.1, 11 .. 63, 128 .. 1024) is a subset,
    # so that our conversion never has fewer orders to choose from; we add orders close to 1
    # (useful for large delta / many steps at tiny q), a finer fractional grid, every integer
    # to 128 and a geometric grid of integers up to 10^4 (useful for tiny delta / small eps).
    frac = [1 + x / 100.0 for x in range(1, 10)] + [1 + x / 20.0 for x in range(2, 200)]
    frac += [1 + x / 10.0 for x in range(1, 100)]
    ints = list(range(11, 129)) + [128, 256, 512, 1024]
    ints += [int(round(128 * 2 ** (k / 4))) for k in range(1, 27)]  # 152 .. 12 177
    ints = [i for i in ints if i <= 10_000] + [10_000]
    return np.unique(np.asarray(frac + ints, dtype=float))


#: The default order grid of :class:`tightdp.accountants.RDPAccountant`.
DEFAULT_ORDERS: np.ndarray = _default_orders()


def check_orders(orders) -> np.ndarray:
    """Orders as a 1-d float array; each must be finite and > 1 (ValueError otherwise)."""
    a = np.atleast_1d(np.asarray(orders, dtype=float)).ravel()
    if a.size == 0:
        raise ValueError("orders must be a non-empty list of Rényi orders in (1, inf)")
    if np.any(~np.isfinite(a)) or np.any(a <= 1):
        raise ValueError(f"orders must be finite and in (1, inf), got {orders!r}")
    return a


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0 without overflow."""
    x = np.asarray(x, dtype=float)
    big = x > 30
    out = np.empty_like(x)
    out[big] = x[big] + np.log1p(-np.exp(-x[big]))
    out[~big] = np.log(np.expm1(x[~big]))
    return out


def _log_binom(n, k) -> np.ndarray:
    """log |C(n, k)| (generalized binomial coefficient, n real)."""
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)




def _log_binom_with_err(n: float, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_log_binom` and a bound on its absolute rounding error (8 ulps of each of the
    magnitudes that cancel in it; scipy's ``gammaln`` is accurate to about 2 ulps)."""
    gn, gk, gnk = float(gammaln(n + 1.0)), gammaln(k + 1.0), gammaln(n - k + 1.0)
    return gn - gk - gnk, 8 * MACHINE_EPSILON * (abs(gn) + np.abs(gk) + np.abs(gnk))


def _sum_err(n: int) -> float:
    """Relative error bound of numpy's pairwise summation of n non-negative terms."""
    return (math.log2(max(n, 2)) + 2) * MACHINE_EPSILON


# --- closed forms -----------------------------------------------------------------------------
def gaussian_rdp(orders, mu: float) -> np.ndarray:
    """RDP of the Gaussian mechanism with ``mu = sensitivity / sigma``:
    ``D_alpha = alpha mu^2 / 2`` (Mironov 2017, Prop. 7 / Table 2); ``inf`` where that is
    beyond the range of floating point (vanishing noise: an upper bound all the same)."""
    a = check_orders(orders)
    with np.errstate(over="ignore"):
        return a * (mu * mu / 2.0)


def laplace_rdp(orders, eps0: float) -> np.ndarray:
    """RDP of the Laplace mechanism with ``eps0 = sensitivity / scale`` (Mironov 2017, Table 2):
    ``D_alpha = log(alpha/(2alpha-1) e^{(alpha-1)eps0} + (alpha-1)/(2alpha-1) e^{-alpha eps0})
    / (alpha - 1)``, evaluated in log space; exact."""
    a = check_orders(orders)
    with np.errstate(over="ignore"):  # eps0 ~ 1e308: the terms are +-inf, the value inf
        t1 = np.log(a) - np.log(2 * a - 1) + (a - 1) * eps0
        t2 = np.log(a - 1) - np.log(2 * a - 1) - a * eps0
    return np.maximum(np.logaddexp(t1, t2) / (a - 1), 0.0)


def randomized_response_rdp(orders, noise_parameter: float, num_values: int) -> np.ndarray:
    """RDP of k-ary randomized response (keep w.p. 1-p, else uniform over k values), exact:
    the dominating pair has masses ``(h, l, l, ..., l)`` and ``(l, h, l, ..., l)`` with
    ``h = 1 - p + p/k`` and ``l = p/k``, so by Def. 3 of Mironov (2017)
    ``D_alpha = log(h^alpha l^{1-alpha} + l^alpha h^{1-alpha} + (k-2) l) / (alpha - 1)``."""
    a = check_orders(orders)
    p, k = float(noise_parameter), int(num_values)
    lh, ll = math.log1p(-p + p / k), math.log(p / k)
    terms = [a * lh + (1 - a) * ll, a * ll + (1 - a) * lh]
    if k > 2:
        terms.append(np.full_like(a, math.log(k - 2) + ll))
    return np.maximum(logsumexp(np.stack(terms), axis=0) / (a - 1), 0.0)


def pure_dp_rdp(orders, eps: float) -> np.ndarray:
    """RDP of any eps-DP mechanism: the Rényi divergence of its dominating pair, binary
    randomized response ``((e^eps, 1), (1, e^eps)) / (1 + e^eps)``, which dominates every eps-DP
    pair (Kairouz, Oh, Viswanath 2015, Thm. 2.1 + data processing). Exact for that pair:
    ``D_alpha = log((e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps)) / (alpha - 1)``."""
    a = check_orders(orders)
    if eps == 0:
        return np.zeros_like(a)
    num = np.logaddexp(a * eps, (1 - a) * eps)
    den = np.logaddexp(0.0, eps)
    return np.maximum((num - den) / (a - 1), 0.0)


# --- Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019) ---------------------------------
#: relative safety margin added to the subsampled-Gaussian values (floating-point rounding)
_SAFETY = 1e-12
#: at most this many series terms per fractional order, then the (rigorous) tail bound is used
_MAX_TERMS = 1 << 15
#: above this mu = sensitivity / sigma the series of the subsampled Gaussian overflow
#: (orders up to 1e4: (i^2 - i) mu^2 / 2 must stay below the largest double)
_MU_SERIES_MAX = 1e148


def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """log A_alpha for integer alpha: Mironov, Talwar, Zhang (2019), Sec. 3.2,
    ``A_alpha = sum_i C(alpha,i) (1-q)^{alpha-i} q^i exp((i^2 - i) / (2 sigma^2))``.

    Because the binomial weights sum to 1 we evaluate ``log1p(sum_{i>=2} C(alpha,i)
    (1-q)^{alpha-i} q^i expm1((i^2-i)/(2 sigma^2)))``: all terms are positive, so tiny values
    of ``A_alpha - 1`` keep full relative accuracy. Each log-term is raised by a bound on its
    rounding error (the ``gammaln`` differences lose ~1e-12 for orders ~1e3) and the sum by
    the summation error, so the value returned is an upper bound in floating point too."""
    i = np.arange(2, alpha + 1, dtype=float)
    a, b = (alpha - i) * math.log1p(-q), i * math.log(q)
    x = (i * i - i) / (2 * sigma * sigma)
    lx = _log_expm1(x)
    lc, e_lc = _log_binom_with_err(float(alpha), i)
    lt = lc + a + b + lx
    err = e_lc + 8 * MACHINE_EPSILON * (np.abs(a) + np.abs(b) + x + np.abs(lx))
    ls = _lse(lt + err) + _sum_err(i.size)
    return float(np.logaddexp(0.0, ls))


def _log_a_frac(q: float, sigma: float, alpha: float, log_target: float) -> float:
    """Upper bound on log A_alpha for fractional alpha by the two series of Mironov, Talwar,
    Zhang (2019), Sec. 3.3: with ``z0 = sigma^2 log(1/q - 1) + 1/2``,
    ``A0 = sum_i C(alpha,i) (1-q)^{alpha-i} q^i e^{(i^2-i)/(2s^2)} Phi((z0 - i)/s)`` and
    ``A1 = sum_i C(alpha,i) (1-q)^i q^{alpha-i} e^{(j^2-j)/(2s^2)} Phi((j - z0)/s)``, ``j =
    alpha - i``, ``A_alpha = A0 + A1``. The generalized binomial coefficients keep their signs
    (they alternate beyond ``alpha``; taking absolute values instead over-states ``A - 1`` by
    up to 20% at ``alpha = 1.1``) and the series is truncated after ``I`` terms with a
    rigorous bound on the remainder: using ``Phi(-t) <= phi(t)/t`` the ``i``-th term of either
    series is at most ``(1-q)^alpha e^{-z0^2/(2s^2)} s/sqrt(2 pi) |C(alpha,i)| / t_i``
    (``t_i = i - z0``, resp. ``i + z0 - alpha``; the exponentials cancel exactly), used for
    the indices with ``t_i >= sigma``, and ``|C(alpha,i)| <= |C(alpha,I)| (I/i)^{alpha+1}``
    for ``i >= I >= alpha`` (Bernoulli's inequality), whose sum over ``i >= I`` is at most
    ``|C(alpha,I)| (1 + I/alpha)``. The finitely many remaining indices (``t_i < sigma``) are
    bounded with ``Phi <= 1`` by their count times ``|C(alpha,I)| (1-q)^alpha e^{g}``, ``g``
    the largest value of the convex exponent ``g(k) = k log(q/(1-q)) + (k^2-k)/(2s^2)`` at
    the ends of their range (``k = i`` in ``A0``, ``k = alpha - i`` in ``A1``). ``I`` is the
    first of ``alpha + 64, 2(alpha + 64), ...`` (at most ``_MAX_TERMS``) whose tail bound is
    below ``exp(log_target)``; the tail bound is added either way. Floating point: each
    log-term is moved by a bound on its rounding error (up for positive terms, down for
    negative ones), the sums by the summation error, and 4 ulps are added to ``log A``."""
    s2 = sigma * sigma
    z0 = s2 * (math.log1p(-q) - math.log(q)) + 0.5
    lq, l1q = math.log(q), math.log1p(-q)
    lodds = lq - l1q
    lconst = alpha * l1q - z0 * z0 / (2 * s2) + math.log(sigma) - 0.5 * math.log(2 * math.pi)

    def g(k: float) -> float:
        return k * lodds + (k * k - k) / (2 * s2)

    def mills_part(k: int, t: float) -> float:  # indices >= k, all with t_i >= t >= sigma
        return (lconst + float(_log_binom(alpha, float(k))) + math.log1p(k / alpha)
                - math.log(t))

    def log_tail(m: int) -> float:  # bound on the sum of all terms with index >= m
        if m < alpha:
            return math.inf
        lcm = float(_log_binom(alpha, float(m)))
        parts = []
        # A0: t_i = i - z0 >= sigma  <=>  i >= k0
        k0 = max(m, math.ceil(z0 + sigma))
        if k0 > m:
            parts.append(math.log(k0 - m) + lcm + alpha * l1q + max(g(m), g(k0 - 1)))
        parts.append(mills_part(k0, k0 - z0))
        # A1: t_i = i + z0 - alpha >= sigma  <=>  i >= k1
        k1 = max(m, math.ceil(alpha - z0 + sigma))
        if k1 > m:
            parts.append(math.log(k1 - m) + lcm + alpha * l1q
                         + max(g(alpha - m), g(alpha - k1 + 1)))
        parts.append(mills_part(k1, k1 + z0 - alpha))
        return _lse(np.array(parts))

    # the fewest terms (from a geometric ladder) whose tail is below the target
    n = int(grow_until(lambda x: x < _MAX_TERMS and log_tail(int(x)) > log_target,
                       int(math.ceil(alpha)) + 64, 2.0, cap=_MAX_TERMS))
    ltail = log_tail(n)
    i = np.arange(n, dtype=float)
    j = alpha - i
    lc, e_lc = _log_binom_with_err(alpha, i)
    neg = np.concatenate([gammasgn(alpha - i + 1.0) < 0] * 2)
    c0 = [i * lq, j * l1q, (i * i - i) / (2 * s2), log_ndtr((z0 - i) / sigma)]
    c1 = [j * lq, i * l1q, (j * j - j) / (2 * s2), log_ndtr((j - z0) / sigma)]
    l0, l1 = lc + sum(c0), lc + sum(c1)
    # rounding-error bounds of each log-term (positive terms raised, negative ones lowered)
    e0 = e_lc + 8 * MACHINE_EPSILON * sum(np.abs(c) for c in c0)
    e1 = e_lc + 8 * MACHINE_EPSILON * sum(np.abs(c) for c in c1)
    lt = np.concatenate([l0, l1])
    err = np.concatenate([e0, e1])
    lpos = _lse(lt[~neg] + err[~neg]) + _sum_err(int(np.sum(~neg)))
    lneg = _lse(lt[neg] - err[neg]) - _sum_err(int(np.sum(neg)))
    return lpos + math.log1p(math.exp(ltail - lpos) - math.exp(lneg - lpos)) + 4 * MACHINE_EPSILON


def _lse(x: np.ndarray) -> float:
    """log(sum(exp(x))) of a 1-d array (-inf when empty)."""
    if x.size == 0:
        return -math.inf
    m = float(np.max(x))
    if not math.isfinite(m):
        return m
    return m + math.log(float(np.sum(np.exp(x - m))))


def poisson_subsampled_gaussian_rdp(orders, q: float, mu: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (rate ``q``, ``mu = sensitivity /
    sigma``), valid for both add/remove directions.

    Remove direction ``D_alpha((1-q)N(0,s^2) + qN(1,s^2) || N(0,s^2)) = log(A_alpha)/(alpha-1)``
    with ``s = 1/mu``: exact for integer orders (Mironov, Talwar, Zhang 2019, Sec. 3.2, binomial
    expansion evaluated in log space), the two series of their Sec. 3.3 for fractional orders
    (with a rigorous tail bound, see :func:`_log_a_frac`), and for fractional orders also
    the convexity bound of ``(alpha-1) D_alpha = log A_alpha`` in alpha between neighbouring
    integers (a log-moment-generating function, convex by Hölder's inequality; used the same way
    by Wang, Balle, Kasiviswanathan 2019, Cor. 10); the
    smaller of the two rigorous values is taken. The add direction ``D_alpha(Q || P)`` is never
    larger: ``B_alpha = E_P[(Q/P)^alpha] <= A_alpha`` (Mironov, Talwar, Zhang 2019, Sec. 3,
    where the RDP of the sampled Gaussian mechanism is shown to be ``log(A_alpha)/(alpha-1)``
    for both directions; cf. Zhu & Wang 2019), which our tests also check by quadrature
    (q in [0.001, 0.9], sigma in [0.3, 2], alpha in [1.5, 100]: max B/A = 0.9994).
    """
    a = check_orders(orders)
    if q == 1.0 or mu > _MU_SERIES_MAX:
        # beyond _MU_SERIES_MAX the series' exponents (i^2 - i) / (2 sigma^2) overflow; the
        # base pair's RDP bounds the subsampled one (subsampling mixes the base pair with
        # (Q, Q), and the Rényi divergence is jointly quasi-convex: van Erven & Harremoës
        # 2014, Thm. 13)
        return gaussian_rdp(a, mu)
    sigma = 1.0 / mu
    int_cache: dict[int, float] = {1: 0.0}

    def log_a_int(n: int) -> float:
        if n not in int_cache:
            int_cache[n] = _log_a_int(q, sigma, n)
        return int_cache[n]

    out = np.empty_like(a)
    for k, alpha in enumerate(a):
        if float(alpha).is_integer():
            la = log_a_int(int(alpha))
        else:
            lo, hi = math.floor(alpha), math.ceil(alpha)
            t = alpha - lo
            interp = (1 - t) * log_a_int(lo) + t * log_a_int(hi)
            # aim for a truncation error below 1e-11 of A - 1 (as bounded by interpolation)
            target = float(_log_expm1(np.array([max(interp, 1e-300)]))[0]) + math.log(1e-11)
            la = min(interp, _log_a_frac(q, sigma, float(alpha), target))
        out[k] = max(la, 0.0) / (alpha - 1)
    return out * (1 + _SAFETY) + 1e-300


# --- sampling without replacement (Wang, Balle, Kasiviswanathan 2019) --------------------------
def sampled_without_replacement_rdp(orders, q: float, base_rdp, base_eps_inf: float
                                    ) -> np.ndarray:
    """RDP of a mechanism run on a sample drawn without replacement (rate ``q = m/n``) under
    the substitute relation: Wang, Balle, Kasiviswanathan (2019), Thm. 9, for integer orders
    ``alpha >= 2``:

    ``eps'(alpha) <= log(1 + q^2 C(alpha,2) min{4(e^{eps(2)} - 1), e^{eps(2)} min{2,
    (e^{eps(inf)} - 1)^2}} + sum_{j=3}^alpha q^j C(alpha,j) e^{(j-1) eps(j)} min{2,
    (e^{eps(inf)} - 1)^j}) / (alpha - 1)``,

    and for fractional orders the convex interpolation of ``(alpha - 1) eps'(alpha)`` between
    the neighbouring integers (their Cor. 10; ``(alpha-1) D_alpha`` is convex in alpha by
    Hölder's inequality).

    Parameters
    ----------
    orders : orders > 1.
    q : sampling rate in (0, 1].
    base_rdp : callable, integer orders -> RDP ``eps(j)`` of the base mechanism under the
        substitute (replace-one) relation of the sample.
    base_eps_inf : ``eps(inf)`` of the base mechanism (``inf`` for the Gaussian).
    """
    a = check_orders(orders)
    if q == 1.0:
        return np.asarray(base_rdp(a), dtype=float)
    hi = int(math.ceil(a.max()))
    js = np.arange(2, hi + 1, dtype=float)
    eps_j = np.asarray(base_rdp(js), dtype=float)
    # log min{2, (e^{eps_inf} - 1)^j}
    if math.isinf(base_eps_inf):
        lmin = np.full_like(js, math.log(2.0))
    else:
        lm1 = float(_log_expm1(np.array([max(base_eps_inf, 1e-300)]))[0])
        lmin = np.minimum(math.log(2.0), js * lm1)
    lterm = (js - 1) * eps_j + lmin  # j >= 3 terms (without q^j C(alpha, j))
    e2 = eps_j[0]
    lterm[0] = min(math.log(4.0) + float(_log_expm1(np.array([max(e2, 1e-300)]))[0]),
                   e2 + lmin[0])
    lq = math.log(q)

    def k_int(n: int) -> float:  # (n - 1) eps'(n)
        if n <= 1:
            return 0.0
        jj = js[: n - 1]
        lt = lterm[: n - 1] + jj * lq + _log_binom(float(n), jj)
        return float(np.logaddexp(0.0, logsumexp(lt)))

    cache: dict[int, float] = {}

    def k_cached(n: int) -> float:
        if n not in cache:
            cache[n] = k_int(n)
        return cache[n]

    out = np.empty_like(a)
    for k, alpha in enumerate(a):
        lo, hi_ = math.floor(alpha), math.ceil(alpha)
        if lo == hi_:
            kk = k_cached(lo)
        else:
            t = alpha - lo
            kk = (1 - t) * k_cached(lo) + t * k_cached(hi_)
        out[k] = kk / (alpha - 1)
    # never worse than the base mechanism itself: the subsampled pair mixes (B0, B0) and
    # (B(c), B(-c)) with the same weights, and the Rényi divergence is jointly quasi-convex
    # (van Erven & Harremoës 2014, Thm. 13)
    return np.minimum(out, np.asarray(base_rdp(a), dtype=float)) * (1 + _SAFETY)


def sampled_without_replacement_gaussian_rdp(orders, q: float, mu: float) -> np.ndarray:
    """RDP of the Gaussian mechanism (``mu = c / s``) on a sample drawn without replacement
    (rate ``q``), substitute relation; valid for the general mechanism (a record whose
    contribution ``+c`` is replaced by ``-c``, the other records arbitrary), hence also for
    the library's pair ``(1-q)N(0) + qN(c)`` vs ``(1-q)N(0) + qN(-c)``. The smaller (per order)
    of two rigorous bounds:

    * Wang, Balle, Kasiviswanathan (2019), Thm. 9, with the base RDP ``alpha (2 mu)^2 / 2`` of
      the replace-one pair at distance ``2c`` (:func:`sampled_without_replacement_rdp`);
    * the Poisson-subsampled Gaussian RDP with shift ``2c`` (:func:`poisson_subsampled_gaussian_rdp`
      with ``2 mu``, both directions): sampling without replacement under substitution is
      dominated by the pair ``((1-q)B(0) + qB(2c), B(0))`` and its reverse (Balle, Barthe,
      Gaboardi 2018, privacy profile of sampling without replacement under substitution;
      Zhu, Dong, Wang 2022, dominating pairs of subsampled mechanisms). Note that when the
      other records' contributions equal ``-c`` that pair is attained exactly, so nothing
      smaller is valid for the general mechanism.
    """
    a = check_orders(orders)
    r = 2.0 * mu
    thm9 = sampled_without_replacement_rdp(a, q, lambda x: gaussian_rdp(x, r), math.inf)
    if q == 1.0:
        return thm9
    return np.minimum(thm9, poisson_subsampled_gaussian_rdp(a, q, r))


# --- conversions ------------------------------------------------------------------------------
def eps_from_rdp(orders, rdp, delta: float) -> tuple[float, float]:
    """Smallest eps with (eps, delta)-DP implied by RDP values ``rdp`` at ``orders``.

    Per order the better of the classic conversion ``eps = rdp + log(1/delta)/(alpha-1)``
    (Mironov 2017, Prop. 3) and the conversion of Canonne, Kamath, Steinke (2020), Prop. 12
    (eq. (C.3) of Koskela et al.): ``eps = rdp + log((alpha-1)/alpha) - (log delta +
    log alpha)/(alpha-1)``; eps = 0 when ``delta >= sqrt(1 - e^{-rdp})``, since then the total
    variation distance is at most delta (Bretagnolle-Huber inequality, ``TV <= sqrt(1 -
    e^{-KL})``, and ``KL <= D_alpha``). Returns ``(eps, order)`` (eps clipped at 0).
    """
    a = check_orders(orders)
    r = np.asarray(rdp, dtype=float)
    ld = math.log(delta)
    with np.errstate(invalid="ignore", divide="ignore"):
        classic = r - ld / (a - 1)
        cks = r + np.log1p(-1 / a) - (ld + np.log(a)) / (a - 1)
        eps = np.minimum(classic, cks)
        bh = 2 * ld >= np.log(-np.expm1(-r))  # delta^2 >= 1 - e^{-r}
    eps = np.where(bh, 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    k = int(np.argmin(eps))
    return max(0.0, float(eps[k])), float(a[k])


def delta_from_rdp(orders, rdp, eps) -> tuple[np.ndarray, np.ndarray]:
    """delta(eps) implied by RDP: the minimum over orders of the classic bound
    ``exp((alpha-1)(rdp - eps))`` (Mironov 2017, Prop. 3), the bound of Canonne, Kamath, Steinke
    (2020), Prop. 12, ``exp((alpha-1)(rdp - eps + log(1 - 1/alpha)) - log alpha)``, and for
    ``eps >= 0`` the Bretagnolle-Huber bound ``sqrt(1 - e^{-rdp})`` on the total variation.
    ``eps`` may be an array; returns ``(delta, order)`` arrays of its shape (delta <= 1)."""
    a = check_orders(orders)
    r = np.asarray(rdp, dtype=float)
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    am1 = (a - 1)[:, None]
    rr = r[:, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        classic = am1 * (rr - e[None, :])
        cks = am1 * (rr - e[None, :] + np.log1p(-1 / a)[:, None]) - np.log(a)[:, None]
        ld = np.minimum(classic, cks)
        bh = 0.5 * np.log(-np.expm1(-rr)) + np.zeros_like(ld)
        bh = np.where(e[None, :] >= 0, bh, np.inf)
        ld = np.minimum(ld, bh)
    ld = np.where(np.isnan(ld), np.inf, ld)
    k = np.argmin(ld, axis=0)
    best = np.minimum(np.exp(ld[k, np.arange(e.size)]), 1.0)
    return best.reshape(np.shape(eps)), a[k].reshape(np.shape(eps))
