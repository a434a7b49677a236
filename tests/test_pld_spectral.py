"""The composition evaluated at a few frequencies (tightdp.pld.spectral) and the PRV accountant
on it.

Truth from outside the code under test: direct sums for the chirp transform, the mu-GDP
closed form in mpmath (tests/oracle.py) for compositions of Gaussians, the FFT engine's own
certified bounds on the same discretized laws, and the certified PLD accountant (another
discretization) for subsampled Gaussians at tiny delta.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import oracle
from tightdp import Gaussian, PLDAccountant, PoissonSubsampled, PRVAccountant
from tightdp.pld import compose_grid_chernoff
from tightdp.pld.spectral import SpectralPLD, compose_spectral, dtft_low


@pytest.mark.parametrize("n_circle", [1009, 123_457, 33_184_501])
def test_dtft_low_matches_direct_sums(n_circle):
    rng = np.random.default_rng(1)
    x = rng.random(3000)
    m = 40
    got = dtft_low(x, n_circle, m)
    r = np.arange(x.size)
    want = np.array([np.sum(x * np.exp(-2j * np.pi * ((j * r) % n_circle) / n_circle))
                     for j in range(m)])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.sum(x)


def _pieces(mech, steps, eps_error=0.1, direction=0):
    acc = PRVAccountant(eps_error=eps_error).compose(mech, steps)
    return acc._plan(1e-10, eps_error, direction)["pieces"]


@pytest.mark.parametrize("lam", [0.0, 1.0, 3.0])
def test_spectral_bounds_bracket_the_fft_engines(lam):
    """Same discretized laws, same window rule: the two certified brackets on the composed
    discrete curve must intersect, and the spectral one is about as narrow (measured: at
    most 2x the FFT's, at eps far below a strong tilt's centre, where both allowances are
    scaled up by e^{-lam eps})."""
    pieces = _pieces(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000)
    log_tail = math.log(1e-11)
    c = compose_grid_chernoff(pieces, log_tail=log_tail, lam=lam)
    s = compose_spectral(pieces, log_tail=log_tail, lam=lam)
    assert isinstance(s, SpectralPLD) and s.spectrum.size <= 1025
    eps = np.array([0.5, 1.0, 2.0, 4.0])
    su, sl = s.delta_bound(eps, upper=True), s.delta_bound(eps, upper=False)
    cu, cl = c.delta_bound(eps, upper=True), c.delta_bound(eps, upper=False)
    assert np.all(sl <= su)
    assert np.all(np.maximum(sl, cl) <= np.minimum(su, cu))
    assert np.all(su - sl <= 3.0 * (cu - cl) + 1e-13)


def test_spectral_refuses_few_steps():
    """One step: the transform does not decay, no tail bound: None (the caller uses FFT)."""
    pieces = _pieces(Gaussian(1.0), 1)
    assert compose_spectral(pieces, log_tail=math.log(1e-11)) is None


@pytest.mark.parametrize("delta", [1e-5, 1e-15, 1e-40])
def test_prv_spectral_gaussian_against_gdp(delta):
    """10^4 Gaussian steps at sigma 50: mu = 2-GDP (closed form, mpmath). The spectral path is
    forced (spectral_above=0) and must be used; the certified bracket holds the truth and is
    within 2 eps_error (plus the delta shift's share)."""
    sigma, steps, eps_error = 50.0, 10_000, 0.01
    truth = float(oracle.gaussian_epsilon(sigma, steps, delta))
    acc = PRVAccountant(eps_error=eps_error, spectral_above=0).compose(Gaussian(sigma), steps)
    r = acc.epsilon(delta)
    assert r.details.get("frequencies", 0) > 0
    assert r.lower <= truth <= r.upper
    assert r.upper - r.lower <= 2.2 * eps_error
    # the FFT path on the same laws gives a bracket that intersects it
    f = PRVAccountant(eps_error=eps_error, spectral_above=1 << 40).compose(Gaussian(sigma),
                                                                          steps).epsilon(delta)
    assert "frequencies" not in f.details
    assert max(r.lower, f.lower) <= min(r.upper, f.upper)


def test_prv_spectral_delta_of_eps_against_gdp():
    sigma, steps = 50.0, 10_000
    mu = math.sqrt(steps) / sigma
    acc = PRVAccountant(eps_error=0.01, spectral_above=0).compose(Gaussian(sigma), steps)
    eps = np.array([0.5, 2.0, 6.0, 12.0])
    r = acc.delta(eps)
    truth = np.array([float(oracle._gdp_delta(mu, e)) for e in eps])
    assert r.details.get("frequencies", 0) > 0
    assert np.all(r.lower <= truth) and np.all(truth <= r.upper)


def test_prv_tiny_delta_issue_workload():
    """Issue 17's PRV workload at the default eps_error 0.01 (an FFT of 3.3e7 points, which
    the default budget refuses): evaluated spectrally, its bracket within 2 eps_error and
    consistent with the certified PLD accountant's."""
    mech = PoissonSubsampled(Gaussian(0.45), 0.3)
    r = PRVAccountant().compose(mech, 2000).epsilon(1e-15)
    assert r.details["frequencies"] > 0 and r.details["fft_points"] > 3e7
    assert r.upper - r.lower <= 0.02 + 1e-9
    ref = PLDAccountant(1e-4).compose(mech, 2000).epsilon(1e-15)
    assert max(r.lower, ref.lower) <= min(r.upper, ref.upper)


def test_prv_spectral_long_run_moderate_delta_is_tight():
    """10^5 steps at q = 1e-3, delta = 1e-8: the untilted few-frequency evaluation carries a
    rounding allowance of about 2e-9 (k times the transform's error), a fifth of delta, so
    the query is answered on tilted compositions; the bracket stays within 2 eps_error and
    meets the PLD accountant's."""
    mech = PoissonSubsampled(Gaussian(1.0), 1e-3)
    acc = PRVAccountant(eps_error=0.02, spectral_above=0).compose(mech, 100_000)
    r = acc.epsilon(1e-8)
    assert r.details["frequencies"] > 0 and r.details["tilt"] > 0
    assert r.upper - r.lower <= 0.04 + 1e-9
    ref = PLDAccountant(1e-4).compose(mech, 100_000).epsilon(1e-8)
    assert max(r.lower, ref.lower) <= min(r.upper, ref.upper)


def test_prv_billion_gaussian_steps():
    """10^9 Gaussian steps at sigma = 10^4 (mu = sqrt(10) GDP): a Chernoff window of 5e8
    points, far beyond any FFT the budget allows, evaluated at a few frequencies; the
    bracket holds the mpmath value and is within 2 eps_error."""
    truth = float(oracle.gaussian_epsilon(1e4, 1e9, 1e-5))
    r = PRVAccountant().compose(Gaussian(1e4), 10**9).epsilon(1e-5)
    assert r.details["frequencies"] > 0 and r.details["fft_points"] > 1e8
    assert r.lower <= truth <= r.upper and r.upper - r.lower <= 0.02 + 1e-9
