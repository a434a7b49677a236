"""The saddle-point formulas of the privacy curve (Alghamdi, Gomez, Asoodeh, Calmon, Kosut,
Sankar, *The Saddle-Point Accountant for Differential Privacy*, arXiv:2208.09595, 2022; the
equation numbers are that paper's), shared by :class:`~tightdp.SaddlePointAccountant`, the PLD
accountant's grid choice and :class:`~tightdp.IndividualSPAAccountant`.

For a composed privacy loss ``Y`` with CGF ``K(t) = log E[e^{tY}]`` (eq. (23)):

* the saddle point (eq. (50)) is the ``t > 0`` with ``K'(t) = eps + 1/t + 1/(1 + t)``
  (:func:`saddle_eps` solves it for eps);
* SP-MSD0 (eqs. (7), (60)), SP-MSD1 (eq. (61)) and SP-CLT (eqs. (8), (66), Proposition 6)
  approximate ``log delta(eps)`` from ``K`` and its derivatives at the saddle point
  (:func:`saddle_log_delta`);
* ``theta_t(x) = (1 - e^{-x})_+ e^{-t x}`` (eq. (38)) has the maximum
  ``M_t = t^t / (1+t)^{1+t}`` (eq. (42); :func:`log_theta_max`), which gives the certified
  refined-moments bound ``delta(eps) <= e^{K(t) - t eps} M_t`` for every ``t > 0``.

The tilt search (:func:`solve_tilt`: the grids of :func:`tilt_grids`, cut by the CGF's
node-set ranges) is a use of :mod:`tightdp.roots`, where the root finding lives.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Protocol

import numpy as np
from scipy.special import erfcx, log_ndtr

from .._numerics import FLOATS, log0
from ..losses.cgf import node_bucket
from ..roots import Roots, bisect, solve_few, solve_on_grids
from ..roots import root_decreasing as root_decreasing  # importable from here
from ..roots import roots_decreasing as roots_decreasing  # importable from here

__all__ = ["METHODS", "LABELS", "UNRELIABLE", "T_MIN", "T_MAX_QUAD", "T_MAX",
           "log_theta_max", "rma_eps", "rma_log_delta", "log_clt_theta", "log_clt_theta1",
           "saddle_eps",
           "saddle_log_delta", "saddle_terms1", "saddle_log_delta_slope", "tilt_grids",
           "grid_parts", "solve_tilt", "saddle_point_eps"]

#: the saddle-point approximations
METHODS = ("msd1", "msd0", "clt")
#: their labels, with the paper's equations
LABELS = {"msd0": "SP-MSD0 (eq. (7)/(60))", "msd1": "SP-MSD1 (eq. (61))",
          "clt": "SP-CLT (eq. (8)/(66), Prop. 6)"}
#: above this size of the SP-MSD1 correction terms the approximation is flagged unreliable
#: (checked on DP-SGD against certified PLD brackets: below it the SP-MSD1 error in eps stays
#: under 1e-2, above it errors of 1e-2 .. 1e2 occur)
UNRELIABLE = 0.3
#: the smallest tilt tried; the largest for quadrature CGFs; the largest for closed forms
T_MIN, T_MAX_QUAD, T_MAX = 1e-12, 2048.0, 1e12
_LOG2 = math.log(2.0)
_SQRT2 = math.sqrt(2.0)


def log_theta_max(t: np.ndarray) -> np.ndarray:
    """log of ``M_t = t^t / (1+t)^{1+t}``, the maximum of ``theta_t`` (eq. (42))."""
    return t * np.log(t) - (1.0 + t) * np.log1p(t)


def rma_eps(k: np.ndarray, t: np.ndarray, log_room) -> np.ndarray:
    """The refined-moments bound (eq. (43)) solved for eps: ``(K(t) + log M_t - log_room) /
    t``, at which ``e^{K(t) - t eps} M_t`` equals ``e^log_room`` (``M_t`` of eq. (42)), so
    ``delta(eps') <= e^log_room`` for every ``eps'`` from it on; a certified upper bound on
    ``eps(delta)`` at each tilt ``t > 0`` when ``k`` bounds ``K(t)`` from above and
    ``e^log_room`` is the part of ``delta`` left for the finite losses. Elementwise
    (broadcast); the one place the formula is written (the SPA, the PLD accountant's pilot
    and the individual PLD accountant's direction test use it)."""
    return (k + log_theta_max(t) - log_room) / t


def rma_log_delta(k: np.ndarray, t: np.ndarray, eps) -> np.ndarray:
    """The refined-moments bound (eq. (43)) on ``log delta(eps)`` of the finite losses:
    ``K(t) + log M_t - t eps`` (``M_t`` of eq. (42)), certified at each tilt ``t > 0`` when
    ``k`` bounds ``K(t)`` from above; :func:`rma_eps` solved the other way. Elementwise."""
    return k + log_theta_max(t) - t * eps


def _log_half_erfcx(a: np.ndarray) -> np.ndarray:
    """log(erfcx(a / sqrt 2) / 2) = a^2/2 + log Phi(-a), without overflow for any sign of a."""
    a = np.asarray(a, dtype=float)
    # floating-point warnings are silenced by the caller (log_clt_theta)
    pos = np.log(erfcx(np.maximum(a, 0.0) / _SQRT2)) - _LOG2
    neg = 0.5 * a * a + log_ndtr(-np.minimum(a, 0.0))
    return np.where(a >= 0, pos, neg)


def log_clt_theta(t: np.ndarray, m: np.ndarray, s: np.ndarray, slope: bool = False
                  ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``log E[theta_t(Z)]`` for ``Z ~ N(m, s^2)`` (Alghamdi et al., Proposition 6 / eq. (79)).

    ``E[(1 - e^{-Z}) e^{-tZ} 1{Z > 0}] = A - B`` with ``A = e^{-tm + t^2 s^2/2} Phi(m/s - ts)``
    and ``B = e^{-(t+1)m + (t+1)^2 s^2/2} Phi(m/s - (t+1)s)``, i.e.
    ``e^{-m^2/(2s^2)} [erfcx(a_1/sqrt 2) - erfcx(a_2/sqrt 2)] / 2`` with ``a_1 = ts - m/s`` and
    ``a_2 = a_1 + s``. With ``slope=True`` also its derivative in ``m``: the two density
    terms of ``dA/dm`` and ``dB/dm`` are both ``phi(m/s)/s`` and cancel, so
    ``d log E / dm = (-t A + (t+1) B) / (A - B) = (-t + (t+1) r) / (1 - r)``, ``r = B/A``.
    """
    # s = 0 (a tilted law on one atom, e.g. pure DP at a very large tilt) gives -inf/NaN,
    # handled by the callers; no warning for it
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        val, r = _clt_theta(np, _log_half_erfcx2, t, m, s)
        if not slope:
            return val
        return val, (-t + (t + 1.0) * r) / (1.0 - r)


def log_clt_theta1(t: float, m: float, s: float) -> tuple[float, float]:
    """:func:`log_clt_theta` with ``slope=True`` for one ``(t, m, s)`` in Python floats (the
    same formulas, :func:`_clt_theta` with ``FLOATS``; the logarithms and exponentials by
    the math module, whose last bit may differ from numpy's). Raises ZeroDivisionError
    where ``s = 0`` or ``B/A = 1`` (the callers use the arrays' form)."""
    val, r = _clt_theta(FLOATS, _log_half_erfcx1, t, m, s)
    return val, (-t + (t + 1.0) * r) / (1.0 - r)


def _clt_theta(xp, log_half_erfcx2: Callable, t, m, s) -> tuple:
    """``(log E[theta_t(Z)], r = B/A)`` of :func:`log_clt_theta` in the arithmetic ``xp``
    (numpy or ``FLOATS``), ``log_half_erfcx2(a1, a2)`` giving :func:`_log_half_erfcx` of
    both arguments."""
    ms = m / s
    a1 = t * s - ms
    a2 = a1 + s
    l1, l2 = log_half_erfcx2(a1, a2)
    lr = xp.minimum(l2 - l1, 0.0)
    val = -0.5 * (ms * ms) + (l1 + xp.log(-xp.expm1(lr)))
    return val, xp.exp(lr)


def _log_half_erfcx2(a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
    """:func:`_log_half_erfcx` of two arrays (broadcast), in one evaluation."""
    if np.shape(a1) != np.shape(a2):
        a1, a2 = np.broadcast_arrays(a1, a2)
    return _log_half_erfcx(np.stack([a1, a2]))


def _log_half_erfcx1(a1: float, a2: float) -> tuple[float, float]:
    """:func:`_log_half_erfcx` of two floats (scipy's ``erfcx``/``log_ndtr`` on scalars)."""
    return _log_half_erfcx_float(a1), _log_half_erfcx_float(a2)


def _log_half_erfcx_float(a: float) -> float:
    if a >= 0:
        return log0(float(erfcx(a / _SQRT2))) - _LOG2
    return 0.5 * a * a + float(log_ndtr(-a))  # a NaN lands here, as in the arrays' form


def saddle_eps(ks: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The eps whose saddle point is ``t``: eq. (50) solved for eps,
    ``eps = K'(t) - 1/t - 1/(1+t)`` (``ks[1]`` is ``K'``)."""
    return ks[1] - 1.0 / t - 1.0 / (1.0 + t)


def saddle_log_delta(ks: np.ndarray, t: np.ndarray, eps: np.ndarray | None, method: str
                     ) -> tuple[np.ndarray, ...]:
    """(log delta approximation, eps, fallback flag, size of the MSD1 terms) at tilt ``t``.

    ``ks`` holds the rows ``K, K', K'', K''', K''''`` of the composed CGF at ``t`` (first axis;
    the rest broadcasts with ``t``); ``eps=None`` means the saddle-point eps of ``t``
    (eq. (50) solved for eps, :func:`saddle_eps`). SP-MSD0 is eqs. (7)/(60), SP-MSD1
    eq. (61), SP-CLT eqs. (8)/(66) with Proposition 6 (:func:`log_clt_theta`).

    The size of the two SP-MSD1 correction terms, ``max(|phi4|/(8 phi2^2),
    5 phi3^2/(24 phi2^3))`` (their difference may cancel), is returned for every method as a
    diagnostic: where it is not small the tilted loss is far from Gaussian (few effective
    compositions) and no saddle-point approximation can be trusted."""
    k0, k1, k2, k3, k4 = ks[0], ks[1], ks[2], ks[3], ks[4]
    tp = 1.0 + t
    if eps is None:
        eps = saddle_eps(ks, t)
    fallback = np.zeros(np.shape(k0 + t), dtype=bool)
    phi2 = k2 + 1.0 / t ** 2 + 1.0 / tp ** 2
    phi3 = k3 - 2.0 / t ** 3 - 2.0 / tp ** 3
    phi4 = k4 + 6.0 / t ** 4 + 6.0 / tp ** 4
    term4 = phi4 / (8.0 * phi2 ** 2)
    term3 = 5.0 * phi3 ** 2 / (24.0 * phi2 ** 3)
    corr_m1 = term4 - term3
    size = np.maximum(np.abs(term4), term3)
    if method == "clt":
        s = np.sqrt(k2)
        val = k0 - t * eps + log_clt_theta(t, k1 - eps, s)
        return val, eps, fallback, size
    phi = k0 - t * eps - np.log(t) - np.log1p(t)
    val = phi - 0.5 * np.log(2.0 * math.pi * phi2)
    if method == "msd1":
        fallback = ~(corr_m1 > -1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.where(fallback, val, val + np.log1p(np.where(fallback, 0.0, corr_m1)))
    return val, eps, fallback, size


def saddle_terms1(k2: float, k3: float, k4: float, t: float, method: str
                  ) -> tuple[bool, float]:
    """The diagnostics of :func:`saddle_log_delta` at one tilt, in Python floats: whether
    SP-MSD1 falls back to SP-MSD0 there (its correction factor not positive; False for the
    other methods) and the size of the two SP-MSD1 terms, ``max(|phi4|/(8 phi2^2),
    5 phi3^2/(24 phi2^3))`` (eq. (61); ``phi2..phi4`` as there)."""
    tp = 1.0 + t
    phi2 = k2 + 1.0 / (t * t) + 1.0 / (tp * tp)
    phi3 = k3 - 2.0 / t ** 3 - 2.0 / tp ** 3
    phi4 = k4 + 6.0 / t ** 4 + 6.0 / tp ** 4
    term4 = phi4 / (8.0 * (phi2 * phi2))
    term3 = 5.0 * (phi3 * phi3) / (24.0 * phi2 ** 3)
    fallback = method == "msd1" and not term4 - term3 > -1.0
    return fallback, max(abs(term4), term3)


def saddle_log_delta_slope(ks: np.ndarray, t: np.ndarray, method: str,
                           k5: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log delta, d(-log delta)/d log t, log1p(t))`` at the saddle point ``t`` (its eps
    by eq. (50)): the approximation of :func:`saddle_log_delta` (the same operations, hence
    the same numbers, without its diagnostics) and the slope the eps(delta) solvers step on.

    From ``phi`` (eq. (49)) at the saddle point ``d(-log delta)/d log t = t^2 phi2``, for
    SP-MSD0/1 plus ``t phi3 / (2 phi2)`` from the ``1/sqrt(2 pi phi2)`` factor (eq. (60);
    ``phi2, phi3`` the second and third derivatives of ``phi``); the MSD1 correction's
    O(1/k^2) slope is left out (a Newton step only needs a close slope) unless the fifth
    cumulant ``k5`` is given: then SP-MSD1's slope is exact, with the correction
    ``c = phi4/(8 phi2^2) - 5 phi3^2/(24 phi2^3)`` (eq. (61)) adding
    ``-t c'/(1 + c)``, ``c' = phi5/(8 phi2^2) - (2/3) phi3 phi4/phi2^3 + (5/8) phi3^3/phi2^4``
    (``phi2..phi5`` do not depend on eps: each is the next one's derivative;
    ``phi5 = K^(5) - 24/t^5 - 24/(1+t)^5``). ``log1p(t)`` is returned for the caller's
    refined-moments equation."""
    if t.size <= 2 and method != "clt":
        try:
            out = _slope_floats(ks, t, method, k5)
        except ZeroDivisionError:
            out = None
        if out is not None:
            return out
    k0, k1, k2 = ks[0], ks[1], ks[2]
    tp = 1.0 + t
    eps = k1 - 1.0 / t - 1.0 / tp  # saddle_eps
    phi2 = k2 + 1.0 / t ** 2 + 1.0 / tp ** 2
    l1p = np.log1p(t)
    d_ld = t * t * phi2
    if method == "clt":
        val = k0 - t * eps + log_clt_theta(t, k1 - eps, np.sqrt(k2))
        return val, d_ld, l1p
    phi3 = ks[3] - 2.0 / t ** 3 - 2.0 / tp ** 3
    val = k0 - t * eps - np.log(t) - l1p - 0.5 * np.log(2.0 * math.pi * phi2)
    if method == "msd1":
        phi4 = ks[4] + 6.0 / t ** 4 + 6.0 / tp ** 4
        corr_m1 = phi4 / (8.0 * phi2 ** 2) - 5.0 * phi3 ** 2 / (24.0 * phi2 ** 3)
        ok = corr_m1 > -1.0
        if ok.all():  # the common case: the same numbers as the masked form below
            val = val + np.log1p(corr_m1)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                val = np.where(ok, val + np.log1p(np.where(ok, corr_m1, 0.0)), val)
        if k5 is not None:
            phi5 = k5 - 24.0 / t ** 5 - 24.0 / tp ** 5
            f22 = phi2 * phi2
            dc = (phi5 / (8.0 * f22) - (2.0 / 3.0) * phi3 * phi4 / (f22 * phi2)
                  + 0.625 * phi3 * phi3 * phi3 / (f22 * f22))
            with np.errstate(invalid="ignore", divide="ignore"):
                return val, d_ld + 0.5 * t * phi3 / phi2 - np.where(
                    ok, t * dc / (1.0 + np.where(ok, corr_m1, 0.0)), 0.0), l1p
    return val, d_ld + 0.5 * t * phi3 / phi2, l1p


def _slope_floats(ks: np.ndarray, t: np.ndarray, method: str, k5: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`saddle_log_delta_slope` (SP-MSD0/1) at one or two tilts: the arithmetic in
    Python floats (the same IEEE operations in the same order; ``x ** 2`` is numpy's
    ``x * x``), the logarithms and the other powers by the same numpy functions as the
    arrays' form, so the numbers are the same without the overhead of a few dozen operations
    on tiny arrays. None (the caller uses the arrays' form) where a value is not finite or
    an SP-MSD1 correction is not above -1; may raise ZeroDivisionError (the same then)."""
    tl = t.tolist()
    rows = ks[:5].tolist()
    n = len(tl)
    tpl = [1.0 + x for x in tl]
    both = np.array(tl + tpl)
    p3, p4 = np.power(both, 3).tolist(), np.power(both, 4).tolist()
    l1p = np.log1p(t)
    lt, l1 = np.log(t).tolist(), l1p.tolist()
    val, phi2, phi3, corr_in = [], [], [], []
    for i in range(n):
        x, xp = tl[i], tpl[i]
        k0, k1, k2, k3 = rows[0][i], rows[1][i], rows[2][i], rows[3][i]
        eps = k1 - 1.0 / x - 1.0 / xp
        f2 = k2 + 1.0 / (x * x) + 1.0 / (xp * xp)
        phi2.append(f2)
        phi3.append(k3 - 2.0 / p3[i] - 2.0 / p3[n + i])
        val.append(k0 - x * eps - lt[i] - l1[i])
    two_pi = 2.0 * math.pi
    lphi = np.log(np.array([two_pi * f for f in phi2])).tolist()
    val = [v - 0.5 * lp for v, lp in zip(val, lphi, strict=True)]
    if method == "msd1":
        f2c = np.power(np.array(phi2), 3).tolist()
        for i in range(n):
            f2, f3 = phi2[i], phi3[i]
            phi4 = rows[4][i] + 6.0 / p4[i] + 6.0 / p4[n + i]
            corr_in.append(phi4 / (8.0 * (f2 * f2)) - 5.0 * (f3 * f3) / (24.0 * f2c[i]))
        if not all(c > -1.0 for c in corr_in):
            return None
        lc = np.log1p(np.array(corr_in)).tolist()
        val = [v + c for v, c in zip(val, lc, strict=True)]
    slope = [x * x * f2 + 0.5 * x * f3 / f2 for x, f2, f3 in zip(tl, phi2, phi3, strict=True)]
    if method == "msd1" and k5 is not None:
        k5l = k5.tolist()
        p5 = np.power(both, 5).tolist()
        for i in range(n):
            x, f2, f3 = tl[i], phi2[i], phi3[i]
            phi4 = rows[4][i] + 6.0 / p4[i] + 6.0 / p4[n + i]
            phi5 = k5l[i] - 24.0 / p5[i] - 24.0 / p5[n + i]
            f22 = f2 * f2
            dc = (phi5 / (8.0 * f22) - (2.0 / 3.0) * f3 * phi4 / (f22 * f2)
                  + 0.625 * f3 * f3 * f3 / (f22 * f22))
            slope[i] -= x * dc / (1.0 + corr_in[i])
    if not all(math.isfinite(v) for v in val + slope):
        return None
    return np.array(val), np.array(slope), l1p


def tilt_grids(lo: float, hi: float, cap: float, npts: int, doubling: bool = False
               ) -> list[np.ndarray]:
    """Tilt grids for bracketing: ``[lo, hi]``, then below ``lo`` down to :data:`T_MIN`, then
    upwards to ``cap`` in chunks of a factor ~4 (so that large tilts, whose quadrature node
    sets are expensive, are only visited when a root lies there). With ``doubling``, the
    first grid goes on above ``hi`` with the points ``hi 2^j`` (and ``cap``): one point per
    node-set range (:func:`tightdp.losses.cgf.node_bucket`), scanned lazily range by range
    (for solves that narrow their cells further, :func:`solve_tilt`'s ``refine``). The grids
    of each ``(lo, hi, cap, npts, doubling)`` are computed once (read-only arrays, a new list
    per call)."""
    return list(_tilt_grids(float(lo), float(hi), float(cap), int(npts), bool(doubling)))


@functools.lru_cache(maxsize=64)
def _tilt_grids(lo: float, hi: float, cap: float, npts: int, doubling: bool
                ) -> tuple[np.ndarray, ...]:
    hi = min(hi, cap)  # never beyond the supported tilts
    grids = [np.geomspace(lo, hi, npts)]
    if lo > T_MIN:
        grids.append(np.geomspace(T_MIN, lo, 12))
    if hi < cap and doubling:
        up = hi * 2.0 ** np.arange(1, int(math.ceil(math.log2(cap / hi))) + 1)
        grids[0] = np.concatenate([grids[0], np.unique(np.minimum(up, cap))])
    elif hi < cap:
        up = np.geomspace(hi, cap, max(9, int(4 * math.log10(cap / hi)) + 2))
        grids.extend(up[i:i + 3].copy() for i in range(0, up.size - 1, 2))
    for g in grids:
        g.setflags(write=False)
    return tuple(grids)


def solve_tilt(f: Callable, target, lo: float, hi: float, cap: float, *, iters: int = 60,
               rtol: float = 1e-11, npts: int = 65, which: np.ndarray | None = None,
               secant: np.ndarray | None = None, refine: int = 0,
               memo: dict | None = None) -> Roots:
    """Solve ``g(t) = target`` for the tilt ``t`` (g roughly increasing in t) on the grids of
    :func:`tilt_grids` ``(lo, hi, cap, npts)``, each scanned one CGF node-set range
    (:func:`grid_parts`) at a time, so that the node sets of tilts above every root are
    never built: :func:`tightdp.roots.solve_on_grids`, or with ``refine > 0`` for at most 8
    targets (an eps(delta) query) :func:`tightdp.roots.solve_few` on the grid that goes on
    above ``hi`` by doublings (one point per node-set range; ``memo`` its kept table, per
    ``f``). Returns :class:`tightdp.roots.Roots` ``(t, ok)``: ok False where no root was
    bracketed below ``cap`` (t = cap there); ``t = T_MIN`` where ``g`` is at or above the
    target already there. ``f``, ``which``, ``secant``, ``iters``, ``rtol``: as in
    :func:`tightdp.roots.solve_on_grids`."""
    n = np.size(target)
    if refine > 0 and n <= 8:
        return solve_few(f, target, tilt_grids(lo, hi, cap, npts, doubling=True), floor=T_MIN,
                         cap=cap, refine=refine, pieces=grid_parts, which=which,
                         secant=secant, memo=memo, iters=iters, rtol=rtol)
    return solve_on_grids(f, target, tilt_grids(lo, hi, cap, npts), floor=T_MIN, cap=cap,
                          pieces=grid_parts, which=which, secant=secant, iters=iters,
                          rtol=rtol)


def grid_parts(grid: np.ndarray) -> tuple[np.ndarray, ...]:
    """``grid`` cut where its node-set bucket (:func:`tightdp.losses.cgf.node_bucket`)
    changes, in increasing order (read-only pieces), computed once per grid (the bracketing
    grids of :func:`tilt_grids` are few and scanned again at every query)."""
    return _grid_parts_of(grid.tobytes())


@functools.lru_cache(maxsize=64)
def _grid_parts_of(key: bytes) -> tuple[np.ndarray, ...]:
    grid = np.frombuffer(key, dtype=float)
    cuts = np.flatnonzero(np.diff(node_bucket(grid))) + 1
    parts = tuple(grid[p] for p in np.split(np.arange(grid.size), cuts))
    for p in parts:
        p.setflags(write=False)
    return parts


class HasCumulants(Protocol):
    """A composed log-MGF with ``cumulants(t) -> (K, K', K'')`` (as ``tightdp.pld``'s)."""

    def cumulants(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def saddle_point_eps(mgf: HasCumulants, log_delta: float) -> tuple[float, float]:
    """Saddle-point estimate ``(eps, t)`` of the composed curve at ``delta``, by SP-MSD0
    (eqs. (50), (60); :func:`saddle_log_delta`) on the CGF of ``mgf``: the tilt ``t`` whose
    saddle-point eps has ``log delta_MSD0 = log delta``, bracketed on a geometric grid and
    narrowed by 6 bisections in ``log t`` (keeping the end where ``delta_MSD0 <= delta``).
    Only used to choose a grid step or a tilt; (nan, nan) if it has no answer."""
    def log_delta_at(t):
        t = np.atleast_1d(t)
        k, k1, k2 = mgf.cumulants(t)
        ks = np.vstack([k, k1, k2, np.zeros_like(k), np.zeros_like(k)])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            val, eps, _, _ = saddle_log_delta(ks, t, None, "msd0")
        return val, eps

    ts = np.geomspace(1e-3, 1e4, 25)
    fs, _ = log_delta_at(ts)
    below = np.nonzero(np.isfinite(fs) & (fs <= log_delta))[0]
    if not below.size:
        return math.nan, math.nan
    i = int(below[0])
    t = float(ts[0])
    if i > 0:  # bisection in log t between the bracketing grid points
        b = bisect(lambda m: not log_delta_at(math.exp(m))[0][0] <= log_delta,
                   math.log(ts[i - 1]), math.log(ts[i]), keep="hi", xtol=0.0, iters=6)
        t = math.exp(b)
    return float(log_delta_at(t)[1][0]), t
