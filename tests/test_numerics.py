"""The safeguarded solvers of tightdp.roots and the helpers of tightdp._numerics: known roots,
the end kept on the safe side, clear failures, float paths equal to the arrays' forms."""

import math

import numpy as np
import pytest

from tightdp._numerics import FLOATS, MACHINE_EPSILON, UNIT_ROUNDOFF, exp0, log0, logaddexp1
from tightdp.roots import (
    BracketError,
    bisect,
    bracket_on_grids,
    expand_bracket,
    grow_until,
    newton_bracketed,
    newton_monotone,
    newton_polish,
    newton_scalar,
    root_decreasing,
    roots_decreasing,
    secant_start,
    secant_walk,
    solve_few,
    solve_on_grids,
    walk_out,
)


def test_constants():
    assert MACHINE_EPSILON == np.finfo(float).eps == 2.0 ** -52
    assert UNIT_ROUNDOFF == MACHINE_EPSILON / 2
    assert 1.0 + MACHINE_EPSILON > 1.0 and 1.0 + UNIT_ROUNDOFF == 1.0


def test_expand_bracket_doubling_steps():
    # from 0 by steps 1, 2, 4, 8: the points 1, 3, 7, 15; the root 10 lies in (7, 15]
    tried = []

    def right(x):
        tried.append(x)
        return x < 10.0

    assert expand_bracket(right, 0.0, 1.0) == (7.0, 15.0)
    assert tried == [1.0, 3.0, 7.0, 15.0]
    # to the left, and a first step that already fails returns (start, start + step)
    assert expand_bracket(lambda x: x > -5.0, 0.0, -1.0) == (-3.0, -7.0)
    assert expand_bracket(lambda x: x < 0.5, 0.0, 1.0) == (0.0, 1.0)


def test_expand_bracket_failure_is_a_clear_error():
    msg = r"no bracket for the quantile within \|x\| <= 1e\+06"
    with pytest.raises(BracketError, match=msg) as e:
        expand_bracket(lambda x: True, 0.0, 1.0, limit=1e6, what="the quantile")
    assert e.value.last == 2.0 ** 20 - 1  # the first point past the limit
    assert isinstance(e.value, ValueError)
    with pytest.raises(BracketError, match="in 5 steps") as e:
        expand_bracket(lambda x: True, 0.0, 1.0, max_moves=5)
    assert e.value.last == 63.0  # 1 moved 5 times: 3, 7, 15, 31, 63


def test_walk_out_vectorized():
    x = np.zeros(3)
    target = np.array([-1.0, 5.0, 100.0])
    prev, out = walk_out(lambda z: z < target, x, 1.0)
    # every element moves only while it is bad; the step doubles for all: 1, 2, 4, 8, ...
    np.testing.assert_array_equal(out, [0.0, 7.0, 127.0])
    np.testing.assert_array_equal(prev, [0.0, 3.0, 63.0])
    assert np.all(out >= target) and np.all((prev < target) | (out == x))


def test_walk_out_clamp_and_return_on_limit():
    # settling on the safe side by growing steps, never below the bracket end
    x = np.array([1.0, 1.0])
    _, out = walk_out(lambda z: z > np.array([0.9, -5.0]), x, np.array([-0.01, -0.01]),
                      lower=np.array([0.0, -1.0]), max_moves=60, on_limit="return")
    np.testing.assert_allclose(out, [1.0 - 0.15, -1.0])  # 1 - (1+2+4+8) 0.01; the clamp
    _, out = walk_out(lambda z: True, 0.0, 1.0, max_moves=3, on_limit="return")
    assert out == 7.0
    with pytest.raises(ValueError, match="on_limit"):
        walk_out(lambda z: True, 0.0, 1.0, on_limit="clip")


def test_grow_until():
    assert grow_until(lambda x: x < 1000.0, 1.0, 2.0) == 1024.0
    assert grow_until(lambda x: x > 1e-3, 1.0, 0.5) == 2.0 ** -10
    np.testing.assert_array_equal(grow_until(lambda x: x < np.array([3.0, 0.5]),
                                             np.ones(2), 2.0), [4.0, 1.0])
    with pytest.raises(BracketError, match="passed 1e-300"):
        grow_until(lambda x: True, 1.0, 0.5, limit=1e-300)


def test_bisect_known_root_and_safe_side():
    root = 2.0 ** (1.0 / 3.0)
    hi = bisect(lambda m: m ** 3 < 2.0, 0.0, 2.0, keep="hi", xtol=1e-15, iters=200)
    lo = bisect(lambda m: m ** 3 < 2.0, 0.0, 2.0, keep="lo", xtol=1e-15, iters=200)
    assert lo <= root <= hi and hi - lo <= 2e-15
    assert hi ** 3 >= 2.0 > lo ** 3
    # the safe side holds for every root, whatever the tolerance
    rng = np.random.default_rng(0)
    r = rng.uniform(-50.0, 50.0, 1000)
    up = bisect(lambda m: m < r, np.full(r.size, -64.0), np.full(r.size, 64.0), keep="hi",
                xtol=1e-6)
    down = bisect(lambda m: m < r, np.full(r.size, -64.0), np.full(r.size, 64.0), keep="lo",
                  xtol=1e-6)
    assert np.all(up >= r) and np.all(down < r)
    assert np.all(up - down <= 1e-6 * np.maximum(1.0, np.abs(up)))
    with pytest.raises(ValueError, match="keep"):
        bisect(lambda m: True, 0.0, 1.0, keep="mid", xtol=1e-9)


def test_secant_start():
    x = secant_start(np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0]),
                     np.array([0.0, 0.0, -np.inf]), np.array([4.0, 4.0, 1.0]),
                     np.array([1.0, 3.99, 0.5]))
    np.testing.assert_allclose(x, [0.25, 0.95, 0.5])  # clipped to 5 % of the ends; NaN: mid


@pytest.mark.parametrize("secant", [False, True])
def test_newton_bracketed_known_roots(secant):
    target = np.array([2.0, 10.0, 1e5, 1.0])
    lo, hi = np.full(4, -5.0), np.full(4, 20.0)

    def f(x, idx):
        return np.exp(x), np.exp(x)

    x = newton_bracketed(f, target, lo, hi, 0.5 * (lo + hi), ftol=1e-14 * target,
                         secant=secant)
    np.testing.assert_allclose(x, np.log(target), rtol=0, atol=1e-13)


def test_newton_bracketed_bad_slope_falls_back_to_bisection():
    # a slope of the wrong sign: every step is a bisection of the bracket, still converging
    def f(x, idx):
        return x ** 3, -np.ones_like(x)

    x = newton_bracketed(f, np.array([5.0]), np.array([0.0]), np.array([4.0]),
                         np.array([1.0]), ftol=0.0, iters=200)
    assert abs(x[0] - 5.0 ** (1.0 / 3.0)) < 1e-13


def test_newton_polish_known_roots():
    y = np.array([-8.0, 0.001, 27.0, 1e6])

    def f(x, idx):
        return x ** 3, 3 * x ** 2

    lo, hi = np.full(4, -3.0), np.full(4, 200.0)
    x = newton_polish(f, y, lo, hi, np.array([-1.0, 1.0, 1.0, 1.0]), iters=200)
    np.testing.assert_allclose(x, np.cbrt(y), rtol=1e-13)


def test_bracket_on_grids():
    grids = [np.linspace(1.0, 10.0, 10), np.linspace(0.1, 1.0, 10), np.linspace(10.0, 100.0, 10)]
    calls = []

    def g(x):
        calls.append(x.size)
        return x, np.ones_like(x)

    lo, hi, glo, ghi, _, _, below = bracket_on_grids(g, np.array([2.5, 50.0, 0.01, 1e4]),
                                                     grids)
    np.testing.assert_array_equal(lo[:2], [2.0, 40.0])
    np.testing.assert_array_equal(hi[:2], [3.0, 50.0])
    assert np.isnan(lo[2:]).all() and below.tolist() == [False, False, True, False]
    assert calls == [10, 10, 10]


def test_secant_walk_and_root_decreasing_safe_side():
    fn = lambda x: -x ** 3  # noqa: E731 - decreasing, root of fn = -2 at 2^(1/3)
    x = secant_walk(fn, -2.0, 1.0, -3.0, decreasing=True)
    assert abs(x - 2.0 ** (1.0 / 3.0)) < 1e-11
    up = root_decreasing(fn, -2.0, 1.0, 3.0, upper=True)
    lo = root_decreasing(fn, -2.0, 1.0, 3.0, upper=False)
    assert fn(up) <= -2.0 < fn(lo)
    assert up - lo < 1e-9
    # no point on the safe side can be reached: None
    assert root_decreasing(lambda x: 0.0, -1.0, 0.0, 1.0, upper=True) is None


# --- searches on expensive scalar predicates (grow_bracket, step_out, bisect_until,
# bisect_log, bisect_int, descend_to_fixed_point, bracket_of_points) ---------------------------

def _recording(pred):
    calls = []

    def f(x):
        calls.append(x)
        return pred(x)
    return f, calls


def test_grow_bracket_geometric():
    from tightdp.roots import grow_bracket

    go, calls = _recording(lambda x: x < 10.0)
    assert grow_bracket(go, 1.0, 2.0) == (8.0, 16.0)
    assert calls == [1.0, 2.0, 4.0, 8.0, 16.0]  # one evaluation per point, start included
    assert grow_bracket(lambda x: False, 3.0, 2.0) == (None, 3.0)  # fails at the start
    assert grow_bracket(lambda x: x > 0.1, 1.0, 0.5) == (0.125, 0.0625)  # shrinking
    assert grow_bracket(lambda x: x < 5, 1, 2) == (4, 8)  # integers stay integers
    assert isinstance(grow_bracket(lambda x: x < 5, 1, 2)[1], int)


def test_grow_bracket_limit():
    from tightdp.roots import grow_bracket

    # a point beyond the limit is never evaluated; the limit itself is allowed
    go, calls = _recording(lambda x: True)
    with pytest.raises(BracketError, match="no bracket for sigma: the search passed 100") as e:
        grow_bracket(go, 2.0, 2.0, limit=100.0, what="sigma")
    assert e.value.last == 128.0 and calls == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert grow_bracket(lambda x: x < 64.0, 2.0, 2.0, limit=64.0) == (32.0, 64.0)
    go, calls = _recording(lambda x: True)
    assert grow_bracket(go, 0.5, 0.5, limit=1e-3, on_limit="return") == (2.0 ** -9, 2.0 ** -10)
    assert calls[-1] == 2.0 ** -9 and 2.0 ** -10 not in calls  # returned unevaluated
    with pytest.raises(ValueError, match="on_limit"):
        grow_bracket(lambda x: True, 1.0, 2.0, on_limit="clip")
    for bad in (1.0, 0.0, -2.0, math.inf):
        with pytest.raises(ValueError, match="factor"):
            grow_bracket(lambda x: True, 1.0, bad)


def test_step_out_growing_steps():
    from tightdp.roots import step_out

    # from 0 by steps -1, -4, -16, -64: the points -1, -5, -21, -85
    go, calls = _recording(lambda x: x > -50.0)
    assert step_out(go, 0.0, -1.0, growth=4.0) == (-21.0, -85.0)
    assert calls == [-1.0, -5.0, -21.0, -85.0]
    # growth 2 is expand_bracket
    for root in (0.5, 10.0, 1000.0):
        def below(x, root=root):
            return x < root
        assert step_out(below, 0.0, 1.0) == expand_bracket(below, 0.0, 1.0)
    # max_moves moves, max_moves + 1 evaluations
    go, calls = _recording(lambda x: True)
    assert step_out(go, 0.0, 1.0, growth=4.0, max_moves=3, on_limit="return") == (21.0, 85.0)
    assert calls == [1.0, 5.0, 21.0, 85.0]
    with pytest.raises(BracketError, match="in 3 steps") as e:
        step_out(lambda x: True, 0.0, 1.0, max_moves=3)
    assert e.value.last == 15.0


def test_bisect_until_caller_stop_and_adjacent_floats():
    from tightdp.roots import bisect_until

    root = 2.0 ** 0.5
    go, calls = _recording(lambda m: m * m < 2.0)
    lo, hi = bisect_until(go, 0.0, 2.0, lambda a, b: b - a <= 1e-3)
    assert lo < root <= hi and hi - lo <= 1e-3 and lo * lo < 2.0 <= hi * hi
    assert len(calls) == 11 and calls[:3] == [1.0, 1.5, 1.25]  # 2 / 2**11 < 1e-3 < 2 / 2**10
    # a stopping test that never holds: the split stops at adjacent floats (or after iters)
    lo, hi = bisect_until(lambda m: m * m < 2.0, 1.0, 2.0, lambda a, b: False)
    assert hi == np.nextafter(lo, 3.0) and lo * lo < 2.0 <= hi * hi
    go, calls = _recording(lambda m: True)
    assert bisect_until(go, 0.0, 1.0, lambda a, b: False, iters=3) == (0.875, 1.0)
    assert len(calls) == 3
    # a custom split point, checked before each split
    lo, hi = bisect_until(lambda m: m < 0.3, 0.0, 1.0, lambda a, b: b - a < 0.3,
                          mid=lambda a, b: a + 0.25 * (b - a))
    assert (lo, hi) == (0.25, 0.4375)


def test_bisect_log_geometric_midpoints():
    from tightdp.roots import bisect_log

    go, calls = _recording(lambda x: x < 3.0)
    lo, hi = bisect_log(go, 1.0, 2.0 ** 40, rtol=1e-6)
    assert lo < 3.0 <= hi and hi / lo - 1 <= 1e-6
    assert calls[:3] == [2.0 ** 20, 2.0 ** 10, 2.0 ** 5]  # sqrt(lo * hi)
    # the first split that leaves [lo, hi] with hi / lo - 1 <= rtol ends the search:
    # log2(hi / lo) halves from 40 until 40 / 2**n <= log2(1 + 1e-6)
    assert len(calls) == math.ceil(math.log2(40 / math.log2(1 + 1e-6)))
    # rtol = 0 ends at adjacent floats instead of looping forever
    lo, hi = bisect_log(lambda x: x < 3.0, 1.0, 4.0, rtol=0.0)
    assert hi == np.nextafter(lo, 4.0) and lo < 3.0 <= hi
    with pytest.raises(ValueError, match="0 < lo < hi"):
        bisect_log(lambda x: True, 0.0, 1.0, rtol=1e-3)


def test_bisect_int():
    from tightdp.roots import bisect_int

    go, calls = _recording(lambda n: n * n <= 1000)
    assert bisect_int(go, 0, 1024) == (31, 32)  # 31**2 = 961 <= 1000 < 1024 = 32**2
    assert len(calls) == 10 and all(isinstance(n, int) for n in calls)
    assert bisect_int(lambda n: True, 4, 5) == (4, 5)  # already adjacent: no evaluation
    assert bisect_int(lambda n: n <= 7, 0, 10 ** 12) == (7, 8)
    with pytest.raises(ValueError, match="lo < hi"):
        bisect_int(lambda n: True, 3, 3)


def test_descend_to_fixed_point():
    from tightdp.roots import descend_to_fixed_point

    # g(x) = x/2 + 1 above 3 (fixed point 2 beyond reach), 5 at and below: 10 -> 6 -> 4 -> 3
    go, calls = _recording(lambda x: x / 2 + 1 if x > 3 else 5.0)
    assert descend_to_fixed_point(go, 10.0) == (3.0, True)
    assert calls == [10.0, 6.0, 4.0, 3.0]
    # g(x) = x/2 + 1: x_n = 2 + 8 / 2**n; the search stalls at the first step
    # x_n - x_{n+1} = 4 / 2**n below 1e-4 * x_{n+1} (n = 15: 1.2e-4 < 2.0001e-4) and returns
    # the (unevaluated) x_16
    x, found = descend_to_fixed_point(lambda x: x / 2 + 1, 10.0)
    assert not found and x == 2.0 + 8.0 / 2 ** 16
    # a non-finite g stops where it is; iters bounds the evaluations
    assert descend_to_fixed_point(lambda x: -math.inf, 1.0) == (1.0, False)
    assert descend_to_fixed_point(lambda x: x / 2 + 1, 10.0, iters=2) == (4.0, False)


def test_bracket_of_points():
    from tightdp.roots import bracket_of_points

    # go_right holds below 5 (monotone)
    pts = {1.0: True, 4.0: True, 8.0: False, 6.0: False, 2.0: True}
    assert bracket_of_points(pts, keep="lo") == (4.0, 6.0)
    assert bracket_of_points(pts, keep="hi") == (4.0, 6.0)
    assert bracket_of_points({1.0: True}, keep="lo") == (1.0, None)
    assert bracket_of_points({1.0: True}, keep="hi") == (1.0, None)
    assert bracket_of_points({1.0: False}, keep="lo") == (None, 1.0)
    assert bracket_of_points({}, keep="lo") == (None, None)
    # a point on the wrong side of the kept end (a non-monotone predicate) is not an end
    odd = {1.0: True, 3.0: False, 5.0: True, 7.0: False}
    assert bracket_of_points(odd, keep="lo") == (5.0, 7.0)
    assert bracket_of_points(odd, keep="hi") == (1.0, 3.0)
    with pytest.raises(ValueError, match="keep"):
        bracket_of_points(pts, keep="mid")


def test_newton_scalar_known_roots_and_stops():
    # g(x) = x^3 - 2 on (0, 4): the root 2^(1/3)
    seen = []

    def f(x):
        seen.append(x)
        return x ** 3 - 2.0, 3.0 * x * x

    x, steps = newton_scalar(f, 2.0, 0.0, 4.0, iters=100, rtol=1e-15, floor=1.0)
    assert x == pytest.approx(2.0 ** (1 / 3), rel=1e-15) and steps == len(seen)
    # the residual stop returns the evaluated point, no step taken after it
    seen.clear()
    x, steps = newton_scalar(f, 1.0, 0.0, 4.0, iters=100, rtol=0.0, ftol=1e-9)
    assert abs(x ** 3 - 2.0) <= 1e-9 and x == seen[-1] and steps == len(seen) - 1
    # keep="point" returns the last evaluated point, keep="step" the step after it
    seen.clear()
    xp, _ = newton_scalar(f, 2.0, 0.0, 4.0, iters=100, rtol=1e-3, floor=1.0, keep="point")
    assert xp == seen[-1]
    seen.clear()
    xs, _ = newton_scalar(f, 2.0, 0.0, 4.0, iters=100, rtol=1e-3, floor=1.0, keep="step")
    assert xs != seen[-1] and abs(xs - seen[-1]) <= 1e-3 * abs(seen[-1])
    # iters counts the points visited, x0 included: two points, one step
    seen.clear()
    x, steps = newton_scalar(f, 4.0 - 1e-9, 0.0, 4.0, iters=2, rtol=0.0)
    assert len(seen) == 2 and steps == 1 and x == seen[-1]


def test_newton_scalar_safeguards():
    # a wrong (negative) slope is never followed: the midpoint of the bracket is used
    seen = []

    def f(x):
        seen.append(x)
        return x - 1.0, -1.0

    x, _ = newton_scalar(f, 3.0, 0.0, 4.0, iters=200, rtol=0.0, floor=1.0, width_rtol=1e-15)
    assert seen[:3] == [3.0, 1.5, 0.75] and x == pytest.approx(1.0, abs=1e-14)
    # an open right end doubles (from grow_from) until the root is bracketed
    seen.clear()

    def g(x):
        seen.append(x)
        return x - 100.0, 0.0  # no slope: bracketing and bisection only

    x, _ = newton_scalar(g, 1.0, 0.0, iters=200, rtol=0.0, floor=1.0, width_rtol=1e-14)
    assert seen[:4] == [1.0, 2.0, 4.0, 8.0] and x == pytest.approx(100.0, rel=1e-13)
    # x_max ends the search; first= gives the values at x0 (not evaluated, not tested)
    seen.clear()
    newton_scalar(g, 1.0, 0.0, iters=200, rtol=0.0, x_max=10.0)
    assert max(seen) == 8.0
    seen.clear()
    x, steps = newton_scalar(f, 0.5, 0.0, 4.0, iters=50, rtol=0.0, ftol=0.6,
                             first=(-0.5, 1.0))
    assert seen == [1.0] and x == 1.0 and steps == 1
    with pytest.raises(ValueError, match="keep"):
        newton_scalar(f, 1.0, 0.0, 2.0, iters=3, rtol=0.0, keep="lo")


def test_newton_monotone_from_the_right():
    # g(x) = e^x (convex, increasing) = target from the right: log(target), never crossed
    target = np.array([0.5, 1.0, 3.0, 1e5])
    seen = {i: [] for i in range(target.size)}

    def f(x, idx):
        for i, xi in zip(idx, x, strict=True):
            seen[int(i)].append(float(xi))
        g = np.exp(x)
        return g - target[idx], g, 4e-16 * target[idx]

    x0 = np.log(target) + np.array([1.0, 3.0, 0.5, 10.0])
    x = newton_monotone(f, x0, iters=100)
    np.testing.assert_allclose(x, np.log(target), rtol=1e-15, atol=1e-15)
    for i, its in seen.items():  # every element's iterates decrease, never below the root
        assert len(its) > 2 and all(b <= a for a, b in zip(its[:-1], its[1:], strict=True))
        assert min(its) >= math.log(target[i]) - 1e-15
    # a residual already below the root (negative) makes no step; a zero slope neither
    x = newton_monotone(lambda x, idx: (np.array([-1.0, 1.0]), np.array([1.0, 0.0]),
                                        np.zeros(2)), np.array([2.0, 5.0]), iters=5)
    assert np.array_equal(x, [2.0, 5.0])


def test_roots_decreasing_safe_sides_and_uninformative():
    """Several decreasing functions solved at once: each point is on its safe side (checked
    here) and within 1e-12 of the root from brentq; a lower side whose value at the start is
    not finite, or that reaches a non-finite value, gets NaN."""
    from scipy.optimize import brentq

    c = np.array([2.0, -1.0, 0.5, 3.0])

    def fn(x):  # g_j(x) = -x^3 - x + c_j, decreasing
        return -x ** 3 - x + c, -3 * x ** 2 - 1

    level = -0.7
    upper = np.array([True, False, True, False])
    x = roots_decreasing(fn, level, np.zeros(4), 1.0, upper)
    g = fn(x)[0]
    assert np.all(g[upper] <= level) and np.all(g[~upper] > level)
    ref = [brentq(lambda y, cj=cj: -y ** 3 - y + cj - level, -10, 10, xtol=1e-15) for cj in c]
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-12)

    def fn_gap(x):  # a lower bound that is -inf below 1 (uninformative there)
        v = np.where(x > 1.0, -x, -np.inf)
        return v, np.full_like(x, -1.0)

    # the root of -x = -0.5 lies in the uninformative region: no lower bound
    out = roots_decreasing(fn_gap, -0.5, np.array([2.0, 0.5]), 1.0, np.array([False, False]))
    assert np.isnan(out).all()


def test_roots_decreasing_few_equals_arrays():
    """The float steps :func:`roots_decreasing` takes for a few points give the points of its
    arrays' steps exactly, on smooth decreasing functions with both sides, starts on either
    side, a start without a slope, and lower sides uninformative at the start or on the
    way."""
    import sys

    sd = sys.modules["tightdp.roots.decreasing"]  # the two private step functions

    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 7))
        c = rng.normal(0.0, 3.0, n)
        p = rng.uniform(0.5, 3.0, n)
        gap = rng.uniform(-3.0, 1.0, n)  # lower sides: -inf below the gap

        def fn(x, c=c, p=p, gap=gap):
            with np.errstate(invalid="ignore", over="ignore"):
                v = -np.sinh(x / p) * p - x + c
                d = -np.cosh(x / p) - 1.0
            return np.where(x > gap, v, -np.inf), d

        level = float(rng.normal(0.0, 2.0))
        x0 = rng.normal(0.0, 2.0, n)
        slope0 = rng.uniform(0.0, 3.0, n)
        slope0[rng.random(n) < 0.2] = np.nan
        upper = rng.random(n) < 0.5
        a = sd._roots_decreasing_arrays(fn, level, x0, slope0, upper, 40, 1e-14)
        b = sd._roots_decreasing_floats(fn, level, x0.tolist(), slope0.tolist(),
                                        upper.tolist(), 40, 1e-14)
        np.testing.assert_array_equal(a, np.array(b))


def test_solve_on_grids_and_few_known_roots():
    """The grid solves in ``log x`` on plain grids (one piece each): ``g(x) = x^3 + x`` (its
    slope in log x ``3 x^3 + x``) against brentq, the many-target and the few-target
    (refined, floats) paths alike; beyond the cap ``ok`` is False and ``x`` the cap."""
    from scipy.optimize import brentq

    def f(x):
        return x ** 3 + x, 3 * x ** 3 + x

    grids = [np.geomspace(1e-2, 1e2, 9), np.geomspace(1e-6, 1e-2, 5)]
    targets = np.array([0.5, 2.0, 1e3, 1e-5, 1e9])
    ref = [brentq(lambda x, c=c: x ** 3 + x - c, 1e-9, 1e4, xtol=1e-15, rtol=1e-15)
           for c in targets[:4]]
    many = solve_on_grids(f, targets, grids, floor=1e-6, cap=1e2)
    np.testing.assert_allclose(many.x[:4], ref, rtol=1e-9)
    assert many.ok.tolist() == [True] * 4 + [False] and math.isclose(many.x[4], 1e2)
    few = solve_few(f, targets[:4], grids, floor=1e-6, cap=1e2, refine=4)
    np.testing.assert_allclose(few.x, ref, rtol=1e-9)
    assert few.ok.all()


def test_float_forms_of_numpy_functions():
    """log0, exp0, logaddexp1 and FLOATS' minimum, maximum, where give numpy's values (NaN,
    infinities and zero included; not covered: exp0 of [709, log(max float)), inf there, and
    logaddexp1 of inf and NaN, inf)."""
    xs = [0.0, -1.0, 1e-300, 2.5, math.inf, -math.inf, math.nan, 708.0, 710.0, -800.0, 1e308]
    with np.errstate(all="ignore"):
        for x in xs:
            np.testing.assert_array_equal(log0(x), np.log(x))
            np.testing.assert_array_equal(exp0(x), np.exp(x))
            for y in xs:
                if not (math.inf in (x, y) and math.isnan(x + y)):
                    np.testing.assert_array_equal(logaddexp1(x, y), np.logaddexp(x, y))
                # the NaN-propagating min/max of the float arithmetic (Python's keep the
                # first argument when a comparison with NaN fails)
                np.testing.assert_array_equal(FLOATS.minimum(x, y), np.minimum(x, y))
                np.testing.assert_array_equal(FLOATS.maximum(x, y), np.maximum(x, y))
                np.testing.assert_array_equal(FLOATS.where(x < y, x, y),
                                              np.where(x < y, x, y))
