"""The PLD engine: discretizers bound the curve from the right side, and composition is exact
for the discrete laws (the accountant built on it: test_accountants_pld.py)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import tightdp as td
from tightdp.pld import DiscretePLD, compose, connect_the_dots, dominated, loss_range
from tightdp.pld.discretize import certified_pair, certified_pairs


@pytest.mark.parametrize("mech", [td.PoissonSubsampled(td.Gaussian(1.0), 0.01),
                                  td.Laplace(1.0), td.RandomizedResponse(0.5, 3),
                                  td.MixtureOfGaussians([0, 1, 2], [0.9, 0.09, 0.01], 0.8)])
@pytest.mark.parametrize("d", [1e-2, 1e-3])
def test_single_step_discretizations_bracket_the_curve(mech, d):
    eps = np.linspace(-0.5, 3.0, 36)
    for loss in mech.privacy_losses():
        lo, hi = loss_range(loss, math.log(1e-30))
        up = connect_the_dots(loss, d, lo, hi)
        dn = dominated(loss, d, lo, hi)
        true = loss.delta(eps)
        # up to floating-point summation over ~1e4 atoms (1e-11 relative); the accountants
        # inflate their upper bounds by 1e-10 relative to cover exactly this
        assert np.all(up.delta(eps) >= true * (1 - 1e-11) - 1e-15)
        assert np.all(dn.delta(eps) <= true * (1 + 1e-11) + 1e-15)
        # both are probability laws (P-mass 1 with the mass at +inf)
        assert up.probs.sum() + up.inf_mass == pytest.approx(1.0, abs=1e-12)
        assert dn.probs.sum() + dn.inf_mass <= 1.0 + 1e-12
        # dominating pair: the Q-mass it implies is at most 1
        assert np.sum(up.probs * np.exp(-up.ys)) <= 1.0 + 1e-12


MECHS = [td.PoissonSubsampled(td.Gaussian(1.0), 0.01),
         td.PoissonSubsampled(td.Gaussian(3.0), 0.001),
         td.PoissonSubsampled(td.Gaussian(0.3), 0.3),
         td.PoissonSubsampled(td.Laplace(1.0), 0.1),
         td.Gaussian(0.5), td.Laplace(1.0), td.RandomizedResponse(0.5, 3), td.PureDP(1.0),
         td.ApproxDP(1.0, 1e-3), td.MixtureOfGaussians([0, 1, 2], [0.9, 0.09, 0.01], 0.8)]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: repr(m)[:40])
@pytest.mark.parametrize("d", [1e-2, 1e-3, pytest.param(1e-4, marks=pytest.mark.slow)])
def test_certified_pair_brackets_the_curve_and_is_a_pair(mech, d):
    for loss in mech.privacy_losses():
        lo, hi = loss_range(loss, math.log(1e-30))
        up, dn = certified_pair(loss, d, lo, hi)
        # the curve at every grid point of both laws and on a fine range, negative eps too
        eps = np.unique(np.concatenate([np.linspace(-3.0, 5.0, 801), up.ys, up.ys + d / 3]))
        true = loss.delta(eps)
        assert np.all(up.delta(eps) >= true * (1 - 1e-11) - 1e-15)
        assert np.all(dn.delta(eps) <= true * (1 + 1e-11) + 1e-15)
        # the lower law is a pair dominated by the true one: P-mass 1 (with +inf), Q-mass
        # at most 1 (apart from the top atom rounded down, whose Q-mass only grows)
        assert np.all(dn.probs >= 0)
        assert dn.probs.sum() + dn.inf_mass == pytest.approx(1.0, abs=1e-12)
        assert dn.inf_mass <= loss.inf_mass + 1e-15
        if dn.meta["kind"] == "lowered_chords":
            q = np.sum(dn.probs[:-1] * np.exp(-dn.ys[:-1]))
            assert q <= 1.0 - loss.neg_inf_mass + 1e-12


@pytest.mark.parametrize("mech", [td.PoissonSubsampled(td.Gaussian(1.0, 0.37), 0.01),
                                  td.PoissonSubsampled(td.Gaussian(2.0), 0.1)],
                         ids=["q=0.01", "q=0.1"])
def test_certified_pairs_are_certified_pair_at_each_step(mech):
    """Several grid steps from one evaluation of the CDFs (on the finest grid, the others
    power-of-two multiples of it, one step not) give certified_pair's laws bit for bit."""
    d = 3.7e-4
    steps = [d, d / 2, d / 8, d / 3]
    for loss in mech.privacy_losses():
        lo, hi = loss_range(loss, math.log(1e-20))
        for step, (up, dn) in zip(steps, certified_pairs(loss, steps, lo, hi), strict=True):
            up1, dn1 = certified_pair(loss, step, lo, hi)
            for a, b in ((up, up1), (dn, dn1)):
                assert (a.d, a.offset, a.inf_mass, a.shift) == (b.d, b.offset, b.inf_mass,
                                                                b.shift)
                assert a.probs.tobytes() == b.probs.tobytes()


@pytest.mark.parametrize("lam", [1.0, 3.0])
def test_certified_pair_cgf_error_is_second_order(lam):
    """Per step, connect-the-dots raises K(lam) = log E_P[e^{lam Y}] by lam(lam+1)d^2/12 and the
    lowered chords lower it by about 0.6 of that on this loss (the refined tents of the
    intervals where it concentrates; it was about twice that with single tents: module
    docstring of tightdp.pld.discretize); the exact K comes from quadrature over the output,
    independent of the discretizers."""
    from scipy import integrate

    q = 0.01
    loss = td.PoissonSubsampled(td.Gaussian(1.0), q).privacy_losses()[0]

    def f(x):
        return math.exp(-x * x / 2) / math.sqrt(2 * math.pi) * (1 - q + q * math.exp(x - 0.5)) \
            ** (lam + 1)

    k_exact = math.log(integrate.quad(f, -40, 40, epsabs=0, epsrel=1e-13, limit=500)[0])
    lo, hi = loss_range(loss, math.log(1e-30))
    for d in (1e-3, 2.5e-4):
        up, dn = certified_pair(loss, d, lo, hi)
        unit = lam * (lam + 1) * d * d / 12
        assert dn.meta["kind"] == "lowered_chords"
        assert (up.log_mgf(lam)[0] - k_exact) / unit == pytest.approx(1.0, abs=0.02)
        assert -0.7 <= (dn.log_mgf(lam)[0] - k_exact) / unit <= -0.5


def test_composition_matches_direct_convolution():
    rng = np.random.default_rng(0)
    a = DiscretePLD(0.1, -3, rng.random(7) / 10, 0.01)
    b = DiscretePLD(0.1, 2, rng.random(4) / 5, 0.0)
    c = compose([(a, 3), (b, 2)], log_tail=-200)
    direct = np.convolve(np.convolve(np.convolve(a.probs, a.probs), a.probs),
                         np.convolve(b.probs, b.probs))
    off = 3 * a.offset + 2 * b.offset
    ys = (off + np.arange(direct.size)) * 0.1
    inf = 1 - (1 - 0.01) ** 3
    eps = np.array([-0.5, 0.0, 0.3, 1.0])
    want = np.array([inf + np.sum(direct[ys > e] * (1 - np.exp(e - ys[ys > e]))) for e in eps])
    assert np.allclose(c.delta_bound(eps, upper=True), want, rtol=1e-10, atol=1e-15)
    assert np.allclose(c.delta_bound(eps, upper=False), want, rtol=1e-10, atol=1e-15)


def test_atom_log_mgf_on_a_long_geometric_law_matches_closed_form():
    """The one discrete log-MGF, on 2^20 + 3 atoms ``y_i = i h`` with ``p_i`` proportional to
    ``e^{-2 y_i}`` (long enough that it works in blocks of rows): ``K(t) = log S(t - 2) -
    log S(-2)`` with the geometric sum ``S(a) = (1 - e^{a h n}) / (1 - e^{a h})``, in mpmath;
    and ``DiscretePLD.log_mgf`` is the same function."""
    from tightdp.pld.grid import atom_log_mgf

    n, h = (1 << 20) + 3, 1e-5
    ys = np.arange(n) * h
    ts = np.array([-3.0, -1.0, 0.0, 1.0, 2.5, 5.0, 10.0, 50.0])
    with mp.workdps(40):
        def log_sum(a):  # log sum_{i < n} e^{a i h}
            return mp.log((1 - mp.exp(a * h * n)) / (1 - mp.exp(a * h)))

        log_z = log_sum(mp.mpf(-2))
        exact = [float(log_sum(mp.mpf(t) - 2) - log_z) for t in ts]
    log_p = -2.0 * ys - float(log_z)
    got = atom_log_mgf(ys, log_p, ts)
    assert np.allclose(got, exact, rtol=1e-13, atol=1e-13)
    assert abs(got[2]) <= 1e-13  # K(0) = log of the total mass, 1
    pld = DiscretePLD(h, 0, np.exp(log_p))
    assert np.allclose(pld.log_mgf(ts), got, rtol=1e-14, atol=1e-14)


# --- issue 17: the grid-point bound and the coarse loss range -------------------------------
@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_grid_bound_is_delta_bound_at_the_grid_points(lam):
    """ComposedPLD.grid_bound (closed form at grid points, no search) against delta_bound
    evaluated at the same points, both directions, whole window and slices of it."""
    loss = td.PoissonSubsampled(td.Gaussian(0.8), 0.05).privacy_losses()[0]
    lo, hi = loss_range(loss, -40.0)
    c = compose([(connect_the_dots(loss, 0.01, lo, hi), 300)], lam=lam, log_tail=-40.0)
    ys = c.ys
    for upper in (True, False):
        ref = c.delta_bound(ys, upper=upper)
        first, gy, got = c.grid_bound(upper=upper)
        np.testing.assert_array_equal(gy, ys[first:])
        np.testing.assert_allclose(got, ref[first:], rtol=1e-12, atol=1e-300)
        for a, b in ((0, 7), (ys.size // 2, ys.size // 2 + 3), (ys.size - 2, ys.size)):
            first, gy, part = c.grid_bound(a, b, upper=upper)
            assert first == a and gy.size == b - a
            np.testing.assert_allclose(part, ref[a:b], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("mech", [td.PoissonSubsampled(td.Gaussian(1.0), 0.01),
                                  td.PoissonSubsampled(td.Gaussian(0.5), 1e-5),
                                  td.Gaussian(2.0), td.Laplace(1.0)])
def test_coarse_loss_range_is_on_the_safe_side(mech):
    """loss_range(coarse=True): each tail beyond the range holds at most e^log_tail (checked
    on the loss's own CDFs) and the range is within 1e-3 of the bisected one."""
    for loss in mech.privacy_losses():
        for log_tail in (-25.0, -80.0):
            lo, hi = loss_range(loss, log_tail, coarse=True)
            lo_x, hi_x = loss_range(loss, log_tail)
            s_lo, s_hi = loss.support  # a finite end is returned as it is (nothing beyond)
            if math.isfinite(s_lo):
                assert lo == s_lo
            else:
                assert float(loss.logp_cdf(np.asarray(lo))) <= log_tail
            if math.isfinite(s_hi):
                assert hi == s_hi
            else:
                fin_sf = float(loss.p_sf(np.asarray(hi))) - loss.inf_mass
                assert fin_sf <= math.exp(log_tail) * (1 + 1e-9)
            assert lo <= lo_x + 1e-12 and hi >= hi_x - 1e-12
            assert (hi - lo) <= (hi_x - lo_x) * (1 + 1e-3) + 1e-9


@pytest.mark.parametrize("extended", [False, True])
def test_rounding_bound_holds_against_exact_binomial(extended):
    """The FFT's rounding bound (``log_noise``) against an exact composition: a law with
    atoms 1 - p at 0 and p at 1 composed k times is Binomial(k, p), whose pmf scipy computes
    to ~1e-15 relative (p = 2^-17, so that 1 - p and the normalization are exact in double:
    the engine composes exactly that law). At k = 10^6 (issue 17's tiny-q regime: a near point mass
    composed a million times) the double transform's error is amplified k-fold; every
    point's error must stay within the bound, and the extended-precision composition's bound
    must be at least 100 times smaller (x86-64's long double; skipped where long double is
    double)."""
    from scipy.stats import binom

    from tightdp.pld.transform import UNIT_ROUNDOFF_EXTENDED

    if extended and not UNIT_ROUNDOFF_EXTENDED < 2.0 ** -53:
        pytest.skip("long double is double on this platform")
    k, p = 10**6, 2.0**-17
    law = DiscretePLD(0.5, 0, np.array([1.0 - p, p]))
    outs = {}
    for ext in {False, extended}:
        c = compose([(law, k)], log_tail=-200.0, extended=ext)
        got = c.probs * math.exp(c.log_scale)
        exact = binom.pmf(c.offset + np.arange(c.probs.size), k, p)
        err = float(np.max(np.abs(got - exact)))
        bound = math.exp(c.log_noise + c.log_scale)
        assert err <= bound, (ext, err, bound)
        outs[ext] = (err, bound)
    if extended:
        assert outs[True][1] <= outs[False][1] / 100.0, outs
        assert outs[True][0] < outs[False][0], outs


def test_capped_untilt_gives_trivial_bounds():
    """A strongly tilted composition's masses far below its centre overflow when untilted
    (capped at e^700): there the sums are not the law's, so both bounds are the trivial
    ones (upper 1, lower 0) and no overflow warning escapes; above the capped region the
    bounds are those of the untilted law (a hand-built binomial law, closed form)."""
    import warnings

    from scipy.stats import binom

    from tightdp.pld.compose import ComposedPLD

    n, d, lam, log_scale = 2000, 1.0, 1.0, 800.0
    ys = np.arange(n + 1) * d
    pmf = binom.pmf(np.arange(n + 1), n, 0.5)
    # the tilted values (original = tilted e^{log_scale - lam y}) with an FFT's rounding
    # floor of 1e-20: untilted below y ~ 54 it exceeds e^700
    tilted = np.exp(binom.logpmf(np.arange(n + 1), n, 0.5) + lam * ys - log_scale) + 1e-20
    c = ComposedPLD(d, 0, tilted, 0.0, lam, log_scale, -math.inf, -math.inf, -math.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low_eps = np.array([5.0, 50.0])  # masses there untilt to e^{~795} and more: capped
        assert np.all(c.delta_bound(low_eps, upper=True) == 1.0)
        assert np.all(c.delta_bound(low_eps, upper=False) == 0.0)
        first, gy, g_up = c.grid_bound(upper=True)
        assert np.all(g_up[gy < 90.0] == 1.0)
        eps = np.array([1000.0, 1050.0])
        exact = [np.sum(pmf[ys > e] * (1 - np.exp(e - ys[ys > e]))) for e in eps]
        np.testing.assert_allclose(c.delta_bound(eps, upper=True), exact, rtol=1e-9)
        np.testing.assert_allclose(c.delta_bound(eps, upper=False), exact, rtol=1e-9)
