"""Tests of the mu-GDP functions (tightdp.curves.gdp) and the GDPAccountant.

References: mpmath evaluation of the mu-GDP curve in 60 digits, closed-form reference cases
(B01, B02, B03, B06, A21 in tests/data/reference_cases.json) and round trips.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tightdp as t
from conftest import case_by_id, relation_for
from tightdp.curves.gdp import compose_mu, gdp_delta, gdp_epsilon, gdp_log_delta, gdp_mu

mp = pytest.importorskip("mpmath")



def _mp_delta(mu, eps):
    mp.mp.dps = 80
    m, e = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)


@pytest.mark.parametrize("mu", [0.01, 0.1, 0.5, 1.0, 3.0, 10.0, 30.0])
def test_gdp_delta_vs_mpmath(mu):
    eps = np.concatenate([[0.0], np.geomspace(1e-3, 50, 25), [100.0, 400.0]])
    ours = gdp_delta(mu, eps)
    for e, d in zip(eps, ours, strict=True):
        ref = _mp_delta(mu, e)
        if ref < mp.mpf("1e-300"):
            # below the smallest normal double: the log must still be right
            lref = float(mp.log(ref))
            assert gdp_log_delta(mu, e) == pytest.approx(lref, rel=1e-12)
            continue
        assert d == pytest.approx(float(ref), rel=1e-11), (mu, e)


def test_gdp_delta_tiny_and_huge_eps():
    # delta near 1e-300 keeps full relative accuracy; no overflow for large eps
    mu = 1.0
    e = gdp_epsilon(mu, 1e-300)
    assert gdp_delta(mu, e) == pytest.approx(1e-300, rel=1e-9)
    with np.errstate(over="raise", invalid="raise"):
        assert gdp_delta(2.0, 1e4) == 0.0
        assert gdp_log_delta(2.0, 1e4) == pytest.approx(float(mp.log(_mp_delta(2.0, 1e4))),
                                                        rel=1e-12)
    # negative eps are valid curve queries: delta(-eps) = 1 - e^{-eps} (1 - delta(eps))
    for x in (0.3, 2.0):
        lhs = gdp_delta(1.0, -x)
        rhs = 1 - math.exp(-x) * (1 - gdp_delta(1.0, x))
        assert lhs == pytest.approx(rhs, rel=1e-12)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 2.0, 5.0])
def test_round_trip_eps_delta_eps(mu):
    # eps(delta(eps)) = eps to 1e-10 relative over eps in [1e-3, 50]. (For mu >~ 8 and tiny
    # eps the problem itself is ill-conditioned: delta(eps) ~ 1 - 6e-7 is flat in eps.)
    for e in np.geomspace(1e-3, 50, 30):
        d = gdp_delta(mu, e)
        if not 1e-300 < d < 1:
            continue
        assert gdp_epsilon(mu, d) == pytest.approx(e, rel=1e-10), (mu, e, d)


@pytest.mark.parametrize("eps,delta", [(0.0, 0.3), (0.1, 1e-5), (1.0, 1e-5), (8.0, 1e-12),
                                       (40.0, 1e-200)])
def test_round_trip_mu(eps, delta):
    m = gdp_mu(eps, delta)
    assert gdp_delta(m, eps) == pytest.approx(delta, rel=1e-10)
    assert gdp_epsilon(m, delta) == pytest.approx(eps, rel=1e-9, abs=1e-12)


def test_epsilon_zero_when_delta_large():
    d0 = 2 * float(mp.ncdf(0.5)) - 1  # delta(0) for mu = 1
    assert gdp_epsilon(1.0, d0 * 1.0001) == 0.0
    assert gdp_epsilon(1.0, d0 * 0.999) > 0.0


def test_composition_closed_form_b06_b01():
    acc = t.GDPAccountant()
    for s in range(1, 11):
        acc.compose(t.Gaussian(float(s)))
    r = acc.epsilon(1e-5)
    assert r.epsilon == pytest.approx(5.652299493162052, rel=1e-13)
    assert r.certified and r.lower == r.upper == r.epsilon
    b06 = case_by_id("B06")
    assert b06["lower"] - 1e-12 <= r.epsilon <= b06["upper"] + 1e-12
    assert compose_mu([1 / s for s in range(1, 11)]) == pytest.approx(acc.mu, rel=1e-15)
    r1 = t.GDPAccountant().compose(t.Gaussian(1.0)).epsilon(1e-5)
    assert r1.epsilon == pytest.approx(case_by_id("B01")["best"], rel=1e-13)


@pytest.mark.parametrize("cid", ["B01", "B02", "B03", "A21"])
def test_gaussian_reference_cases(cid):
    c = case_by_id(cid)
    m = c["mechanism"]
    mech = t.Gaussian(m["sigma"] * m["sensitivity"], m["sensitivity"])
    if m["kind"] == "poisson_subsampled_gaussian":
        mech = t.PoissonSubsampled(mech, m["q"])  # q = 1: exactly the Gaussian mechanism
    acc = t.GDPAccountant().compose(mech, m["steps"])
    qy = c["query"]
    if qy["type"] == "eps_at_delta":
        r = acc.epsilon(qy["delta"])
        val = r.epsilon
    else:
        r = acc.delta(qy["eps"])
        val = float(r.delta)
    assert r.certified
    assert val == pytest.approx(c["best"], rel=1e-12)


def test_clt_is_labelled_as_approximation():
    c = case_by_id("A03")  # q=0.01, sigma=1, 10^4 steps, delta=1e-5: true eps ~ 6.1877
    m = c["mechanism"]
    acc = t.GDPAccountant().compose(t.PoissonSubsampled(t.Gaussian(m["sigma"]), m["q"]),
                                    m["steps"])
    r = acc.epsilon(c["query"]["delta"])
    assert not r.certified and r.lower is None and r.upper is None
    assert "approximation" in r.note and "under-report" in r.note
    # mu = q sqrt(T (e^{1/sigma^2} - 1)) (Bu et al. 2020)
    assert r.details["mu"] == pytest.approx(0.01 * math.sqrt(1e4 * math.expm1(1.0)), rel=1e-14)
    # ... and here it indeed under-reports: below the certified lower bound of the true eps
    assert r.epsilon < c["lower"]
    d = acc.delta(np.array([1.0, 2.0]))
    assert not d.certified and d.lower is None and d.delta.shape == (2,)


def test_mixed_exact_and_clt_is_not_certified():
    acc = t.GDPAccountant().compose(t.Gaussian(3.0), 5)
    assert acc.epsilon(1e-6).certified
    acc.compose(t.PoissonSubsampled(t.Gaussian(1.0), 0.1), 10)
    assert not acc.epsilon(1e-6).certified


def test_delta_vectorized_and_empty():
    acc = t.GDPAccountant().compose(t.Gaussian(2.0), 4)  # mu = 1
    eps = np.array([0.0, 0.5, 1.0, 3.0])
    r = acc.delta(eps)
    np.testing.assert_allclose(r.delta, [float(_mp_delta(1.0, e)) for e in eps], rtol=1e-12)
    empty = t.GDPAccountant()
    assert empty.epsilon(1e-5).epsilon == 0.0
    assert float(empty.delta(0.5).delta) == 0.0


@pytest.mark.parametrize("mech", [
    t.Laplace(1.0), t.PureDP(1.0), t.RandomizedResponse(0.5, 3),
    t.PoissonSubsampled(t.Laplace(1.0), 0.1), t.SampledWithoutReplacement(t.Gaussian(1.0), 0.1),
    t.MixtureOfGaussians([0.0, 1.0], [0.5, 0.5], 1.0),
])
def test_unsupported_mechanisms_raise(mech):
    with pytest.raises(ValueError, match=f"^GDPAccountant .*{type(mech).__name__}"):
        t.GDPAccountant(neighboring=relation_for([mech])).compose(mech)


def test_bad_inputs():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="mu"):
            gdp_delta(bad, 1.0)
        with pytest.raises(ValueError, match="mu"):
            gdp_epsilon(bad, 1e-5)
    for bad in (0.0, 1.0, 2.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            gdp_epsilon(1.0, bad)
        with pytest.raises(ValueError, match="delta"):
            gdp_mu(1.0, bad)
    with pytest.raises(ValueError, match="eps"):
        gdp_mu(-1.0, 1e-5)
    with pytest.raises(ValueError, match="eps"):
        gdp_delta(1.0, float("nan"))
    with pytest.raises(ValueError, match="mus"):
        compose_mu([1.0, -1.0])
    acc = t.GDPAccountant().compose(t.Gaussian(1.0))
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(0.0)
    with pytest.raises(ValueError, match="eps"):
        acc.delta(float("inf"))
