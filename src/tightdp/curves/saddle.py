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

The tilt solvers (:func:`solve_tilt`, :func:`root_decreasing`) are uses of the safeguarded
solvers of :mod:`tightdp._numerics`.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Callable
from typing import Protocol

import numpy as np
from scipy.special import erfcx, log_ndtr

from .._numerics import (
    BracketError,
    bisect,
    newton_bracketed,
    secant_start,
    secant_walk,
    walk_out,
)
from ..losses.cgf import node_bucket

__all__ = ["METHODS", "LABELS", "UNRELIABLE", "T_MIN", "T_MAX_QUAD", "T_MAX",
           "log_theta_max", "rma_eps", "log_clt_theta", "saddle_eps", "saddle_log_delta",
           "saddle_terms1", "saddle_log_delta_slope", "tilt_grids", "grid_parts",
           "solve_tilt", "root_decreasing", "roots_decreasing", "saddle_point_eps"]

#: the saddle-point approximations
METHODS = ("msd1", "msd0", "clt")
#: their labels, with the paper's equations
LABELS = {"msd0": "SP-MSD0 (eq. (7)/(60))", "msd1": "SP-MSD1 (eq. (61))",
          "clt": "SP-CLT (eq. (8)/(66), Prop. 6)"}
#: above this size of the SP-MSD1 correction terms the approximation is flagged unreliable
#: (calibrated on DP-SGD against certified PLD brackets: below it the SP-MSD1 error in eps was
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
        ms = m / s
        a1 = t * s - ms
        a2 = a1 + s
        if np.shape(a1) != np.shape(a2):
            a1, a2 = np.broadcast_arrays(a1, a2)
        l1, l2 = _log_half_erfcx(np.stack([a1, a2]))  # one evaluation for both
        lr = np.minimum(l2 - l1, 0.0)
        diff = l1 + np.log(-np.expm1(lr))
        val = -0.5 * ms ** 2 + diff
        if not slope:
            return val
        r = np.exp(lr)
        return val, (-t + (t + 1.0) * r) / (1.0 - r)


def log_clt_theta1(t: float, m: float, s: float) -> tuple[float, float]:
    """:func:`log_clt_theta` with ``slope=True`` for one ``(t, m, s)`` in Python floats (the
    same formulas; the logarithms and exponentials by the math module, whose last bit may
    differ from numpy's): Alghamdi et al., Proposition 6 / eq. (79). Raises
    ZeroDivisionError where ``s = 0`` or ``B/A = 1`` (the callers use the arrays' form)."""
    ms = m / s
    a1 = t * s - ms
    a2 = a1 + s
    l1, l2 = _log_half_erfcx1(a1), _log_half_erfcx1(a2)
    lr = min(l2 - l1, 0.0)
    val = -0.5 * ms * ms + (l1 + log0(-math.expm1(lr)))
    r = math.exp(lr)
    return val, (-t + (t + 1.0) * r) / (1.0 - r)


def _log_half_erfcx1(a: float) -> float:
    """:func:`_log_half_erfcx` of one float (scipy's ``erfcx``/``log_ndtr`` on a scalar)."""
    if a >= 0:
        return log0(float(erfcx(a / _SQRT2))) - _LOG2
    return 0.5 * a * a + float(log_ndtr(-a))  # a NaN lands here, as in the arrays' form


def log0(x: float) -> float:
    """``math.log`` with numpy's values at 0 (-inf) and below (NaN) instead of an error."""
    if x > 0.0 or x != x:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def exp0(x: float) -> float:
    """``math.exp`` with numpy's value on overflow (inf) instead of an error."""
    return math.exp(x) if x < 709.0 else (math.inf if x == x else x)


def logaddexp1(a: float, b: float) -> float:
    """``np.logaddexp`` of two floats (-inf, inf and NaN as numpy)."""
    if a < b:
        a, b = b, a
    if b == -math.inf or a == math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


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


def solve_tilt(f: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], target, lo: float,
               hi: float, cap: float, iters: int = 60, rtol: float = 1e-11, npts: int = 65,
               which: np.ndarray | None = None, secant: np.ndarray | None = None,
               refine: int = 0, memo: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``g(t) = target`` for the tilt ``t``, g (roughly) increasing in t: bracketed on
    the geometric grids of :func:`tilt_grids` (each evaluated lazily, one CGF node-set range
    at a time, by :func:`_scan_grid`), then
    safeguarded Newton in ``log t`` (:func:`tightdp._numerics.newton_bracketed`) from the
    secant point of the bracket, stopped when the residual is below
    ``rtol (1 + |target|)`` or the step is at the level of rounding.

    ``f(t) -> (g, dg/dlog t)``, vectorized over t. Returns ``(t, ok)``; ok is False where no
    root was bracketed below ``cap`` (t = cap there); where ``g`` is at or above the target
    already at :data:`T_MIN`, t = T_MIN and ok is True. Vectorized over ``target``.

    Several functions (e.g. two equations on one CGF, or those of several CGFs) are solved
    together with ``which``: target ``j`` solves function ``which[j]``, and ``f(t, need)``
    gets a boolean mask ``need`` of shape ``(functions, t.size)`` (the values wanted) and
    returns ``(g, dg)`` of that shape (entries not wanted may be anything, e.g. NaN); each
    bracketing and Newton step calls ``f`` once for all of them (the answers are those of
    separate solves). ``secant`` (one flag per target) marks targets whose ``dg`` is only
    approximate: from their second Newton step on, the secant slope through the previous
    step is used where it is positive (superlinear whatever the error of ``dg``).

    ``f`` may also return a third array, ``d^2 g / d(log t)^2`` (where it is exact): the
    Newton steps then use Halley's slope ``dg - r d2g / (2 dg)`` for the residual ``r``
    (Halley 1694; Traub, *Iterative Methods for the Solution of Equations*, 1964, Sec. 5.2),
    ``dg`` where that would more than quintuple the step: cubic convergence, and no
    overshoot on the steep convex equations of few compositions (a secant slope, where
    flagged, still takes precedence).

    ``refine > 0`` (for a few targets, at most 8: an eps(delta) query) changes four things:
    the first grid goes on above ``hi`` by doublings (:func:`tilt_grids`' ``doubling``) and
    the grid below it is scanned only for the targets reached at its first point; each
    bracketing cell is narrowed on a fixed sub-grid of its ``refine`` inner geometric points
    (the same points for the same cell, read-only as the grids are, so that a caller may keep
    ``f``'s values there as it keeps the grids'), so that the Newton iteration starts from the
    cubic Hermite point of a cell ``refine + 1`` times narrower (the first crossing on the
    grids is the one refined); and the Newton iteration runs in floats and stops at an
    evaluated point (:func:`_newton_few`). With ``refine``, ``memo`` (a dict the caller
    keeps for one ``f``, e.g. per accountant and method) holds the first grid's values row by
    row as far as they were scanned, with their running maxima: a later solve finds a
    target's first grid point at or above it by bisection on those (the same bracket as the
    scan), and scans on only where no point reaches it yet."""
    target = np.atleast_1d(np.asarray(target, dtype=float))
    n = target.size
    few = refine > 0 and n <= 8
    grids = tilt_grids(lo, hi, cap, npts, doubling=few)
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = (np.full(n, np.nan) for _ in range(6))
    out = (lo_t, hi_t, g_lo, g_hi, d_lo, d_hi)
    below = np.zeros(n, dtype=bool)
    rows = None if which is None else np.asarray(which, dtype=np.int64).reshape(n)
    # the first grid; the one below it for the targets it did not bracket; the grids above
    # the first only for the targets still unbracketed that do not lie below every grid
    if few and memo is not None:
        at0 = _scan_table(f, target, grids[0], out, rows, memo)
    else:
        at0 = _scan_grid(f, target, np.arange(n), grids[0], out, rows)
    # refining: the grid below only for the targets already reached at the first grid's
    # first point (the others lie above it: no grid above is left, the first goes to cap)
    todo = at0 if few else np.flatnonzero(np.isnan(lo_t))
    ups = [] if few else grids[1:]
    if todo.size and len(grids) > 1 and grids[1][-1] <= grids[0][0]:
        below[_scan_grid(f, target, todo, grids[1], out, rows)] = True
        ups = grids[2:]
    for grid in ups:
        todo = np.flatnonzero(np.isnan(lo_t) & ~below)
        if not todo.size:
            break
        _scan_grid(f, target, todo, grid, out, rows)
    found = ~np.isnan(lo_t)
    if few:
        _refine_cells(f, target, np.flatnonzero(found), refine, out, rows)
    # one target (the common query) uses the math module's log/exp, numpy's vectorized ones
    # otherwise: the two may differ in the last bit, and each path keeps the numbers it had
    log, exp = (_log1, _exp1) if target.size == 1 else (np.log, np.exp)
    u = np.where(below, math.log(T_MIN), math.log(cap))
    idx = np.flatnonzero(found)
    if few and idx.size:
        a, b = [math.log(x) for x in lo_t[idx].tolist()], [math.log(x) for x in hi_t[idx].tolist()]
        u0 = _hermite_start(np.array(a), np.array(b), g_lo[idx], g_hi[idx], d_lo[idx],
                            d_hi[idx], target[idx])
        u[idx] = _newton_few(f, target[idx].tolist(), a, b, u0.tolist(),
                             None if rows is None else rows[idx].tolist(),
                             [False] * idx.size if secant is None
                             else np.asarray(secant, dtype=bool)[idx].tolist(), iters, rtol)
        return np.array([math.exp(x) for x in u.tolist()]), found | below
    if idx.size:
        a, b = log(lo_t[idx]), log(hi_t[idx])
        u0 = _hermite_start(a, b, g_lo[idx], g_hi[idx], d_lo[idx], d_hi[idx], target[idx])

        sec = None if secant is None else np.asarray(secant, dtype=bool)[idx]
        prev_u, prev_g = np.full(idx.size, np.nan), np.full(idx.size, np.nan)

        def fu(uu: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if rows is None:
                out = f(exp(uu))
                g, dg = out[0], out[1]
                d2 = out[2] if len(out) > 2 else None
            else:
                r, c = rows[idx[act]], np.arange(uu.size)
                need = np.zeros((int(rows.max()) + 1, uu.size), dtype=bool)
                need[r, c] = True
                out = f(exp(uu), need)
                g, dg = np.asarray(out[0])[r, c], np.asarray(out[1])[r, c]
                d2 = np.asarray(out[2])[r, c] if len(out) > 2 else None
            if d2 is not None:  # Halley's step where the correction stays moderate
                with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                    dh = dg - (g - target[idx[act]]) * d2 / (2.0 * dg)
                    dg = np.where(np.isfinite(dh) & (dh > 0.2 * dg), dh, dg)
            if sec is not None:
                with np.errstate(invalid="ignore", divide="ignore"):
                    s_ = (g - prev_g[act]) / (uu - prev_u[act])
                use = sec[act] & np.isfinite(s_) & (s_ > 0)
                dg = np.where(use, s_, dg)
                prev_u[act], prev_g[act] = uu, g
            return g, dg

        # the evaluation that would only confirm the tolerance is skipped where the last two
        # residuals predict it, on exact slopes (not for secant targets)
        u[idx] = newton_bracketed(fu, target[idx], a, b, u0, iters=iters,
                                  ftol=rtol * (1.0 + np.abs(target[idx])),
                                  predict=True if sec is None else ~sec)
    return exp(u), found | below


def _newton_few(f: Callable, target: list, lo: list, hi: list, u0: list, rows: list | None,
                secant: list, iters: int, rtol: float, xtol: float = 1e-9,
                width_tol: float = 1e-14) -> list:
    """The Newton iteration of :func:`solve_tilt` in ``u = log t`` for a few targets (its
    ``refine`` path), in Python floats: the safeguarded steps of
    :func:`tightdp._numerics.newton_bracketed` (a step leaving the bracket or on a slope that is
    not positive is replaced by bisection; secant slopes from the second step on for the
    ``secant`` targets; Halley's slope where ``f`` returns second derivatives, as there), each
    ``f`` call at ``t = exp(u)`` by ``math.exp``. A target whose residual is within
    ``rtol (1 + |target|)`` stops *at the evaluated point* (so that a caller's values there,
    e.g. a memo of its CGF, are those of the returned tilt: :func:`solve_tilt` returns
    ``math.exp`` of it); one stopped by a step below ``xtol`` or a bracket narrower than
    ``width_tol`` takes its last step. No predicted stop (the evaluation it would save is the
    one the caller makes at the root anyway). Returns the ``u`` of each target."""
    n = len(target)
    x, lo, hi = list(u0), list(lo), list(hi)
    ftol = [rtol * (1.0 + abs(v)) for v in target]
    prev_u, prev_g = [math.nan] * n, [math.nan] * n
    nrows = 1 if rows is None else max(rows) + 1
    act = list(range(n))
    for _ in range(iters):
        if not act:
            break
        t = np.array([math.exp(x[i]) for i in act])
        if rows is None:
            out = f(t)
            rr = [0] * len(act)
        else:
            rr = [rows[i] for i in act]
            need = np.zeros((nrows, len(act)), dtype=bool)
            need[rr, np.arange(len(act))] = True
            out = f(t, need)
        g, dg = np.atleast_2d(out[0]).tolist(), np.atleast_2d(out[1]).tolist()
        d2 = np.atleast_2d(out[2]).tolist() if len(out) > 2 else None
        keep = []
        for c, i in enumerate(act):
            ui, gi, di = x[i], g[rr[c]][c], dg[rr[c]][c]
            r = gi - target[i]
            if d2 is not None:  # Halley's slope where the correction stays moderate
                try:
                    dh = di - r * d2[rr[c]][c] / (2.0 * di)
                except ZeroDivisionError:
                    dh = math.nan
                if math.isfinite(dh) and dh > 0.2 * di:
                    di = dh
            if secant[i] and ui != prev_u[i]:
                s_ = (gi - prev_g[i]) / (ui - prev_u[i])
                if math.isfinite(s_) and s_ > 0:
                    di = s_
            prev_u[i], prev_g[i] = ui, gi
            xn = ui - r / di if di > 0 else math.nan
            if not r < 0:  # a NaN residual counts as above the target
                hi[i] = ui
            else:
                lo[i] = ui
            inside = lo[i] < xn < hi[i] and math.isfinite(xn)
            if not inside:
                xn = 0.5 * (lo[i] + hi[i])
            if abs(r) <= ftol[i]:
                continue  # x[i] = ui: the evaluated point
            if hi[i] - lo[i] < width_tol or (inside and abs(xn - ui) < xtol):
                x[i] = xn if inside else ui
                continue
            x[i] = xn
            keep.append(i)
        act = keep
    return x


@functools.lru_cache(maxsize=256)
def _sub_grid(a: float, b: float, m: int) -> np.ndarray:
    """The ``m`` geometric points strictly inside the cell ``[a, b]`` (``geomspace(a, b,
    m + 2)`` without its ends), read-only: the sub-grid of :func:`solve_tilt`'s ``refine``."""
    g = np.geomspace(a, b, m + 2)[1:-1].copy()
    g.setflags(write=False)
    return g


def _rows_at(f: Callable, pts: np.ndarray, rows: list | None, nrows: int
             ) -> tuple[list, list, list]:
    """``f`` on the grid piece ``pts`` for the rows ``rows`` (``need`` of :func:`solve_tilt`;
    None: ``f`` of one function), as lists: the tilts, ``g`` by row with a non-finite value as
    ``-inf`` (below every target, as in the scans) and ``dg`` by row."""
    if rows is None:
        g, dg = f(pts)[:2]
    else:
        need = np.zeros((nrows, pts.size), dtype=bool)
        need[rows] = True
        g, dg = f(pts, need)[:2]
    g = np.atleast_2d(np.asarray(g, dtype=float))
    dg = np.atleast_2d(np.asarray(dg, dtype=float))
    if dg.shape != g.shape:
        dg = np.broadcast_to(dg, g.shape)
    gl = [[v if math.isfinite(v) else -math.inf for v in row] for row in g.tolist()]
    return pts.tolist(), gl, dg.tolist()


def _refine_cells(f: Callable, target: np.ndarray, idx: np.ndarray, m: int,
                  out: tuple[np.ndarray, ...], rows: np.ndarray | None) -> None:
    """Narrow the brackets ``out`` of the targets ``idx`` (a few) to a cell of the sub-grid
    (:func:`_sub_grid`, ``m`` points) of their bracketing cell: one call of ``f`` per distinct
    cell, on its inner points (their node-set ranges are those of the cell's ends, already
    built), and the first sub-cell whose right end reaches the target (a non-finite ``g``
    counts as ``-inf``, as in the scan)."""
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    rl = None if rows is None else rows.tolist()
    cells: dict = {}
    for j in idx.tolist():
        cells.setdefault((float(lo_t[j]), float(hi_t[j])), []).append(j)
    tg = target.tolist()
    for (a, b), js in cells.items():
        tl, gl, dl = _rows_at(f, _sub_grid(a, b, m),
                              None if rl is None else [rl[j] for j in js],
                              1 if rl is None else max(rl) + 1)
        for j in js:
            r = 0 if rl is None else rl[j]
            gr = gl[r]
            k = next((i for i, v in enumerate(gr) if v >= tg[j]), len(gr))
            if k > 0:  # else the cell's left end stays
                lo_t[j], g_lo[j], d_lo[j] = tl[k - 1], gr[k - 1], dl[r][k - 1]
            if k < len(gr):  # else the cell's right end stays
                hi_t[j], g_hi[j], d_hi[j] = tl[k], gr[k], dl[r][k]


def _scan_grid(f: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], target: np.ndarray,
               idx: np.ndarray, grid: np.ndarray, out: tuple[np.ndarray, ...],
               rows: np.ndarray | None = None) -> np.ndarray:
    """Bracket ``g(t) = target[idx]`` on one increasing tilt grid: a target's bracket is the
    first cell ``[grid[j-1], grid[j]]`` with ``g(grid[j]) >= target`` (non-finite ``g`` counts
    as below every target), written into ``out = (lo, hi, g_lo, g_hi)`` at its index. The
    same brackets as :func:`tightdp._numerics.bracket_on_grids` on this grid, found lazily:
    the grid is evaluated one CGF node-set range (:func:`tightdp.losses.cgf.node_bucket`) at
    a time, in increasing order, and only while some target is unbracketed, so that the
    node sets of tilts above every root are never built (each range's points are evaluated
    together, as in one call on the whole grid). Returns the indices whose ``g`` is at or above
    the target already at ``grid[0]`` (no bracket on this grid). With ``rows`` (see
    :func:`solve_tilt`'s ``which``) target ``j`` reads row ``rows[j]`` of ``g``."""
    if len(idx) <= 8:
        return _scan_table(f, target, grid, out, rows, {}, idx)
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    pending = np.asarray(idx)
    at_start = pending[:0]
    prev_t = prev_g = prev_d = None
    for pts in grid_parts(grid):
        if not pending.size:
            break
        if rows is None:
            g, dg = f(pts)[:2]
        else:
            need = np.zeros((int(rows.max()) + 1, pts.size), dtype=bool)
            need[rows[pending]] = True
            g, dg = f(pts, need)[:2]
        g = np.atleast_2d(np.asarray(g, dtype=float))
        dg = np.atleast_2d(np.asarray(dg, dtype=float))
        if dg.shape != g.shape:
            dg = np.broadcast_to(dg, g.shape)
        g = np.where(np.isfinite(g), g, -np.inf)
        if prev_t is not None:
            pts_c, g_c = np.concatenate([[prev_t], pts]), np.concatenate([prev_g, g], axis=1)
            d_c = np.concatenate([prev_d, dg], axis=1)
        else:
            pts_c, g_c, d_c = pts, g, dg
        ri = np.zeros(pending.size, dtype=np.int64) if rows is None else rows[pending]
        g_p, d_p = g_c[ri], d_c[ri]
        ge = g_p >= target[pending, None]
        has = ge.any(axis=1)
        j = np.argmax(ge, axis=1)
        if prev_t is None:
            at_start = pending[has & (j == 0)]
        found = has & (j > 0)
        sel, jf = pending[found], j[found]
        lo_t[sel], hi_t[sel] = pts_c[jf - 1], pts_c[jf]
        g_sel, d_sel = g_p[found], d_p[found]
        k = np.arange(sel.size)
        g_lo[sel], g_hi[sel] = g_sel[k, jf - 1], g_sel[k, jf]
        d_lo[sel], d_hi[sel] = d_sel[k, jf - 1], d_sel[k, jf]
        pending = pending[~has]
        prev_t, prev_g, prev_d = pts[-1], g[:, -1:], dg[:, -1:]
    return at_start


def _scan_table(f: Callable, target: np.ndarray, grid: np.ndarray,
                out: tuple[np.ndarray, ...], rows: np.ndarray | None, memo: dict,
                idx: np.ndarray | None = None) -> np.ndarray:
    """:func:`_scan_grid` of a few targets (``idx``, default all) on the grid pieces of
    ``grid``, its bookkeeping in Python floats, with the values kept in ``memo`` per row
    (tilts, ``g`` with non-finite values as ``-inf``, slopes, running maximum of ``g``, pieces
    scanned): a target's bracket is the cell before the first point whose running maximum
    reaches it (the first point at or above it: the scan's bracket), found by bisection;
    pieces are evaluated, in order and for the rows still unbracketed only, where a row's
    table has no such point yet. With an empty ``memo`` these are the scan's calls of ``f``.
    Returns the targets reached at the grid's first point."""
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    parts = grid_parts(grid)
    tabs = memo.setdefault(grid.tobytes(), {})
    rl = [0] * target.size if rows is None else rows.tolist()
    nrows = max(rl) + 1
    tg = target.tolist()
    at_start: list[int] = []
    pending = list(range(target.size)) if idx is None else [int(j) for j in np.asarray(idx)]
    while pending:
        still = []
        for j in pending:
            tab = tabs.setdefault(rl[j], ([], [], [], [], [0]))
            tt, gg, dd, cm, _ = tab
            k = bisect_left(cm, tg[j]) if cm else 0
            if k == len(cm):
                still.append(j)
            elif k == 0:
                at_start.append(j)
            else:
                lo_t[j], hi_t[j] = tt[k - 1], tt[k]
                g_lo[j], g_hi[j] = gg[k - 1], gg[k]
                d_lo[j], d_hi[j] = dd[k - 1], dd[k]
        # scan on: the next piece of each row still unbracketed (rows at the same piece
        # together, in one call of f)
        todo = [j for j in still if tabs[rl[j]][4][0] < len(parts)]
        if not todo:
            break
        nxt = min(tabs[rl[j]][4][0] for j in todo)
        rws = sorted({rl[j] for j in todo if tabs[rl[j]][4][0] == nxt})
        tl, gl, dl = _rows_at(f, parts[nxt], None if rows is None else rws, nrows)
        for r in rws:
            tt, gg, dd, cm, cnt = tabs[r]
            top = cm[-1] if cm else -math.inf
            for x, v, dv in zip(tl, gl[r], dl[r], strict=True):
                top = v if v > top else top
                tt.append(x)
                gg.append(v)
                dd.append(dv)
                cm.append(top)
            cnt[0] += 1
        pending = still
    return np.array(at_start, dtype=np.int64)


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


def _hermite_start(a: np.ndarray, b: np.ndarray, g_a: np.ndarray, g_b: np.ndarray,
                   d_a: np.ndarray, d_b: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Start of the Newton iteration in the bracket ``[a, b]`` (in log t): the root of the
    cubic Hermite interpolant of ``g`` (values and slopes at both ends), by 4 Newton steps
    on the cubic from the secant point, kept 5% of the width away from the ends; the secant
    point (:func:`tightdp._numerics.secant_start`) where the cubic gives nothing finite. Any
    point inside the bracket is a valid start: this only saves evaluations of ``g``.

    A few brackets (an eps(delta) query's) are done one at a time in Python floats
    (:func:`_hermite_start1`: the same IEEE operations in the same order, hence the same
    numbers, without the per-operation overhead of small arrays); the arrays' form where a
    value there is not finite or a division by zero occurs."""
    if a.size <= 8:
        try:
            xs = [_hermite_start1(*v) for v in zip(a.tolist(), b.tolist(), g_a.tolist(),
                                                   g_b.tolist(), d_a.tolist(), d_b.tolist(),
                                                   target.tolist(), strict=True)]
        except ZeroDivisionError:
            xs = None
        if xs is not None and all(math.isfinite(x) for x in xs):
            return np.array(xs)
    x0 = secant_start(a, b, g_a, g_b, target)
    w = b - a
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = (x0 - a) / w
        p, q = d_a * w, d_b * w  # slopes in the unit variable
        for _ in range(4):
            val, der = _hermite_cubic(s, g_a, p, g_b, q, target)
            s = np.minimum(np.maximum(s - val / der, 0.05), 0.95)  # np.clip, less overhead
        x = a + s * w
    return np.where(np.isfinite(x), x, x0)


def _hermite_start1(a: float, b: float, g_a: float, g_b: float, d_a: float, d_b: float,
                    target: float) -> float:
    """:func:`_hermite_start` of one bracket in floats (the secant point of
    :func:`tightdp._numerics.secant_start`, then the same 4 steps on the cubic); may return
    a non-finite value or raise ZeroDivisionError, where the caller uses the arrays' form."""
    frac = (target - g_a) / (g_b - g_a)
    frac = min(max(0.5 if math.isnan(frac) else frac, 0.05), 0.95)
    x0 = a + frac * (b - a)
    w = b - a
    s = (x0 - a) / w
    p, q = d_a * w, d_b * w
    for _ in range(4):
        val, der = _hermite_cubic(s, g_a, p, g_b, q, target)
        s = min(max(s - val / der, 0.05), 0.95)
    return a + s * w


def _hermite_cubic(s, g_a, p, g_b, q, target):
    """The cubic Hermite interpolant of the bracket minus ``target``, and its derivative, at
    ``s`` in the unit variable (floats or arrays alike: the same operations in the same
    order for :func:`_hermite_start` and :func:`_hermite_start1`)."""
    s2, s3 = s * s, s * s * s
    val = (g_a * (2 * s3 - 3 * s2 + 1) + p * (s3 - 2 * s2 + s)
           + g_b * (-2 * s3 + 3 * s2) + q * (s3 - s2)) - target
    der = (g_a * (6 * s2 - 6 * s) + p * (3 * s2 - 4 * s + 1)
           + g_b * (-6 * s2 + 6 * s) + q * (3 * s2 - 2 * s))
    return val, der


def _log1(x: np.ndarray) -> np.ndarray:
    return np.array([math.log(float(x[0]))])


def _exp1(x: np.ndarray) -> np.ndarray:
    return np.array([math.exp(float(x[0]))])


def root_decreasing(fn: Callable[[float], float], level: float, x0: float, slope0: float,
                    upper: bool) -> float | None:
    """A point x near the root of the decreasing function ``fn(x) = level`` on the safe side:
    ``fn(x) <= level`` if ``upper`` else ``fn(x) > level`` (verified), by secant steps from
    ``x0`` (initial slope ``-slope0``; :func:`tightdp._numerics.secant_walk`), then steps
    away from the root growing from 1e-12 relative until the side is right
    (:func:`tightdp._numerics.walk_out`); None if no such point was found."""
    x = secant_walk(fn, level, x0, -max(slope0, 1e-3), decreasing=True)

    def wrong_side(y: float) -> bool:
        fy = fn(y)
        return not (math.isfinite(fy) and ((fy <= level) if upper else (fy > level)))

    step = 1e-12 * max(1.0, abs(x))
    try:
        return walk_out(wrong_side, x, step if upper else -step, max_moves=59)[1]
    except BracketError:
        return None


def roots_decreasing(fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], level: float,
                     x0: np.ndarray, slope0, upper: np.ndarray, iters: int = 40,
                     rtol: float = 1e-14) -> np.ndarray:
    """:func:`root_decreasing` for several decreasing functions at once, with their slopes:
    ``fn(x) -> (values, slopes)`` evaluates function ``j`` at ``x[j]`` (one call for all).

    Newton steps from ``x0`` (a slope that is not negative and finite is replaced by the last
    good one, initially ``-slope0``, a number or one per point) until
    ``|fn - level| < rtol (1 + |level|)`` or a value is not finite (one step more, not
    evaluated, once every residual is below 1e-8 relative); then each point is moved away
    from its root by steps growing from 1e-15 relative until it is on its safe side,
    ``fn_j(x_j) <= level`` where ``upper[j]``, else ``fn_j(x_j) > level`` (checked by
    evaluation, :func:`tightdp._numerics.walk_out`; a point reached without evaluation
    takes the first step before its first check). Returns the points, NaN where no such
    point was found and for a lower side (``upper[j]`` False) whose value at ``x0`` or at a
    Newton point is not finite (uninformative there). Up to 8 points (an eps(delta)
    query's Berry-Esseen ends) take the same steps in Python floats
    (:func:`_roots_decreasing_floats`: the same points, without numpy's per-call costs on
    arrays of a few elements)."""
    upper = np.asarray(upper, dtype=bool)
    x = np.array(x0, dtype=float)
    slope = np.asarray(slope0, dtype=float)
    if slope.shape != x.shape:
        slope = np.broadcast_to(slope, x.shape)
    if x.ndim == 1 and x.size <= 8:
        return np.array(_roots_decreasing_floats(fn, level, x.tolist(), slope.tolist(),
                                                 upper.tolist(), iters, rtol))
    return _roots_decreasing_arrays(fn, level, x, slope, upper, iters, rtol)


def _roots_decreasing_arrays(fn: Callable, level: float, x: np.ndarray, slope: np.ndarray,
                             upper: np.ndarray, iters: int, rtol: float) -> np.ndarray:
    """:func:`roots_decreasing`'s steps on arrays (``x``, ``slope`` and ``upper`` of one
    shape)."""
    slope = -np.maximum(slope, 1e-3)
    f, d = fn(x)
    none = ~upper & ~np.isfinite(f)
    act = np.ones(x.size, dtype=bool)
    tol = rtol * (1.0 + abs(level))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(iters):
            slope = np.where(np.isfinite(d) & (d < 0), d, slope)
            act &= np.isfinite(f) & ~(np.abs(f - level) < tol)
            if not act.any():
                break
            x = np.where(act, x + (level - f) / slope, x)
            if np.all(np.abs(f - level)[act] < 1e-8 * (1.0 + abs(level))):
                # Newton's error squares: the last step needs no evaluation (the walk
                # below evaluates there)
                f = np.where(act, np.nan, f)
                break
            f, d = fn(x)
            # a lower side reaching a non-finite value (an uninformative bound) has no answer:
            # the walk below would only move it further into that region
            none |= act & ~upper & ~np.isfinite(f)
    last: dict = {"x": x, "f": f}

    def wrong_side(y: np.ndarray) -> np.ndarray:
        known = y is last["x"] and not np.isnan(last["f"]).any()
        fy = last["f"] if known else fn(y)[0]  # the last Newton point: known if evaluated
        with np.errstate(invalid="ignore"):
            last["bad"] = ~(np.isfinite(fy) & np.where(upper, fy <= level, fy > level))
        return last["bad"] & ~none  # the uninformative ones are not moved

    step = 1e-15 * np.maximum(1.0, np.abs(x)) * np.where(upper, 1.0, -1.0)
    unknown = np.isnan(f)
    if unknown.any():
        # a point the last Newton step reached without evaluation lies on either side of
        # its root about equally often: it takes the walk's first move (to the safe side)
        # before its first check, which then mostly passes (one evaluation fewer); the
        # walk's later moves are the same (steps 2, 4, ... times the first)
        x = np.where(unknown, x + step, x)
        last["x"] = x
        step = np.where(unknown, 2.0 * step, step)
    _, x = walk_out(wrong_side, x, step, max_moves=59, on_limit="return")
    return np.where(last["bad"] | none, np.nan, x)


def _nan_max(a: float, b: float) -> float:
    """``np.maximum`` of two floats (NaN if either is NaN; Python's ``max`` keeps the first
    argument when a comparison with NaN fails)."""
    if a != a or b != b:
        return math.nan
    return a if a >= b else b


def _roots_decreasing_floats(fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                             level: float, x0: list, slope0: list, upper: list, iters: int,
                             rtol: float) -> list:
    """:func:`roots_decreasing`'s steps for a few points in Python floats: the same
    operations elementwise as :func:`_roots_decreasing_arrays`, hence the same points. ``fn``
    as there (called on an array, its values read as floats); ``x0``, ``slope0``, ``upper``
    lists; returns a list (NaN where there is no root on the safe side)."""
    n = len(x0)
    x = [float(v) for v in x0]
    slope = [-_nan_max(float(v), 1e-3) for v in slope0]
    f, d = (a.tolist() for a in fn(np.array(x)))
    isf = math.isfinite
    none = [not u and not isf(fv) for u, fv in zip(upper, f, strict=True)]
    act = [True] * n
    tol = rtol * (1.0 + abs(level))
    near = 1e-8 * (1.0 + abs(level))
    for _ in range(iters):
        slope = [dv if isf(dv) and dv < 0 else sv for dv, sv in zip(d, slope, strict=True)]
        act = [a and isf(fv) and not abs(fv - level) < tol for a, fv in zip(act, f, strict=True)]
        if not any(act):
            break
        x = [xv + (level - fv) / sv if a else xv
             for a, xv, fv, sv in zip(act, x, f, slope, strict=True)]
        if all(abs(fv - level) < near for a, fv in zip(act, f, strict=True) if a):
            # Newton's error squares: the last step needs no evaluation (the walk evaluates)
            f = [math.nan if a else fv for a, fv in zip(act, f, strict=True)]
            break
        f, d = (a.tolist() for a in fn(np.array(x)))
        none = [nn or (a and not u and not isf(fv))
                for nn, a, u, fv in zip(none, act, upper, f, strict=True)]
    # the walk to the safe side (walk_out's moves: the points where the side is wrong move by
    # the step, which doubles after every round, at most 59 rounds)
    step = [1e-15 * _nan_max(1.0, abs(xv)) * (1.0 if u else -1.0)
            for xv, u in zip(x, upper, strict=True)]
    unknown = [fv != fv for fv in f]
    known = not any(unknown)
    if not known:
        x = [xv + sv if un else xv for xv, sv, un in zip(x, step, unknown, strict=True)]
        step = [2.0 * sv if un else sv for sv, un in zip(step, unknown, strict=True)]
    bad = [False] * n
    for moves in range(60):
        fy = f if known and moves == 0 else fn(np.array(x))[0].tolist()
        bad = [not (isf(v) and (v <= level if u else v > level))
               for v, u in zip(fy, upper, strict=True)]
        move = [b and not nn for b, nn in zip(bad, none, strict=True)]
        if not any(move) or moves == 59:
            break
        x = [xv + sv if m else xv for xv, sv, m in zip(x, step, move, strict=True)]
        step = [2.0 * sv for sv in step]
    return [math.nan if b or nn else xv for b, nn, xv in zip(bad, none, x, strict=True)]


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
