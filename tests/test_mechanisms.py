"""Mechanisms: their privacy losses against closed forms and mpmath quadrature."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import tightdp as td


def gdp_delta(mu: float, eps: float) -> float:
    """mu-GDP curve (Balle & Wang 2018, Thm 8), in mpmath."""
    with mp.workdps(50):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        return float(mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2))


def hockey_stick(p, q, eps: float, lo: float, hi: float) -> float:
    """int (p(x) - e^eps q(x))_+ dx by mpmath quadrature over the region where the integrand
    is positive (an interval for these monotone-loss pairs; its end is found by bisection)."""
    with mp.workdps(40):
        e = mp.e ** mp.mpf(eps)

        def g(x):
            return p(x) - e * q(x)

        xs = [mp.mpf(x) for x in np.linspace(lo, hi, 2001)]
        pos = [g(x) > 0 for x in xs]
        pieces = []
        for i in range(len(xs) - 1):
            if pos[i] != pos[i + 1]:  # refine the sign change
                a, b = xs[i], xs[i + 1]
                for _ in range(120):
                    m = (a + b) / 2
                    if (g(m) > 0) == pos[i]:
                        a = m
                    else:
                        b = m
                pieces.append(a)
        edges = [mp.mpf(lo)] + pieces + [mp.mpf(hi)]
        total = mp.mpf(0)
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if g((a + b) / 2) > 0:
                total += mp.quad(g, [a, b])
        return float(total)


def npdf(x, m, s):
    return mp.npdf(x, m, s)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("eps", [0.0, 0.5, 3.0])
def test_gaussian_delta_closed_form(sigma, eps):
    got = float(td.Gaussian(sigma).delta(eps))
    assert got == pytest.approx(gdp_delta(1 / sigma, eps), rel=1e-12, abs=1e-300)


def test_gaussian_tails_in_log_space():
    loss, _ = td.Gaussian(1.0).privacy_losses()
    # P(Y > 40) for Y ~ N(1/2, 1): log sf is finite and right
    ls = float(loss.logp_sf(np.array(40.0)))
    assert math.isfinite(ls)
    assert ls == pytest.approx(float(mp.log(mp.ncdf(-(40 - 0.5)))), rel=1e-12)
    # delta near 1e-185 keeps its relative accuracy
    d = float(td.Gaussian(0.5).delta(60.0))
    assert 0 < d < 1e-150 and d == pytest.approx(gdp_delta(2.0, 60.0), rel=1e-9)


@pytest.mark.parametrize("q,sigma,eps", [(0.01, 1.0, 0.5), (0.1, 0.8, 1.0), (0.5, 2.0, 0.2)])
def test_poisson_subsampled_both_directions_vs_mpmath(q, sigma, eps):
    mech = td.PoissonSubsampled(td.Gaussian(sigma), q)
    rem, add = mech.privacy_losses()

    def p(x):
        return (1 - q) * npdf(x, 0, sigma) + q * npdf(x, 1, sigma)

    def q0(x):
        return npdf(x, 0, sigma)

    want_rem = hockey_stick(p, q0, eps, -12 * sigma, 1 + 12 * sigma)
    want_add = hockey_stick(q0, p, eps, -12 * sigma, 1 + 12 * sigma)
    assert float(rem.delta(eps)) == pytest.approx(want_rem, rel=1e-9)
    assert float(add.delta(eps)) == pytest.approx(want_add, rel=1e-9)
    assert float(mech.delta(eps)) == pytest.approx(max(want_rem, want_add), rel=1e-9)


def test_reference_single_step_case_A22(reference_cases):
    case = next(c for c in reference_cases if c["id"] == "A22")
    m = case["mechanism"]
    got = float(td.PoissonSubsampled(td.Gaussian(m["sigma"]), m["q"]).delta(
        case["query"]["eps"]))
    assert case["lower"] * (1 - 1e-12) <= got <= case["upper"] * (1 + 1e-12)


def test_laplace_delta_closed_form():
    # delta(eps) of Laplace with scale b, sensitivity 1: 1 - exp((eps - 1/b)/2) for eps < 1/b
    for b, eps in [(1.0, 0.5), (2.0, 0.1)]:
        want = 1 - math.exp((eps - 1 / b) / 2)
        assert float(td.Laplace(b).delta(eps)) == pytest.approx(want, rel=1e-12)


def test_cdfs_are_consistent():
    for mech in [td.PoissonSubsampled(td.Gaussian(0.7), 0.05), td.Laplace(1.0),
                 td.MixtureOfGaussians([0, 1, 2], [0.9, 0.09, 0.01], 1.0),
                 td.SampledWithoutReplacement(td.Gaussian(1.0), 0.1),
                 td.PoissonSubsampled(td.Laplace(0.5), 0.2)]:
        for loss in mech.privacy_losses():
            y = np.linspace(-3, 3, 13)
            assert np.allclose(loss.p_cdf(y) + loss.p_sf(y), 1.0, atol=1e-12)
            assert np.allclose(loss.q_cdf(y) + loss.q_sf(y), 1.0, atol=1e-12)
            assert np.all(np.diff(loss.p_cdf(y)) >= -1e-15)


def test_mixture_of_gaussians_two_components_is_poisson_subsampled():
    mog = td.MixtureOfGaussians([0.0, 1.0], [0.99, 0.01], 1.0)
    ps = td.PoissonSubsampled(td.Gaussian(1.0), 0.01)
    eps = np.array([0.01, 0.3, 1.0, 2.0])
    assert np.allclose(mog.delta(eps), ps.delta(eps), rtol=1e-10, atol=0)


def test_randomized_response_and_pure_dp():
    rr = td.RandomizedResponse(eps=1.0, num_values=2)
    assert rr.eps == pytest.approx(1.0)
    # eps-DP randomized response has delta(eps) = 0 and delta(0) = tanh(eps/2)
    assert float(rr.delta(1.0)) == pytest.approx(0.0, abs=1e-15)
    assert float(td.PureDP(1.0).delta(0.0)) == pytest.approx(math.tanh(0.5), rel=1e-12)
    ad = td.ApproxDP(1.0, 1e-3)
    assert ad.delta0 == 1e-3
    assert float(ad.delta(1.0)) == pytest.approx(1e-3, rel=1e-12)
    assert float(ad.delta(50.0)) == pytest.approx(1e-3, rel=1e-12)


@pytest.mark.parametrize("make", [
    lambda: td.Gaussian(0.0), lambda: td.Gaussian(-1.0), lambda: td.Gaussian(float("nan")),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), 0.0),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), 1.5),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), float("nan")),
    lambda: td.Laplace(0.0), lambda: td.PureDP(-1.0), lambda: td.ApproxDP(1.0, 1.0),
    lambda: td.RandomizedResponse(1.5, 4), lambda: td.MixtureOfGaussians([-1.0], [1.0], 1.0),
    lambda: td.MixtureOfGaussians([0.0, 1.0], [0.5, 0.6], 1.0),
    lambda: td.SampledWithReplacement(td.Gaussian(1.0), 10, 5),
])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_error_names_parameter_and_range():
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\]"):
        td.PoissonSubsampled(td.Gaussian(1.0), 2.0)
    with pytest.raises(ValueError, match=r"sigma must be in \(0, inf\)"):
        td.Gaussian(0.0)
