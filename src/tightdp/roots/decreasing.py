"""Roots of decreasing functions on a promised side: a point near the root of
``fn(x) = level`` where ``fn(x) <= level`` (an upper side) or ``fn(x) > level`` (a lower
side), verified by evaluation -- secant or Newton steps to the root, then steps away from it
growing from an ulp until the side is right (:func:`tightdp.roots.walk_out`).

* :func:`root_decreasing` -- one scalar function;
* :func:`roots_decreasing` -- several at once with their slopes (e.g. the two ends of the
  saddle-point accountant's Berry-Esseen bracket).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._floats import maximum1
from .bracket import BracketError, walk_out
from .newton import secant_walk

__all__ = ["root_decreasing", "roots_decreasing"]


def root_decreasing(fn: Callable[[float], float], level: float, x0: float, slope0: float,
                    upper: bool) -> float | None:
    """A point x near the root of the decreasing function ``fn(x) = level`` on the safe side:
    ``fn(x) <= level`` if ``upper`` else ``fn(x) > level`` (verified), by secant steps from
    ``x0`` (initial slope ``-slope0``; :func:`secant_walk`), then steps
    away from the root growing from 1e-12 relative until the side is right
    (:func:`walk_out`); None if no such point was found."""
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
    evaluation, :func:`walk_out`; a point reached without evaluation
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


def _roots_decreasing_floats(fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                             level: float, x0: list, slope0: list, upper: list, iters: int,
                             rtol: float) -> list:
    """:func:`roots_decreasing`'s steps for a few points in Python floats: the same
    operations elementwise as :func:`_roots_decreasing_arrays`, hence the same points. ``fn``
    as there (called on an array, its values read as floats); ``x0``, ``slope0``, ``upper``
    lists; returns a list (NaN where there is no root on the safe side)."""
    n = len(x0)
    x = [float(v) for v in x0]
    slope = [-maximum1(float(v), 1e-3) for v in slope0]
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
    step = [1e-15 * maximum1(1.0, abs(xv)) * (1.0 if u else -1.0)
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
