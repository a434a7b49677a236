"""Newton iterations, safeguarded: every evaluation narrows a bracket, and a step that
leaves it (or is taken on a slope of the wrong sign) is replaced by bisection.

* :func:`newton_bracketed` -- elementwise over arrays of open brackets, Newton or secant
  slopes, stopping on the residual, the step or the width (optionally on a predicted
  residual);
* :func:`newton_scalar` -- one root, the bracket possibly open to the right, relative
  stopping; the caller's ``f`` may record what it sees;
* :func:`newton_monotone` -- a convex increasing function from the right of the root: no
  bracket, no overshoot;
* :func:`newton_polish` -- from a table cell (closed brackets), relative stopping;
* :func:`secant_walk` -- secant steps on a monotone function, unbracketed (settle the result
  with :func:`tightdp.roots.walk_out`);
* :func:`hermite_start` -- the start of a Newton iteration inside a bracket with slopes at
  both ends: the root of the cubic Hermite interpolant.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._floats import FLOATS
from .bracket import secant_start

__all__ = ["newton_bracketed", "newton_scalar", "newton_monotone", "newton_polish",
           "secant_walk", "hermite_start"]


def newton_bracketed(f: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                     target, lo: np.ndarray, hi: np.ndarray, x0: np.ndarray, *,
                     ftol, iters: int = 60, xtol: float = 1e-9, width_tol: float = 1e-14,
                     secant: bool = False, predict: bool | np.ndarray = False) -> np.ndarray:
    """Safeguarded Newton iteration for ``g(x) = target`` with ``g`` increasing, elementwise
    over arrays of brackets ``lo < root <= hi``.

    ``f(x, idx) -> (g, dg/dx)`` at the points ``x`` of the still active elements ``idx``
    (indices into the arrays). Each evaluation narrows the bracket (``g < target`` moves
    ``lo``, otherwise ``hi``); a Newton step (with a non-positive or non-finite slope, or
    leaving the open bracket) is replaced by bisection. With ``secant=True`` the slope from
    the previous iterate is used where it is positive (superlinear, no derivative needed
    beyond the first step). An element stops when ``|g - target| <= ftol``, its bracket is
    narrower than ``width_tol`` or the Newton step is below ``xtol``; the last accepted
    Newton step is applied. With ``predict=True`` an element also stops (its Newton step
    applied, not evaluated) when the residual its step leaves, predicted from the last two
    residuals at their rate ``|r_n| |r_n / r_{n-1}|`` (an overestimate for a superlinear
    iteration: its rate shrinks from step to step), is at most ``ftol / 2`` and that rate is
    below 1/8: the evaluation that would only confirm the tolerance is saved (for iterations
    on exact slopes: a secant iteration's first rate is that of the step before it, not its
    own). ``predict`` may also be a boolean array: the elements this stop applies to.
    Returns the iterates (a new array).

    A few elements (at most 8) without ``secant`` are iterated in Python floats
    (:func:`_newton_floats`: the same IEEE operations and comparisons, hence the same
    iterates, without the overhead of some 25 operations on tiny arrays per step)."""
    x = np.array(x0, dtype=float)
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    n = x.size
    target = np.broadcast_to(np.asarray(target, dtype=float), (n,))
    ftol = np.broadcast_to(np.asarray(ftol, dtype=float), (n,))
    act = np.arange(n)
    x_prev = np.full(n, np.nan)
    r_prev = np.full(n, np.nan)
    if predict is not False:
        pred = np.broadcast_to(np.asarray(predict, dtype=bool), (n,))
        predict = bool(pred.any())
    if n <= 8 and not secant:
        try:
            return _newton_floats(f, target, lo, hi, x, ftol, iters, xtol, width_tol,
                                  pred.tolist() if predict else None)
        except ArithmeticError:  # an overflow in floats: the arrays' form (f is pure)
            pass
    for _ in range(iters):
        if act.size == 0:
            break
        xa = x[act]
        g, dg = f(xa, act)
        r = g - target[act]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if predict:
                rate = np.abs(r / r_prev[act])
            if secant:
                sec = (r - r_prev[act]) / (xa - x_prev[act])
                dg = np.where(np.isfinite(sec) & (sec > 0), sec, dg)
                x_prev[act] = xa
            if secant or predict:
                r_prev[act] = r
            xn = np.where(dg > 0, xa - r / dg, np.nan)
        up = ~(r < 0)  # a NaN residual counts as above the target: the bracket still shrinks
        lo[act] = np.where(up, lo[act], xa)
        hi[act] = np.where(up, xa, hi[act])
        inside = (xn > lo[act]) & (xn < hi[act]) & np.isfinite(xn)
        xn = np.where(inside, xn, 0.5 * (lo[act] + hi[act]))
        done = (np.abs(r) <= ftol[act]) | (hi[act] - lo[act] < width_tol) | \
            (inside & (np.abs(xn - xa) < xtol))
        if predict:  # NaN rates (no previous residual) compare False
            done |= pred[act] & inside & (rate < 0.125) & (np.abs(r) * rate <= 0.5 * ftol[act])
        x[act] = np.where(done & ~inside, xa, xn)
        act = act[~done]
    return x


def _newton_floats(f: Callable, target: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   x0: np.ndarray, ftol: np.ndarray, iters: int, xtol: float,
                   width_tol: float, pred: list | None) -> np.ndarray:
    """:func:`newton_bracketed` (without ``secant``) with its bookkeeping in Python floats,
    element by element: the same operations, comparisons (a NaN compares False) and order
    of the elements, hence the same iterates; ``f`` is called as there, with arrays."""
    x, lo_, hi_ = x0.tolist(), lo.tolist(), hi.tolist()
    tg, ft = target.tolist(), ftol.tolist()
    r_prev = [math.nan] * len(x)
    act = list(range(len(x)))
    for _ in range(iters):
        if not act:
            break
        xa = [x[i] for i in act]
        g, dg = f(np.array(xa), np.array(act, dtype=np.int64))
        g = np.asarray(g, dtype=float).tolist()
        dg = np.asarray(dg, dtype=float).tolist()
        keep = []
        for j, i in enumerate(act):
            xi, r, d = xa[j], g[j] - tg[i], dg[j]
            rate = math.nan
            if pred is not None:
                rp = r_prev[i]
                if rp == 0.0:  # numpy's r / 0: +-inf, or NaN for 0 / 0
                    rate = math.inf if (r != 0.0 and not math.isnan(r)) else math.nan
                else:
                    rate = abs(r / rp)
                r_prev[i] = r
            xn = xi - r / d if d > 0 else math.nan
            if not r < 0:  # a NaN residual counts as above the target
                hi_[i] = xi
            else:
                lo_[i] = xi
            inside = xn > lo_[i] and xn < hi_[i] and math.isfinite(xn)
            if not inside:
                xn = 0.5 * (lo_[i] + hi_[i])
            done = abs(r) <= ft[i] or hi_[i] - lo_[i] < width_tol or (
                inside and abs(xn - xi) < xtol)
            if pred is not None and pred[i] and inside and rate < 0.125 and \
                    abs(r) * rate <= 0.5 * ft[i]:
                done = True
            x[i] = xi if (done and not inside) else xn
            if not done:
                keep.append(i)
        act = keep
    return np.array(x)


def newton_scalar(f: Callable[[float], tuple[float, float]], x0: float, lo: float,
                  hi: float = math.inf, *, iters: int, rtol: float, floor: float = 0.0,
                  width_rtol: float | None = None, ftol: float | None = None,
                  x_max: float = math.inf, grow_from: float = 1e-3, keep: str = "step",
                  first: tuple[float, float] | None = None) -> tuple[float, int]:
    """Safeguarded Newton iteration for one root of ``g(x) = 0`` with ``g`` increasing, inside
    the open bracket ``(lo, hi)`` (``hi = inf`` allowed: the search then doubles to the right).

    ``f(x) -> (g, dg/dx)``; every evaluation narrows the bracket (``g < 0`` moves ``lo``,
    otherwise -- a NaN included -- ``hi``). A Newton step that is not finite or leaves the
    open bracket (which rejects every step taken with a non-positive slope) is replaced by the
    midpoint, or by ``2 max(lo, grow_from)`` while ``hi`` is infinite. ``first = (g, dg)``
    gives the values at ``x0`` (then not evaluated, and not tested against ``ftol``).

    The iteration stops at a point with ``|g| <= ftol`` (optional; the point is returned),
    when the step is at most ``rtol max(floor, |x|)``, when a finite bracket is at most
    ``width_rtol max(floor, |hi|)`` (optional) or the new point passes ``|x| > x_max``:
    ``keep="step"`` returns the new point then, ``keep="point"`` the last evaluated one; and
    at the ``iters``-th point (``x0`` counted), which is returned.

    No side is promised: callers that need one track the best value in ``f`` (a Chernoff
    bound is valid at every point) or settle the result with
    :func:`tightdp.roots.walk_out`. Returns
    ``(x, steps)``, ``steps`` the number of Newton (or fallback) steps taken."""
    if keep not in ("step", "point"):
        raise ValueError(f"keep must be 'step' or 'point', got {keep!r}")
    x = x0
    for it in range(iters):
        if it == 0 and first is not None:
            g, dg = first
        else:
            g, dg = f(x)
            if ftol is not None and abs(g) <= ftol:
                return x, it
        if it == iters - 1:
            break
        if g < 0:
            lo = x
        else:
            hi = x
        xn = x - g / dg if dg != 0 else math.nan
        if not lo < xn < hi:
            xn = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * max(lo, grow_from)
        if abs(xn - x) <= rtol * max(floor, abs(x)) or abs(xn) > x_max or (
                width_rtol is not None and math.isfinite(hi)
                and hi - lo <= width_rtol * max(floor, abs(hi))):
            return (xn if keep == "step" else x), it + 1
        x = xn
    return x, iters - 1


def newton_monotone(f: Callable[[np.ndarray, np.ndarray],
                                  tuple[np.ndarray, np.ndarray, np.ndarray]],
                    x0: np.ndarray, *, iters: int) -> np.ndarray:
    """Newton's method for ``g(x) = target`` with ``g`` convex and increasing, started to
    the right of the root, elementwise over arrays: the tangent lies below ``g``, so the
    iterates decrease monotonically to the root and need no bracket.

    ``f(x, idx) -> (g - target, dg/dx, tol)`` at the points ``x`` of the still active
    elements ``idx`` (``tol`` the rounding level of ``g`` there). A negative residual (the
    root passed by rounding) makes no step; a non-finite step leaves the point where it is.
    An element stops when its residual is at most ``tol`` or its iterate no longer moves; its
    last step is applied. Returns the iterates (a new array); the caller settles them on the
    side it needs (e.g. by :func:`tightdp.roots.walk_out`)."""
    x = np.array(x0, dtype=float)
    out = x.copy()
    idx = np.arange(x.size)
    for _ in range(iters):
        r, d, tol = f(x, idx)
        with np.errstate(divide="ignore", invalid="ignore"):
            xn = x - np.maximum(r, 0.0) / d
        xn = np.where(np.isfinite(xn), xn, x)
        out[idx] = xn
        done = (r <= tol) | (xn == x)
        if done.all():
            break
        idx, x = idx[~done], xn[~done]
    return out


def newton_polish(f: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                  target: np.ndarray, lo: np.ndarray, hi: np.ndarray, x0: np.ndarray, *,
                  iters: int, floor: float = 0.0, ftol: float = 2e-15, xtol: float = 1e-11,
                  width_tol: float = 1e-15) -> np.ndarray:
    """Newton polish of a tabulated start for ``g(x) = target`` with ``g`` non-decreasing,
    elementwise over arrays, inside closed brackets ``[lo, hi]`` (a table cell, e.g. from
    :func:`table_start`): ``g <= target`` moves ``lo``, otherwise ``hi``; a step leaving the
    bracket is replaced by bisection.

    ``f(x, idx) -> (g, dg/dx)`` at the points of the still active elements ``idx``. An
    element stops where its residual is at the rounding level of ``g``
    (``|g - target| <= ftol (1 + |target|)``; the iterate is kept), the Newton step is below
    ``xtol max(|x|, floor)`` or the bracket below ``width_tol max(|x|, floor)``. Returns the
    last iterates (a new array)."""
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    x = np.array(x0, dtype=float)
    out = x.copy()
    idx = np.arange(x.size)
    for _ in range(iters):
        g, d = f(x, idx)
        r = g - target[idx]
        below = r <= 0
        lo[idx] = np.where(below, x, lo[idx])
        hi[idx] = np.where(below, hi[idx], x)
        with np.errstate(divide="ignore", invalid="ignore"):
            xn = x - r / d
        ok = (xn >= lo[idx]) & (xn <= hi[idx]) & np.isfinite(xn)
        xn = np.where(ok, xn, 0.5 * (lo[idx] + hi[idx]))
        small = np.abs(r) <= ftol * (1.0 + np.abs(target[idx]))
        xn = np.where(small, x, xn)
        scale = np.maximum(np.abs(xn), floor)
        done = small | (ok & (np.abs(xn - x) <= xtol * scale)) \
            | (hi[idx] - lo[idx] <= width_tol * scale)
        out[idx] = xn
        if done.all():
            break
        idx, x = idx[~done], xn[~done]
    return out


def secant_walk(fn: Callable[[float], float], level: float, x0: float, slope0: float, *,
                decreasing: bool, iters: int = 40, rtol: float = 1e-12) -> float:
    """Secant iteration for ``fn(x) = level`` on a monotone ``fn`` from ``x0`` with the initial
    slope ``slope0`` (its sign is that of the monotonicity): a new secant slope is adopted
    only when it has the right sign. Stops when ``|fn(x) - level| < rtol (1 + |level|)``, at
    a non-finite value, or after ``iters`` steps. The result is *near* the root, on no side
    in particular: settle it with :func:`tightdp.roots.walk_out` (as
    :func:`tightdp.roots.root_decreasing` does)."""
    x, f = x0, fn(x0)
    slope = slope0
    for _ in range(iters):
        if not math.isfinite(f):
            break
        xn = x + (level - f) / slope
        fnew = fn(xn)
        if math.isfinite(fnew) and xn != x:
            s = (fnew - f) / (xn - x)
            if (s < 0) if decreasing else (s > 0):
                slope = s
        x, f = xn, fnew
        if abs(f - level) < rtol * (1.0 + abs(level)):
            break
    return x


def hermite_start(a: np.ndarray, b: np.ndarray, g_a: np.ndarray, g_b: np.ndarray,
                   d_a: np.ndarray, d_b: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Start of the Newton iteration in the bracket ``[a, b]`` (in log t): the root of the
    cubic Hermite interpolant of ``g`` (values and slopes at both ends), by 4 Newton steps
    on the cubic from the secant point, kept 5% of the width away from the ends; the secant
    point (:func:`secant_start`) where the cubic gives nothing finite. Any
    point inside the bracket is a valid start: this only saves evaluations of ``g``.

    A few brackets (an eps(delta) query's) are done one at a time in Python floats (the
    same steps, :func:`_hermite_root` with ``FLOATS``: the same IEEE operations in the same
    order, hence the same numbers, without the per-operation overhead of small arrays); the
    arrays' form where a value there is not finite or a division by zero occurs."""
    if a.size <= 8:
        try:
            xs = [_hermite_root(FLOATS, *v) for v in zip(
                a.tolist(), b.tolist(), g_a.tolist(), g_b.tolist(), d_a.tolist(),
                d_b.tolist(), target.tolist(), strict=True)]
        except ZeroDivisionError:
            xs = None
        if xs is not None and all(math.isfinite(x) for x in xs):
            return np.array(xs)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x0, x = _hermite_root(np, a, b, g_a, g_b, d_a, d_b, target, pair=True)
    return np.where(np.isfinite(x), x, x0)


def _hermite_root(xp, a, b, g_a, g_b, d_a, d_b, target, *, pair: bool = False):
    """:func:`hermite_start`'s steps in the arithmetic ``xp`` (numpy or ``FLOATS``): the
    secant point, then 4 Newton steps on the cubic clipped to ``[0.05, 0.95]`` of the
    width; with ``pair`` also the secant point. Floats may raise ZeroDivisionError."""
    x0 = secant_start(a, b, g_a, g_b, target, xp=xp)
    w = b - a
    s = (x0 - a) / w
    p, q = d_a * w, d_b * w  # slopes in the unit variable
    for _ in range(4):
        val, der = _hermite_cubic(s, g_a, p, g_b, q, target)
        s = xp.minimum(xp.maximum(s - val / der, 0.05), 0.95)  # np.clip, less overhead
    x = a + s * w
    return (x0, x) if pair else x


def _hermite_cubic(s, g_a, p, g_b, q, target):
    """The cubic Hermite interpolant of the bracket minus ``target``, and its derivative, at
    ``s`` in the unit variable (floats or arrays alike: the same operations in the same
    order for both arithmetics of :func:`_hermite_root`)."""
    s2, s3 = s * s, s * s * s
    val = (g_a * (2 * s3 - 3 * s2 + 1) + p * (s3 - 2 * s2 + s)
           + g_b * (-2 * s3 + 3 * s2) + q * (s3 - s2)) - target
    der = (g_a * (6 * s2 - 6 * s) + p * (3 * s2 - 4 * s + 1)
           + g_b * (-6 * s2 + 6 * s) + q * (3 * s2 - 2 * s))
    return val, der
