"""Bracketing and bisection: the bracket ends keep their defining property at every step
(``go_right`` holds at the left end and fails at the right end), and the caller returns the
end whose side is safe for the bound it reports.

* :func:`walk_out` -- additive steps doubling from a start, vectorized, with clamps; also
  settles a root on the safe side by steps growing from an ulp; :func:`expand_bracket` its
  scalar bracket form;
* :func:`grow_until` -- geometric expansion (or shrinking towards 0);
* :func:`bisect` -- bisection of a monotone predicate, scalar or vectorized, returning the
  end on the side the caller needs;
* :func:`table_start`, :func:`secant_start` -- starts inside a bracket (a table cell's linear
  interpolate; the regula falsi point).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BracketError", "walk_out", "expand_bracket", "grow_until", "bisect",
           "table_start", "secant_start"]


class BracketError(ValueError):
    """No bracket was found before the search left its allowed range; ``last`` holds the
    last point tried."""

    def __init__(self, message: str, last: float):
        super().__init__(message)
        self.last = last


def walk_out(bad: Callable, x, step, *, prev=None, limit: float = math.inf,
             max_moves: int | None = None, on_limit: str = "raise", lower=None, upper=None,
             what: str = "the root"):
    """Move ``x`` by ``step`` while ``bad(x)`` holds, doubling ``step`` after every move
    (elementwise for arrays: only the elements where ``bad`` holds move, the step doubles for
    all; ``step`` may be an array): the additive bracket expansion, or the settling of a
    root on the safe side by steps growing from an ulp. ``step < 0`` walks to the left; the
    moves never pass ``lower``/``upper`` (optional clamps). Returns ``(prev, x)``: ``x``
    the first point where ``bad`` fails, ``prev`` the point before it (the given ``prev``,
    default ``x``, where ``x`` did not move).

    Raises :class:`BracketError` (``last`` = the last point tried) once a point with
    ``|x| > limit`` is reached, or when ``bad`` still holds after ``max_moves`` moves -- unless
    ``on_limit="return"``, which returns the points reached then (the caller checks them)."""
    if on_limit not in ("raise", "return"):
        raise ValueError(f"on_limit must be 'raise' or 'return', got {on_limit!r}")
    scalar = np.ndim(x) == 0 and np.ndim(step) == 0
    if prev is None:
        prev = x
    moves = 0
    while True:
        b = bad(x)
        if not np.any(b):
            return prev, x
        if max_moves is not None and moves >= max_moves:
            if on_limit == "return":
                return prev, x
            raise BracketError(f"no bracket for {what} in {max_moves} steps",
                               x if scalar else float(np.max(np.abs(x))))
        moves += 1
        xn = x + step
        if lower is not None:
            xn = max(xn, lower) if scalar else np.maximum(xn, lower)
        if upper is not None:
            xn = min(xn, upper) if scalar else np.minimum(xn, upper)
        if scalar:
            prev, x = x, xn
        else:
            prev, x = np.where(b, x, prev), np.where(b, xn, x)
        step = step * 2.0
        if np.any(np.abs(x) > limit):
            raise BracketError(f"no bracket for {what} within |x| <= {limit:g}",
                               x if scalar else float(np.max(np.abs(x))))


def expand_bracket(go_right: Callable[[float], bool], start: float, step: float, *,
                   limit: float = math.inf, max_moves: int | None = None,
                   what: str = "the root") -> tuple[float, float]:
    """Bracket a root by steps that double each time: from ``a = start`` try
    ``b = a + step``, and while ``go_right(b)`` move ``a`` to ``b`` and double ``step``
    (``step < 0`` walks to the left; :func:`walk_out` from ``start + step``). Returns
    ``(a, b)``: ``b`` the first point where ``go_right`` fails, ``a`` the point before it
    (``start`` if the first step failed).

    Raises :class:`BracketError` (``last`` = the last point tried) once ``|b| > limit`` or
    when ``go_right`` still holds after ``max_moves`` moves of ``b``."""
    return walk_out(go_right, start + step, 2.0 * step, prev=start, limit=limit,
                    max_moves=max_moves, what=what)


def grow_until(bad: Callable[[Any], Any], x, factor: float = 2.0, *,
               limit: float | None = None, cap: float | None = None, max_iter: int = 2000,
               what: str = "the root"):
    """Multiply ``x`` by ``factor`` (elementwise, only where ``bad(x)`` holds) until ``bad``
    holds nowhere: the geometric bracket expansion (``factor > 1`` grows, ``factor < 1``
    shrinks towards 0), never beyond ``cap`` (``bad`` must fail there). Returns the new ``x``
    (a float for a scalar ``x``).

    Raises :class:`BracketError` if ``x`` passes ``limit`` (above it for ``factor > 1``,
    below it for ``factor < 1``) or ``bad`` still holds after ``max_iter`` steps."""
    scalar = np.ndim(x) == 0
    x = float(x) if scalar else np.array(x, dtype=float)
    for _ in range(max_iter):
        b = bad(x)
        if not np.any(b):
            return x
        x = x * factor if scalar else np.where(b, x * factor, x)
        if cap is not None:
            x = (min(x, cap) if factor > 1 else max(x, cap)) if scalar else \
                (np.minimum(x, cap) if factor > 1 else np.maximum(x, cap))
        if limit is not None and np.any((x > limit) if factor > 1 else (x < limit)):
            raise BracketError(f"no bracket for {what}: the search passed {limit:g}",
                               float(np.max(x) if factor > 1 else np.min(x)))
    raise BracketError(f"no bracket for {what} after {max_iter} steps",
                       float(np.max(x) if factor > 1 else np.min(x)))


def bisect(go_right: Callable[[Any], Any], lo, hi, *, keep: str,
           xtol: float, floor: float = 1.0, iters: int = 80):
    """Bisection of a monotone predicate, elementwise over arrays: ``go_right(m)`` True means
    the root lies above ``m`` (``lo = m``), else below (``hi = m``). The invariant of the
    two ends (``go_right`` holds at ``lo``, fails at ``hi``) is kept at every step, so the
    end the caller ``keep``s (``"lo"`` or ``"hi"``) is on the safe side of the root.

    Stops after ``iters`` halvings or when ``hi - lo <= xtol * max(floor, |kept end|)``
    everywhere. Returns the kept end (a float for scalar inputs)."""
    if keep not in ("lo", "hi"):
        raise ValueError(f"keep must be 'lo' or 'hi', got {keep!r}")
    scalar = np.ndim(lo) == 0 and np.ndim(hi) == 0
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        right = np.asarray(go_right(float(mid) if scalar else mid), dtype=bool)
        lo = np.where(right, mid, lo)
        hi = np.where(right, hi, mid)
        end = hi if keep == "hi" else lo
        if np.all(hi - lo <= xtol * np.maximum(floor, np.abs(end))):
            break
    end = hi if keep == "hi" else lo
    return float(end) if scalar else end


def table_start(tab_x: np.ndarray, tab_l: np.ndarray, y: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start of a monotone inversion ``L(x) = y`` from a table ``tab_l = L(tab_x)``
    (``tab_l`` made non-decreasing first): the bracketing table cell ``[a, b]`` of each ``y``
    and the linear interpolate inside it, for a Newton/bisection polish."""
    j = np.clip(np.searchsorted(tab_l, y, side="left"), 1, tab_x.size - 1)
    a, b = tab_x[j - 1], tab_x[j]
    dl = tab_l[j] - tab_l[j - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(dl > 0, (y - tab_l[j - 1]) / dl, 0.5)
    return a, b, a + np.clip(frac, 0.0, 1.0) * (b - a)


def secant_start(lo: np.ndarray, hi: np.ndarray, g_lo: np.ndarray, g_hi: np.ndarray,
                 target, clip: float = 0.05, *, xp=np) -> np.ndarray:
    """The secant (regula falsi) point of the brackets ``[lo, hi]`` for ``g = target``, kept
    at least ``clip`` of the width away from either end (the midpoint where the secant is
    undefined): the start of :func:`newton_bracketed`. ``xp``: the arithmetic, numpy or
    ``FLOATS`` (:mod:`tightdp.roots._floats`) for one bracket in Python floats (which raise
    ZeroDivisionError where numpy warns)."""
    if xp is not np:
        return _secant_point(xp, lo, hi, g_lo, g_hi, target, clip)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _secant_point(np, lo, hi, g_lo, g_hi, target, clip)


def _secant_point(xp, lo, hi, g_lo, g_hi, target, clip: float):
    frac = (target - g_lo) / (g_hi - g_lo)
    # np.clip of np.nan_to_num(frac, nan=0.5), with less overhead (infinities clip alike)
    frac = xp.minimum(xp.maximum(xp.where(xp.isnan(frac), 0.5, frac), clip), 1.0 - clip)
    return lo + frac * (hi - lo)
