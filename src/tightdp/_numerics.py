"""Numerical helpers shared across the package: log-space arithmetic, the floating-point
constants and the safeguarded scalar solvers. One home for each: a module that needs one of
these imports it from here.

The solver family (every monotone root search of the package uses it, or scipy.optimize):

* bracketing -- :func:`expand_bracket` (additive steps doubling from a start),
  :func:`walk_out` (the same, vectorized, with clamps; also settles a root on the safe side
  by steps growing from an ulp), :func:`grow_until` (geometric), :func:`bracket_on_grids`
  (first cell of a sequence of grids, one vectorized evaluation per grid);
* refining -- :func:`bisect` (monotone predicate, scalar or vectorized, returning the end on
  the side the caller needs), :func:`newton_bracketed` (safeguarded Newton or secant inside
  open brackets, stopping on the residual or the step), :func:`newton_scalar` (one scalar
  root, bracket possibly open to the right, relative stopping, returns the last step or
  iterate; the caller's ``f`` may record what it sees), :func:`newton_monotone` (Newton on
  a convex increasing function from the right of the root: no bracket, no overshoot),
  :func:`newton_polish` (Newton from a
  table cell, closed brackets, relative stopping), :func:`secant_walk` (secant steps on a
  monotone function, unbracketed, to be settled by :func:`walk_out`);
* searches over expensive queries (each evaluation an accountant run, so exact evaluation
  points and a bracket that survives a time budget) -- :func:`grow_bracket`, :func:`step_out`,
  :func:`bisect_until`, :func:`bisect_log` (geometric midpoints), :func:`bisect_int`,
  :func:`descend_to_fixed_point`, :func:`bracket_of_points` (the bracket of a stopped search
  from its evaluated points);
* :func:`secant_start` (regula falsi start inside a bracket), :func:`table_start`.

Certified callers keep the root on the safe side: the bracket ends keep their defining
property at every step, and the caller returns the end (or the settled point) whose side is
safe for the bound it reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["lse_last", "log_sub_exp", "table_start", "MACHINE_EPSILON", "UNIT_ROUNDOFF",
           "BracketError", "walk_out", "expand_bracket", "secant_walk", "grow_until",
           "bisect", "secant_start", "newton_bracketed", "newton_scalar", "newton_monotone",
           "newton_polish",
           "bracket_on_grids"]


def lse_last(x: np.ndarray) -> np.ndarray:
    """logsumexp over the last axis (rows of -inf give -inf), without scipy's per-call
    overhead; fast paths for one and two components."""
    m = x.shape[-1]
    if m == 1:
        return x[..., 0].copy()
    if m == 2:
        return np.logaddexp(x[..., 0], x[..., 1])
    mx = x.max(axis=-1)
    ms = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return ms + np.log(np.exp(x - ms[..., None]).sum(axis=-1))


def log_sub_exp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(e^a - e^b) for a >= b, elementwise; -inf where they are equal."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    out = np.where(np.isneginf(b), a, out)
    return np.where(np.isneginf(a) | (d >= 0), -np.inf, out)


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


# --- floating-point constants --------------------------------------------------------------
#: the spacing of doubles at 1, ``2**-52`` (``np.finfo(float).eps``)
MACHINE_EPSILON = 2.0 ** -52
#: the unit roundoff of round-to-nearest doubles, ``2**-53`` (half the machine epsilon): the
#: relative error of one correctly rounded operation
UNIT_ROUNDOFF = 2.0 ** -53


# --- safeguarded scalar solvers --------------------------------------------------------------
# One family for every monotone root search of the package. Each function keeps its root on
# the side the caller asks for, so a certified bound computed from it stays certified:
# the bracket ends keep their defining property at every step (``go_right`` holds at the left
# end and fails at the right end), and the caller chooses which end it returns.


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


def secant_walk(fn: Callable[[float], float], level: float, x0: float, slope0: float, *,
                decreasing: bool, iters: int = 40, rtol: float = 1e-12) -> float:
    """Secant iteration for ``fn(x) = level`` on a monotone ``fn`` from ``x0`` with the initial
    slope ``slope0`` (its sign is that of the monotonicity): a new secant slope is adopted
    only when it has the right sign. Stops when ``|fn(x) - level| < rtol (1 + |level|)``, at
    a non-finite value, or after ``iters`` steps. The result is *near* the root, on no side
    in particular: settle it with :func:`expand_bracket` (as
    :func:`tightdp.curves.saddle.root_decreasing` does)."""
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


def grow_until(bad: Callable, x, factor: float = 2.0, *,
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


def bisect(go_right: Callable, lo, hi, *, keep: str,
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


def secant_start(lo: np.ndarray, hi: np.ndarray, g_lo: np.ndarray, g_hi: np.ndarray,
                 target, clip: float = 0.05) -> np.ndarray:
    """The secant (regula falsi) point of the brackets ``[lo, hi]`` for ``g = target``, kept
    at least ``clip`` of the width away from either end (the midpoint where the secant is
    undefined): the start of :func:`newton_bracketed`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = (target - g_lo) / (g_hi - g_lo)
        # np.clip of np.nan_to_num(frac, nan=0.5), with less overhead (infinities clip alike)
        frac = np.minimum(np.maximum(np.where(np.isnan(frac), 0.5, frac), clip), 1.0 - clip)
    return lo + frac * (hi - lo)


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
    bound is valid at every point) or settle the result with :func:`walk_out`. Returns
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
    side it needs (e.g. by :func:`walk_out`)."""
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


def bracket_on_grids(f: Callable[[np.ndarray], np.ndarray], target, grids: list[np.ndarray],
                     below_grid: int | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bracket the roots of ``g(x) = target`` (``g`` roughly increasing; one ``target`` per
    element) on a sequence of grids, each evaluated by one vectorized call ``f(grid) -> g``
    and only while some element is still unbracketed: an element's bracket is the first grid
    cell ``[grid[j-1], grid[j]]`` with ``g(grid[j]) >= target`` (non-finite ``g`` counts as
    below every target).

    Returns ``(lo, hi, g_lo, g_hi, below)``; NaN where no bracket was found; ``below`` is True
    where the grid number ``below_grid`` (one that descends below the first) is already at or
    above the target at its first point (the root lies below every grid)."""
    target = np.atleast_1d(np.asarray(target, dtype=float))
    n = target.size
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    g_lo = np.full(n, np.nan)
    g_hi = np.full(n, np.nan)
    below = np.zeros(n, dtype=bool)
    for gi, grid in enumerate(grids):
        todo = np.flatnonzero(np.isnan(lo))
        if todo.size == 0:
            break
        g = np.asarray(f(grid), dtype=float)
        g = np.where(np.isfinite(g), g, -np.inf)
        ge = g[None, :] >= target[todo, None]
        has = ge.any(axis=1)
        j = np.argmax(ge, axis=1)  # first grid point at or above the target
        found = has & (j > 0)
        idx, jf = todo[found], j[found]
        lo[idx], hi[idx] = grid[jf - 1], grid[jf]
        g_lo[idx], g_hi[idx] = g[jf - 1], g[jf]
        if gi == below_grid:
            below[todo[has & (j == 0)]] = True
    return lo, hi, g_lo, g_hi, below


# --- searches on expensive scalar predicates ----------------------------------------------------
# The calibration searches (tightdp.dpsgd.calibrate, tightdp.state.calibrate_scale) and the
# group conversion search (tightdp.dpsgd.group) evaluate one expensive, cached predicate at a
# time; these return both ends of what they established, so that a caller can report the
# bracket, and a caller stopped by an exception can rebuild it from its cache with
# :func:`bracket_of_points`.

__all__ += ["grow_bracket", "step_out", "bisect_until", "bisect_log", "bisect_int",
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
    ``growth`` (``step < 0`` walks to the left; ``growth=2`` is :func:`expand_bracket`).
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
