"""Searches on expensive scalar predicates.

The calibration searches (:mod:`tightdp.dpsgd.calibrate`, :func:`tightdp.state.calibrate_scale`)
and the group conversion search (:mod:`tightdp.dpsgd.group`) evaluate one expensive, cached
predicate at a time (each evaluation an accountant run, so exact evaluation points and a
bracket that survives a time budget); these return both ends of what they established, so
that a caller can report the bracket, and a caller stopped by an exception can rebuild it
from its cache with :func:`bracket_of_points`.

* :func:`grow_bracket` (geometric), :func:`step_out` (additive, growing steps);
* :func:`bisect_until` (a caller's stopping test), :func:`bisect_log` (geometric midpoints),
  :func:`bisect_int`;
* :func:`descend_to_fixed_point`, :func:`bracket_of_points`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .bracket import BracketError

__all__ = ["grow_bracket", "step_out", "bisect_until", "bisect_log", "bisect_int",
           "descend_to_fixed_point", "bracket_of_points"]


def grow_bracket(go_on: Callable[[float], bool], start: float, factor: float, *,
                 limit: float | None = None, on_limit: str = "raise",
                 what: str = "the root") -> tuple[float | None, float]:
    """Geometric bracket expansion of a scalar predicate: evaluate ``go_on`` at ``start``,
    ``start * factor``, ``start * factor**2``, ... while it holds (``factor > 1`` grows,
    ``0 < factor < 1`` shrinks towards 0). Returns ``(prev, x)``: ``x`` the first point where
    ``go_on`` fails, ``prev`` the point before it (None when it fails at ``start``).

    A point reached by a move that lies strictly beyond ``limit`` (above it for
    ``factor > 1``, below it for ``factor < 1``; ``start`` is not checked) is never
    evaluated: :class:`BracketError` is raised (``last`` = that point), or with
    ``on_limit="return"`` ``(prev, x)`` is returned with ``x`` that unevaluated point (the
    caller recognises it by its position beyond ``limit``)."""
    if on_limit not in ("raise", "return"):
        raise ValueError(f"on_limit must be 'raise' or 'return', got {on_limit!r}")
    if not (factor > 0 and factor != 1 and math.isfinite(factor)):
        raise ValueError(f"factor must be positive, finite and not 1, got {factor!r}")
    prev, x = None, start
    while go_on(x):
        prev, x = x, x * factor
        if limit is not None and ((x > limit) if factor > 1 else (x < limit)):
            if on_limit == "return":
                return prev, x
            raise BracketError(f"no bracket for {what}: the search passed {limit:g}", x)
    return prev, x


def step_out(go_on: Callable[[float], bool], start: float, step: float, *,
             growth: float = 2.0, max_moves: int | None = None, on_limit: str = "raise",
             what: str = "the root") -> tuple[float, float]:
    """Additive bracket expansion with steps growing by ``growth``: from ``a = start`` try
    ``b = a + step``, and while ``go_on(b)`` move ``a`` to ``b`` and multiply ``step`` by
    ``growth`` (``step < 0`` walks to the left; ``growth=2`` is
    :func:`tightdp.roots.expand_bracket`).
    Returns ``(a, b)``: ``b`` the first point where ``go_on`` fails, ``a`` the point before
    it (``start`` if the first try failed).

    After ``max_moves`` moves with ``go_on`` still holding at ``b`` (``max_moves + 1``
    evaluations), :class:`BracketError` is raised (``last`` = ``b``), or with
    ``on_limit="return"`` ``(a, b)`` is returned as they are (the caller checks ``b``)."""
    if on_limit not in ("raise", "return"):
        raise ValueError(f"on_limit must be 'raise' or 'return', got {on_limit!r}")
    a, b = start, start + step
    moves = 0
    while go_on(b):
        if max_moves is not None and moves >= max_moves:
            if on_limit == "return":
                return a, b
            raise BracketError(f"no bracket for {what} in {max_moves} steps", b)
        moves += 1
        step = step * growth
        a, b = b, b + step
    return a, b


def bisect_until(go_right: Callable[[float], bool], lo: float, hi: float,
                 done: Callable[[float, float], bool], *,
                 mid: Callable[[float, float], float] | None = None,
                 iters: int = 200) -> tuple[float, float]:
    """Bisection of a monotone scalar predicate with a caller's stopping test:
    ``go_right(m)`` True means the root lies above ``m`` (``lo = m``), else below
    (``hi = m``), so ``go_right`` keeps holding at ``lo`` and failing at ``hi`` (as given).
    Before each split ``done(lo, hi)`` is asked; the split point is ``mid(lo, hi)`` (default
    ``0.5 * (lo + hi)``). Stops when ``done``, after ``iters`` splits, or when the split
    point is no longer strictly inside (the ends are adjacent floats). Returns
    ``(lo, hi)``: the caller keeps the end on its safe side."""
    for _ in range(iters):
        if done(lo, hi):
            break
        m = 0.5 * (lo + hi) if mid is None else mid(lo, hi)
        if not lo < m < hi:
            break
        if go_right(m):
            lo = m
        else:
            hi = m
    return lo, hi


def bisect_log(go_right: Callable[[float], bool], lo: float, hi: float, *, rtol: float,
               iters: int = 200) -> tuple[float, float]:
    """Bisection in log space of a monotone predicate on ``0 < lo < hi``: split at the
    geometric mean ``sqrt(lo * hi)`` until ``hi / lo - 1 <= rtol`` (see
    :func:`bisect_until`; ``go_right`` holds at ``lo`` and fails at ``hi``). Returns
    ``(lo, hi)``."""
    if not 0 < lo < hi:
        raise ValueError(f"bisect_log needs 0 < lo < hi, got lo={lo!r}, hi={hi!r}")
    return bisect_until(go_right, lo, hi, lambda a, b: b / a - 1 <= rtol,
                        mid=lambda a, b: math.sqrt(a * b), iters=iters)


def bisect_int(go_right: Callable[[int], bool], lo: int, hi: int) -> tuple[int, int]:
    """Integer bisection of a monotone predicate (``go_right`` holds at ``lo`` and fails at
    ``hi``, ``lo < hi``): split at ``(lo + hi) // 2`` until ``hi - lo == 1``. Returns
    ``(lo, hi)``: the last integer where ``go_right`` holds and the first where it fails."""
    lo, hi = int(lo), int(hi)
    if not lo < hi:
        raise ValueError(f"bisect_int needs lo < hi, got lo={lo!r}, hi={hi!r}")
    while hi - lo > 1:
        m = (lo + hi) // 2
        if go_right(m):
            lo = m
        else:
            hi = m
    return lo, hi


def descend_to_fixed_point(g: Callable[[float], float], x: float, *, iters: int = 60,
                           rtol: float = 1e-4) -> tuple[float, bool]:
    """Fixed-point iteration ``x <- g(x)`` for an increasing ``g`` from a point above its
    largest fixed point (``g(x) < x``), where the iterates decrease towards that fixed point:
    stops at the first iterate with ``g(x) >= x`` (a point below or at the fixed point,
    *feasible* for ``x <= g(x)``), when ``g(x)`` is not finite, when the step
    ``x - g(x)`` is below ``rtol * max(1, |g(x)|)`` (then ``x`` moves to ``g(x)``, not
    evaluated), or after ``iters`` evaluations. Returns ``(x, feasible)``: the last iterate,
    and whether ``x <= g(x)`` was found there."""
    for _ in range(iters):
        gx = g(x)
        if not math.isfinite(gx):
            return x, False
        if gx >= x:
            return x, True
        step, x = x - gx, gx
        if step < rtol * max(1.0, abs(x)):
            break
    return x, False


def bracket_of_points(points, *, keep: str) -> tuple[float | None, float | None]:
    """The bracket a search on a monotone predicate has established from its evaluated
    points, ``points`` a mapping ``x -> go_right(x)`` (e.g. a search's cache, when the search
    was stopped by an exception and cannot hand its bracket back): ``(lo, hi)`` with
    ``keep="lo"`` the largest point where ``go_right`` holds and ``hi`` the smallest above it
    where it fails; with ``keep="hi"`` the smallest point where it fails and ``lo`` the
    largest below it where it holds. None stands for an end not established."""
    if keep not in ("lo", "hi"):
        raise ValueError(f"keep must be 'lo' or 'hi', got {keep!r}")
    right = [x for x, r in points.items() if r]
    left = [x for x, r in points.items() if not r]
    if keep == "lo":
        lo = max(right, default=None)
        hi = min((x for x in left if lo is None or x > lo), default=None)
    else:
        hi = min(left, default=None)
        lo = max((x for x in right if hi is None or x < hi), default=None)
    return lo, hi
