"""A dominating pair for two neighbouring steps in a row (a group of two), from the
dominating pairs of each step.

Three datasets ``D, R, D'``: ``(D', R)`` neighbours with hockey-stick profile at most
``delta_1`` (the pair ``first``), ``(R, D)`` with profile at most ``delta_2`` (``second``).
For every set ``S`` and reals ``a, b``,
``M(D')(S) - e^{a+b} M(D)(S) = [M(D')(S) - e^a M(R)(S)] + e^a [M(R)(S) - e^b M(D)(S)]``, so

    delta(a + b) <= delta_1(a) + e^a delta_2(b)                                       (1)

the hockey-stick form of group privacy (Dong, Roth & Su 2022, "Gaussian differential
privacy", JRSS B, Sec. 2.4, Thm. 2.14 of arXiv 1905.02383: ``T(D', D) >= g(1 - f(alpha))``
for ``T(D', R) >= f``, ``T(R, D) >= g``; by the duality of Prop. 2.12 its profile is the
smallest (1) over the splits ``a + b``). The bound is taken on a grid of step ``h`` (a
power of two: the splits ``a + b`` of grid points are exact in floating point), at every
grid point ``eps`` the smallest (1) over its splits on the grid; a ``ceiling`` pair known
to dominate ``(D', D)`` itself adds its own samples of ``delta``.

*The pair.* A privacy profile is a convex non-increasing function of ``x = e^eps``
(``sup_S P(S) - x Q(S)``, a supremum of lines in ``x``); every sample above is an upper bound
on it, so the lower convex hull ``H`` of the samples ``(x_k, delta_k)`` and ``(0, 1)`` is
still above it (the greatest convex function below the samples). A discrete pair with an
atom at loss ``eps_i`` of Q-mass ``q_i`` and P-mass ``e^{eps_i} q_i`` for every vertex of
``H`` (``q_i``: the change of slope of ``H`` there), Q-mass ``1 + H'(0+)`` at loss ``-inf``
and P-mass ``H(x_max)`` at ``+inf`` has profile ``sum_{eps_i > eps} (p_i - e^eps q_i) + m``,
which is linear in ``x`` between vertices and equal to ``H`` at each: it is ``H`` (Koskela
et al. 2020, Lemma 5), so it dominates ``(D', D)``. Its trade-off function is the piecewise
linear curve of the lines ``1 - delta_k - e^{eps_k} alpha`` (Prop. 2.12), the convex
minorant of ``g(1 - f(alpha))`` they sample. The computed masses are checked against the
hull at every vertex with a certified lower bound of their own profile, and scaled up by
any relative shortfall (:func:`hull_pair`): no absolute floor, so the profile follows the
samples down to the smallest double.
"""

from __future__ import annotations

import math

import numpy as np

from .._numerics import UNIT_ROUNDOFF
from .base import PrivacyLoss
from .discrete import DiscreteLoss

__all__ = ["delta_upper", "group_of_two", "group_profile", "hull_pair"]

#: the samples cover the losses up to where the profile falls below this (or the support)
CUT = 1e-300
#: samples beyond this eps are dropped (a subset of valid lines: the hull is higher), so
#: that ``e^eps`` is a finite double
MAX_EPS = 700.0
#: below this scale of the Q-masses (delta e^-eps) the hull pair's masses approach the
#: subnormal doubles and lose their relative accuracy: a shortfall there is absolute
TINY = 1e-290
#: unit roundoff of numpy's long double (2^-64 on x86-64, double's where they agree)
_U_LONG = float(np.finfo(np.longdouble).eps) / 2.0
#: relative allowance on the delta of a loss without a certified evaluation of its own
#: (closed forms from scipy's log_ndtr, accurate to a few units of roundoff: a wide margin)
CLOSED_FORM_REL = 1e-9


def delta_upper(loss: PrivacyLoss, eps: np.ndarray) -> np.ndarray:
    """A certified upper bound on ``delta(eps)`` of one application of ``loss``: a
    :class:`DiscreteLoss`'s :meth:`~DiscreteLoss.delta_upper`, else the closed form's
    value with the relative allowance :data:`CLOSED_FORM_REL` (and the smallest normal
    double, against underflow)."""
    e = np.asarray(eps, dtype=float)
    if isinstance(loss, DiscreteLoss):
        return loss.delta_upper(e)
    return loss.delta(e) * (1.0 + CLOSED_FORM_REL) + 2.3e-308


def _span(loss: PrivacyLoss) -> tuple[float, float]:
    """The losses where the profile moves: the support's ends where finite, else where
    the P-tail beyond holds at most :data:`CUT` (``loss_quantile``)."""
    lo, hi = loss.support
    if not math.isfinite(hi):
        hi = loss.loss_quantile(math.log(CUT), upper=True)
    if not math.isfinite(lo):
        lo = loss.loss_quantile(math.log(CUT), upper=False)
    return float(lo), float(max(hi, lo))


def group_profile(first: PrivacyLoss, second: PrivacyLoss, points: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(eps, delta)``: certified upper bounds (1) of the module on the profile of the
    group of two, at the grid points ``eps`` (step a power of two, about ``points`` per
    loss span: the smallest over the splits on the grid). ``first`` bounds ``(D', R)``,
    ``second`` ``(R, D)``."""
    (lo1, hi1), (lo2, hi2) = _span(first), _span(second)
    width = max(hi1 - lo1, hi2 - lo2, 1e-3)
    h = 2.0 ** math.floor(math.log2(width / max(points - 1, 1)))
    i1 = np.arange(math.floor(lo1 / h), math.ceil(hi1 / h) + 1)
    i2 = np.arange(math.floor(lo2 / h), math.ceil(hi2 / h) + 1)
    a, b = i1 * h, i2 * h
    d1, d2 = delta_upper(first, a), delta_upper(second, b)
    ea = np.exp(a)
    out = np.full(a.size + b.size - 1, np.inf)
    for r in range(a.size):   # the splits a_r + b_j of the grid points r + j
        seg = out[r:r + b.size]
        np.minimum(seg, d1[r] + ea[r] * d2, out=seg)
    # each term within 3 u (exp within one ulp, a product and a sum): up by 8 u; the
    # smallest normal double against underflow
    delta = out * (1.0 + 8.0 * UNIT_ROUNDOFF) + 2.3e-308
    return (i1[0] + i2[0] + np.arange(out.size)) * h, delta


def _hull(x: np.ndarray, d: np.ndarray) -> list[int]:
    """Indices of the vertices of the lower convex hull of the points ``(x, d)`` (``x``
    increasing, distinct, ``x[0] = 0``) up to its lowest point: kept while the computed
    slopes strictly increase and stay negative (Andrew's monotone chain)."""
    stack: list[int] = [0]
    slopes: list[float] = []
    for k in range(1, x.size):
        while True:
            sl = (d[k] - d[stack[-1]]) / (x[k] - x[stack[-1]])
            if slopes and sl <= slopes[-1]:
                stack.pop()
                slopes.pop()
                continue
            break
        stack.append(k)
        slopes.append(sl)
    cut = next((i for i, sl in enumerate(slopes) if sl >= 0.0), len(slopes))
    return stack[:cut + 1]


def _profile_lower(ys: np.ndarray, p: np.ndarray, q: np.ndarray, inf_mass: float
                   ) -> np.ndarray:
    """Certified lower bounds on the profile of the pair (atoms ``ys`` increasing, masses
    ``p``, ``q``, P-mass ``inf_mass`` at ``+inf``) at ``x = 0`` (its P-mass) and at each
    atom's loss: ``sum_{j > k} p_j + m - e^{y_k} sum_{j > k} q_j`` from suffix sums in long
    double, less their rounding, ``(n + 8) u_long`` times ``P(A) + e^y Q(A)`` (sequential
    sums, Higham 2002, eq. (4.4); the exponential within an ulp), and ``u`` of the
    result's rounding to double. Every term is relative: no floor."""
    n = ys.size
    ld = np.longdouble
    ps = np.concatenate([np.cumsum(p[::-1].astype(ld))[::-1], [ld(0.0)]]) + ld(inf_mass)
    qs = np.concatenate([np.cumsum(q[::-1].astype(ld))[::-1], [ld(0.0)]])
    eq = np.exp(ys.astype(ld)) * qs[1:]
    val = ps[1:] - eq
    charge = (n + 8.0) * _U_LONG * (ps[1:] + eq)
    out = np.concatenate([[ps[0] * (1 - (n + 8.0) * _U_LONG)], val - charge])
    return out.astype(float) * (1.0 - 2.0 * UNIT_ROUNDOFF)


def hull_pair(eps: np.ndarray, delta: np.ndarray) -> DiscreteLoss:
    """The discrete pair whose profile is the lower convex hull (in ``x = e^eps``) of the
    certified samples ``delta >= delta(eps)`` (``eps <= MAX_EPS``) and ``(x = 0, 1)``
    (module docstring). Its
    computed masses are checked at ``x = 0`` and at every vertex (:func:`_profile_lower`);
    where short, its P-masses are multiplied by the largest ratio (at vertices where
    ``delta e^-eps``, the scale of the Q-masses beyond, is below :data:`TINY`, near the
    subnormals, the shortfall is added to the mass at ``+inf`` instead: at most
    ``TINY e^eps``, where the profile is that small), which multiplies its
    profile by at least that (``sum (r p_j - x q_j)_+ >= r sum (p_j - x q_j)_+``, ``r >=
    1``): above the hull at every vertex, so everywhere (both are linear in ``x`` between
    vertices; beyond the last both are constant)."""
    e = np.asarray(eps, dtype=float)
    d = np.asarray(delta, dtype=float)
    keep = np.isfinite(d) & (d < 1.0) & (e <= MAX_EPS)   # e^eps a finite double
    e, d = e[keep], d[keep]
    order = np.lexsort((d, e))
    e, d = e[order], d[order]
    first = np.ones(e.size, dtype=bool)
    first[1:] = e[1:] != e[:-1]   # the smallest delta at each eps
    e, d = e[first], d[first]
    x = np.concatenate([[0.0], np.exp(e)])
    dd = np.concatenate([[1.0], d])
    idx = np.asarray(_hull(x, dd)[1:], dtype=int)
    if idx.size == 0:
        return DiscreteLoss([0.0], [1.0], [1.0])   # every sample at 1: nothing private
    xs = x[idx]
    hd = dd[idx]
    xprev, dprev = np.concatenate([[0.0], xs[:-1]]), np.concatenate([[1.0], hd[:-1]])
    alpha = (dprev - hd) / (xs - xprev)   # minus the hull's slopes: strictly decreasing
    q = alpha - np.append(alpha[1:], 0.0)
    ys = e[idx - 1]
    p, m = xs * q, float(hd[-1])
    got = _profile_lower(ys, p, q, m)
    want = np.concatenate([[1.0], hd])
    with np.errstate(divide="ignore"):
        big = np.concatenate([[True], hd / xs >= TINY])   # Q-masses of normal doubles
    if np.any(got[big] <= 0.0):
        raise ValueError("the group-of-two samples are not a privacy profile: the hull "
                         "pair's profile vanishes at a vertex")
    r = max(float(np.max(want[big] / got[big])), 1.0) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    tail = float(np.max(want[~big] - got[~big], initial=0.0))
    return DiscreteLoss(ys, p * r, q, inf_mass=m * r + max(tail, 0.0),
                        neg_inf_mass=max(1.0 - float(alpha[0]), 0.0))


def group_of_two(first: PrivacyLoss, second: PrivacyLoss, *, points: int = 2000,
                 ceiling: PrivacyLoss | None = None) -> DiscreteLoss:
    """A pair dominating ``(D', D)`` from ``first`` dominating ``(D', R)`` and ``second``
    dominating ``(R, D)`` (module docstring): the hull pair of the group samples
    (:func:`group_profile`, ``points`` per span) and, where given, of ``4 points`` samples
    of ``ceiling``'s own profile on its span (a pair known to dominate ``(D', D)``: the
    smaller of the two bounds, wherever it is smaller; its span is wider, its samples
    denser so that the hull's chords stay close to it where it is the smaller)."""
    eps, delta = group_profile(first, second, points)
    if ceiling is not None:
        lo, hi = _span(ceiling)
        ec = np.linspace(lo, hi, 4 * points)
        eps, delta = np.concatenate([eps, ec]), np.concatenate([delta,
                                                                delta_upper(ceiling, ec)])
    return hull_pair(eps, delta)
