"""The saddle-point formulas of tightdp.curves.saddle (Alghamdi et al., arXiv:2208.09595)
against independent values -- the mu-GDP closed form of a Gaussian composition (whose tilted
laws are Gaussian: SP-CLT is exact there), mpmath integrals and maxima -- and the tilt search
built on tightdp.roots (known roots, lazy bracketing, joint and refined solves)."""

import math

import numpy as np
import pytest

from tightdp import Gaussian, PoissonSubsampled, SaddlePointAccountant
from tightdp.curves.saddle import (
    T_MIN,
    log_clt_theta,
    log_clt_theta1,
    log_theta_max,
    rma_eps,
    saddle_eps,
    saddle_log_delta,
    saddle_log_delta_slope,
    solve_tilt,
    tilt_grids,
)

mp = pytest.importorskip("mpmath")


def _gauss_ks(mu: float, t: np.ndarray) -> np.ndarray:
    """Rows K to K'''' of the privacy loss of mu-GDP, ``Y ~ N(mu^2/2, mu^2)``:
    ``K(t) = mu^2 t (t + 1) / 2``."""
    m2 = mu * mu
    return np.array([m2 * t * (t + 1) / 2, m2 * (2 * t + 1) / 2, m2 + 0 * t, 0 * t, 0 * t])


def _gdp_log_delta(mu: float, eps: float) -> float:
    """log delta(eps) of mu-GDP by mpmath: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    with mp.workdps(60):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return float(mp.log(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)))


@pytest.mark.parametrize("mu", [0.3, 1.0, 4.0])
def test_sp_clt_is_exact_for_gaussian_composition(mu):
    """The tilted loss of a Gaussian composition is Gaussian, so SP-CLT (eqs. (8), (66),
    Prop. 6) is the exact curve at every tilt: at the saddle point and away from it."""
    for eps in (0.2, 1.5, 6.0):
        ref = _gdp_log_delta(mu, eps)
        for t in (0.05, 0.7, 3.0):
            val = saddle_log_delta(_gauss_ks(mu, np.array([t])), np.array([t]),
                                   np.array([eps]), "clt")[0][0]
            assert abs(val - ref) <= 1e-9 * max(1.0, abs(ref))


@pytest.mark.parametrize("mu", [1.0, 3.0])
def test_sp_msd_near_gdp_and_saddle_eps(mu):
    """SP-MSD0/1 at the saddle point of eps (eq. (50) by brentq on the closed-form K') are
    close to the mu-GDP curve (within 10% in delta), and :func:`saddle_eps` inverts
    eq. (50)."""
    from scipy.optimize import brentq

    m2 = mu * mu
    for eps in (0.5, 2.0, 5.0):
        t = brentq(lambda x, e=eps: m2 * (2 * x + 1) / 2 - 1 / x - 1 / (1 + x) - e, 1e-9, 1e6,
                   xtol=1e-15, rtol=1e-15)
        ta = np.array([t])
        ks = _gauss_ks(mu, ta)
        assert abs(saddle_eps(ks, ta)[0] - eps) <= 1e-9 * max(1.0, eps)
        ref = _gdp_log_delta(mu, eps)
        for method in ("msd0", "msd1"):
            val = saddle_log_delta(ks, ta, None, method)[0][0]
            assert abs(val - ref) < 0.1


@pytest.mark.parametrize("t", [0.01, 0.5, 3.0, 200.0])
def test_log_theta_max_vs_mpmath(t):
    """``M_t = max_x (1 - e^{-x}) e^{-t x}`` (eq. (42)) by mpmath: the definition at its
    maximizer, found numerically (bisection) as the root of the derivative of its log,
    ``1/(e^x - 1) - t``."""
    with mp.workdps(40):
        th = lambda x: (1 - mp.exp(-x)) * mp.exp(-t * x)  # noqa: E731
        xs = mp.findroot(lambda x: 1 / mp.expm1(x) - t, (mp.mpf("1e-9"), mp.mpf(50)),
                         solver="bisect")
        ref = float(mp.log(th(xs)))
    assert abs(log_theta_max(np.array([t]))[0] - ref) <= 1e-12 * max(1.0, abs(ref))


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_rma_eps_is_an_upper_bound(mu):
    """The refined-moments bound solved for eps (eq. (43)) lies above the exact eps(delta)
    of mu-GDP (its closed form inverted by brentq) at every tilt, and within 50% of it at
    the best tilt of a grid."""
    from scipy.optimize import brentq

    for delta in (1e-3, 1e-8):
        exact = brentq(lambda e, d=delta: _gdp_log_delta(mu, e) - math.log(d), 0.0, 200.0,
                       xtol=1e-12)
        t = np.geomspace(1e-3, 1e3, 400)
        e = rma_eps(_gauss_ks(mu, t)[0], t, math.log(delta))
        assert np.all(e >= exact)
        assert e.min() <= 1.5 * exact


def test_log_clt_theta1_equals_arrays():
    """The one-tilt float form of Prop. 6 (the Berry-Esseen root search's) equals the
    arrays' form to the last bits of the math module's logarithms, value and slope."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        t, m, s = rng.uniform(0.01, 40.0), rng.normal(0, 10.0), rng.uniform(0.05, 20.0)
        v, d = log_clt_theta(np.array([t]), np.array([m]), np.array([s]), slope=True)
        v1, d1 = log_clt_theta1(t, m, s)
        assert abs(v1 - v[0]) <= 1e-13 * max(1.0, abs(v[0]))
        assert abs(d1 - d[0]) <= 1e-12 * max(1.0, abs(d[0]))


def test_solve_tilt():
    # g(t) = log t (dg/dlog t = 1): the root of g = c is e^c
    def f(t):
        return np.log(t), np.ones_like(t)

    for tg in ([0.3], [-2.0, 1.0, 3.5]):
        t, ok = solve_tilt(f, np.array(tg), 1e-4, 64.0, 1e12)
        np.testing.assert_allclose(t, np.exp(tg), rtol=1e-10)
        assert ok.all()
    t, ok = solve_tilt(f, np.array([40.0]), 1e-4, 64.0, 2048.0)  # e^40 beyond the cap
    assert t[0] == 2048.0 and not ok[0]
    t, ok = solve_tilt(f, np.array([-40.0]), 1e-4, 64.0, 2048.0)  # below every tilt tried
    assert math.isclose(t[0], 1e-12, rel_tol=1e-14) and ok[0]


def test_tilt_grids_have_no_hidden_cache():
    import tightdp.curves.saddle as saddle

    a = tilt_grids(1e-4, 64.0, 2048.0, 33)
    b = tilt_grids(1e-4, 64.0, 2048.0, 33)
    assert a is not b and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not any(isinstance(v, dict) for k, v in vars(saddle).items()
                   if k.isupper() and k.startswith("_"))
    assert a[0][0] == 1e-4 and a[0][-1] == 64.0 and a[1][0] == 1e-12
    assert math.isclose(a[-1][-1], 2048.0)


def test_solve_tilt_lazy_bracketing_root_and_ranges():
    """solve_tilt finds the saddle point of a Gaussian composition (closed form K, root by
    brentq) and evaluates no tilt of a node-set range above the root's (the grids are scanned
    one range at a time); a target below every grid gives T_MIN without visiting the upward
    grids."""
    from scipy.optimize import brentq

    from tightdp.losses.cgf import node_bucket

    mu2 = 0.3 ** 2 * 50  # 50 compositions of GaussianLoss(0.3)
    seen: list[float] = []

    def f(t):
        seen.extend(np.asarray(t).tolist())
        g = mu2 * (2 * t + 1) / 2 - 1 / t - 1 / (1 + t)
        return g, t * (mu2 + 1 / t ** 2 + 1 / (1 + t) ** 2)

    eps = 28.9  # root near t = 6
    t, ok = solve_tilt(f, eps, 1e-4, 64.0, 1e12)
    ref = brentq(lambda x: mu2 * (2 * x + 1) / 2 - 1 / x - 1 / (1 + x) - eps, 1e-6, 1e3,
                 xtol=1e-15, rtol=1e-15)
    assert ok[0] and abs(t[0] / ref - 1) < 1e-9
    assert 4.0 < ref < 8.0  # the second range: points up to 8 only
    assert max(seen) <= float(node_bucket(ref)) + 1e-12
    seen.clear()
    t, ok = solve_tilt(f, -1e12, 1e-4, 64.0, 1e12)
    assert ok[0] and t[0] == pytest.approx(T_MIN) and max(seen) <= 64.0


def test_log_clt_theta_slope_vs_mpmath():
    """The derivative in m of log E[theta_t(Z)], Z ~ N(m, s^2) (the closed form of Prop. 6
    with the density terms cancelled), against mpmath's numerical derivative of the
    definition's integral."""
    for t, m, s in ((0.07, 0.3, 2.0), (3.0, 5.0, 1.5), (12.0, -0.5, 0.4), (0.5, 40.0, 6.0)):
        val, slope = log_clt_theta(np.array([t]), np.array([m]), np.array([s]), slope=True)
        with mp.workdps(40):
            def log_e(mm, t=t, s=s):
                f = lambda z: ((1 - mp.exp(-z)) * mp.exp(-t * z)  # noqa: E731
                               * mp.npdf(z, mm, s))
                return mp.log(mp.quad(f, [0, mm, mm + 10 * s, mp.inf] if mm > 0
                                      else [0, 10 * s, mp.inf]))
            ref_val = float(log_e(mp.mpf(m)))
            ref_slope = float(mp.diff(log_e, mp.mpf(m)))
        assert abs(val[0] - ref_val) < 1e-12 * max(1.0, abs(ref_val))
        assert abs(slope[0] - ref_slope) < 1e-9 * max(1.0, abs(ref_slope))


def test_solve_tilt_joint_equals_separate():
    """Two equations on one evaluation (``which``, with or without secant slopes for one of
    them) give the roots of separate solves."""
    mu2 = 0.8

    def f_sep(k):
        def f(t):
            g = [mu2 * (2 * t + 1) / 2 - 1 / t - 1 / (1 + t),
                 mu2 * (2 * t + 1) / 2 + np.log(t) - np.log1p(t)]
            dg = [t * (mu2 + 1 / t ** 2 + 1 / (1 + t) ** 2), t * (mu2 + 1 / (t * (1 + t)))]
            return g[k], dg[k]
        return f

    def f_both(t, need):
        assert need.shape == (2, t.size) and need.any()
        g0, d0 = f_sep(0)(t)
        g1, d1 = f_sep(1)(t)
        return np.array([g0, g1]), np.array([d0, d1])

    eps = np.array([0.3, 2.0, 7.5, 40.0])
    tj, okj = solve_tilt(f_both, np.concatenate([eps, eps]), 1e-4, 64.0, 1e12,
                         which=np.repeat([0, 1], eps.size))
    # secant slopes for the first function: the same roots
    tsec, _ = solve_tilt(f_both, np.concatenate([eps, eps]), 1e-4, 64.0, 1e12,
                         which=np.repeat([0, 1], eps.size),
                         secant=np.repeat([True, False], eps.size))
    for k in (0, 1):
        ts, oks = solve_tilt(f_sep(k), eps, 1e-4, 64.0, 1e12)
        np.testing.assert_allclose(tj[k * eps.size:(k + 1) * eps.size], ts, rtol=1e-10)
        np.testing.assert_allclose(tsec[k * eps.size:(k + 1) * eps.size], ts, rtol=1e-10)
        assert np.array_equal(okj[k * eps.size:(k + 1) * eps.size], oks)


def test_solve_tilt_refine_same_roots_fewer_steps():
    """``refine`` (a fixed sub-grid in each bracketing cell) finds the roots of the plain
    solve (brentq on the closed form) with fewer evaluations, and evaluates the same sub-grid
    again for a target in the same cell."""
    from scipy.optimize import brentq

    mu2 = 0.3 ** 2 * 50
    calls: list[np.ndarray] = []

    def f(t):
        calls.append(t)
        g = mu2 * (2 * t + 1) / 2 - 1 / t - 1 / (1 + t)
        return g, t * (mu2 + 1 / t ** 2 + 1 / (1 + t) ** 2)

    out = {}
    for refine in (0, 8):
        calls.clear()
        t, ok = solve_tilt(f, [3.0, 28.9], 1e-4, 64.0, 1e12, refine=refine)
        out[refine] = (t, len(calls))
        for eps, tj in zip((3.0, 28.9), t, strict=True):
            ref = brentq(lambda x, e=eps: mu2 * (2 * x + 1) / 2 - 1 / x - 1 / (1 + x) - e,
                         1e-6, 1e3, xtol=1e-15, rtol=1e-15)
            assert ok.all() and abs(tj / ref - 1) < 1e-9
    sub = [c for c in calls if not c.flags.writeable and c.size == 8]
    assert sub, "the sub-grids are read-only arrays of the refine inner points"
    calls.clear()
    solve_tilt(f, [3.0 * (1 + 1e-9)], 1e-4, 64.0, 1e12, refine=8)
    assert any(c is s for c in calls for s in sub)  # the same (cached) sub-grid array


@pytest.mark.parametrize("k", [10, 1000, 100_000])
def test_exact_msd1_slope_vs_finite_difference(k):
    """With the fifth cumulant the slope of -log SP-MSD1 in log t is exact: against a central
    finite difference of the value itself (floats and arrays' forms)."""
    acc = SaddlePointAccountant().compose(PoissonSubsampled(Gaussian(1.0), 0.01), k)
    d = acc._dirs()[0]
    for t0 in (0.5, 2.0, 8.0):
        u, h = math.log(t0), 1e-5

        def val(uu):
            t = np.array([math.exp(uu)])
            st = d.stats(t)
            return saddle_log_delta_slope(st[:5], t, "msd1", st[6])

        fd = -(val(u + h)[0][0] - val(u - h)[0][0]) / (2 * h)
        slope = val(u)[1][0]
        t2 = np.array([t0, 1.1 * t0, 1.2 * t0])  # the arrays' form (more than two tilts)
        st = d.stats(t2)
        slope_arr = saddle_log_delta_slope(st[:5], t2, "msd1", st[6])[1][0]
        assert abs(slope - fd) <= 1e-6 * abs(fd)
        assert abs(slope_arr - slope) <= 1e-12 * abs(slope)
        # without K^(5) the slope leaves the correction out: a different number (where the
        # correction is used, i.e. not the SP-MSD0 fallback)
        if not saddle_log_delta(st[:5], t2, None, "msd1")[2][0]:
            assert saddle_log_delta_slope(st[:5], t2, "msd1")[1][0] != slope_arr


def test_scan_table_same_brackets_as_scan():
    """The kept-table bracketing (``solve_tilt(..., refine, memo)``) gives the brackets, hence
    the roots, of the plain scan, for functions that rise and fall (the first crossing), and
    a second solve reads the table instead of calling f on the grid again."""
    def make(calls):
        def f(t, need):
            calls.append(t)
            u = np.log(t)
            g = np.array([u + 0.8 * np.sin(3.0 * u), 2.0 * u])
            dg = np.array([1.0 + 2.4 * np.cos(3.0 * u), np.full_like(u, 2.0)])
            return g, dg
        return f

    targets = np.array([-3.0, 0.9, 2.5, 1.0])
    which = np.array([0, 0, 0, 1])
    plain, _ = solve_tilt(make([]), targets, 1e-4, 64.0, 1e12, which=which, refine=32)
    memo: dict = {}
    first, _ = solve_tilt(make([]), targets, 1e-4, 64.0, 1e12, which=which, refine=32,
                          memo=memo)
    np.testing.assert_array_equal(first, plain)
    calls: list = []
    again, _ = solve_tilt(make(calls), targets, 1e-4, 64.0, 1e12, which=which, refine=32,
                          memo=memo)
    np.testing.assert_array_equal(again, plain)
    assert all(c.flags.writeable or c.size == 32 for c in calls)  # no grid piece again
    # the first crossing of the rising and falling row: below the later ones
    u = np.log(plain[0])
    assert abs(u + 0.8 * math.sin(3.0 * u) + 3.0) < 1e-9
