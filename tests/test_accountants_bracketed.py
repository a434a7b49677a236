"""A mechanism known by a bracket of two pairs: every accountant answers its upper bound from
the upper mechanism and its lower bound from the lower one (accountants/bracketed.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

import oracle
from tightdp import Gaussian, GDPAccountant, Laplace, PLDAccountant, PRVAccountant
from tightdp.mechanisms import Mechanism
from tightdp.mechanisms.base import Bracket, tv_lipschitz


class _Between(Mechanism):
    """A stand-in known only to lie between two Gaussians: sigma_hi's pair below it and
    sigma_lo's above."""

    relations = ("add_or_remove_one", "replace_one", "replace_special")

    def __init__(self, sigma_lo: float, sigma_hi: float):
        self.sigma_lo, self.sigma_hi = sigma_lo, sigma_hi

    def bracket(self, rtol: float) -> Bracket:
        return Bracket(Gaussian(self.sigma_lo), Gaussian(self.sigma_hi), "a stand-in gap")

    def _build_losses(self):
        return Gaussian(self.sigma_lo).privacy_losses()


def _gdp_eps(mu: float, delta: float) -> float:
    """eps of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13), exact (mpmath)."""
    return float(oracle.gaussian_epsilon(1.0 / mu, 1, delta))


@pytest.mark.parametrize("cls", [PLDAccountant, PRVAccountant])
def test_bounds_come_from_the_two_sides(cls):
    acc = cls().compose(_Between(1.0, 1.5), 10)
    r = acc.epsilon(1e-5)
    e_up, e_lo = _gdp_eps(math.sqrt(10) / 1.0, 1e-5), _gdp_eps(math.sqrt(10) / 1.5, 1e-5)
    assert r.upper >= e_up and r.upper == pytest.approx(e_up, rel=2e-3)
    assert r.lower <= e_lo and r.lower == pytest.approx(e_lo, rel=2e-3)
    assert "a stand-in gap" in r.note and r.details["bracket_gap"] == "a stand-in gap"
    d = acc.delta(np.array([1.0, 3.0]))
    assert np.all(d.lower < d.upper)


def test_ordinary_terms_compose_on_both_sides():
    acc = PLDAccountant().compose(_Between(2.0, 2.0), 3).compose(Gaussian(2.0), 1)
    r = acc.epsilon(1e-6)
    e = _gdp_eps(2.0 / 2.0, 1e-6)
    assert r.lower <= e <= r.upper and r.upper - r.lower < 2e-3 * e


def test_a_method_without_lower_bounds_reports_none():
    r = GDPAccountant().compose(_Between(1.0, 1.5), 4).epsilon(1e-5)
    assert r.lower is None or r.lower <= r.upper
    assert r.upper == pytest.approx(_gdp_eps(2.0, 1e-5), rel=1e-6)


def test_a_lower_side_the_method_cannot_answer_gives_no_lower_bound():
    """The GDP accountant has no method for a Laplace pair: the lower side of a bracket made
    of one is left out (lower None), not a traceback."""

    class _LaplaceBelow(_Between):
        def bracket(self, rtol: float) -> Bracket:
            return Bracket(Gaussian(self.sigma_lo), Laplace(self.sigma_hi), "")

    acc = GDPAccountant().compose(_LaplaceBelow(1.0, 2.0), 4)
    r, d = acc.epsilon(1e-5), acc.delta(1.0)
    assert r.lower is None and d.lower is None
    assert r.upper == pytest.approx(_gdp_eps(2.0, 1e-5), rel=1e-6)


class _NearlyBelow(_Between):
    """A stand-in whose lower pair is a post-processing only up to a total-variation slack
    (eta_P, eta_Q) per application, and whose upper pair dominates only up to a constant
    slack ``up`` on delta per application."""

    def __init__(self, sigma: float, eta: tuple[float, float], up: float = 0.0):
        super().__init__(sigma, sigma)
        self.eta, self.up = eta, up

    def bracket(self, rtol: float) -> Bracket:
        return Bracket(Gaussian(self.sigma_lo), Gaussian(self.sigma_hi), "",
                       lower_slack=lambda e: tv_lipschitz(*self.eta, e),
                       upper_slack=(lambda e: np.full(np.shape(e), self.up)) if self.up
                       else None)


def test_a_lower_slack_is_subtracted_from_the_lower_side():
    """delta lower = exact (closed form) - E max(eta_P + e^eps eta_Q, eta_Q + e^eps eta_P);
    epsilon lower = the exact epsilon at delta + that slack at the upper epsilon."""
    eta, count, sigma = (1e-5, 3e-5), 10, 2.0
    mu = math.sqrt(count) / sigma
    acc = PLDAccountant().compose(_NearlyBelow(sigma, eta), count)
    eps = np.array([0.5, 1.0])
    d = acc.delta(eps)
    exact = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    slack = count * np.maximum(eta[0] + np.exp(eps) * eta[1], eta[1] + np.exp(eps) * eta[0])
    assert np.all(d.upper >= exact) and np.allclose(d.upper, exact, rtol=2e-3)
    assert np.all(d.lower <= exact - slack)
    assert np.allclose(d.lower, exact - slack, rtol=2e-3)
    assert np.allclose(d.details["lower_slack"], slack, rtol=1e-12)
    r = acc.epsilon(1e-5)
    s = count * max(eta[0] + math.exp(r.upper) * eta[1], eta[1] + math.exp(r.upper) * eta[0])
    assert r.details["lower_slack"] == pytest.approx(s, rel=1e-12)
    assert r.lower <= _gdp_eps(mu, 1e-5 + s) < _gdp_eps(mu, 1e-5) <= r.upper
    assert r.lower == pytest.approx(_gdp_eps(mu, 1e-5 + s), rel=2e-3)
    assert r.lower < _gdp_eps(mu, 1e-5) * (1 - 1e-2)   # the slack is visible


def test_a_slack_beyond_delta_leaves_no_lower_bound():
    acc = PLDAccountant().compose(_NearlyBelow(1.0, (0.3, 0.3)), 4)
    r = acc.epsilon(1e-5)
    assert r.lower is None and r.upper == pytest.approx(_gdp_eps(2.0, 1e-5), rel=2e-3)
    assert acc.delta(1.0).lower == 0.0


def test_an_upper_slack_is_added_to_the_upper_side():
    """delta upper = exact + E up; epsilon upper = the exact epsilon at delta - E up."""
    up, count, sigma = 2e-7, 10, 2.0
    mu = math.sqrt(count) / sigma
    acc = PLDAccountant().compose(_NearlyBelow(sigma, (0.0, 0.0), up), count)
    eps = np.array([0.5, 1.0])
    d = acc.delta(eps)
    exact = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert np.all(d.upper >= exact + count * up) and np.all(d.delta == d.upper)
    assert np.allclose(d.upper, exact + count * up, rtol=2e-3)
    r = acc.epsilon(1e-5)
    target = _gdp_eps(mu, 1e-5 - count * up)
    assert r.delta == 1e-5 and r.details["upper_slack"] == pytest.approx(count * up)
    assert r.lower <= _gdp_eps(mu, 1e-5) < target <= r.upper
    assert r.upper == pytest.approx(target, rel=2e-3)
    below = acc.epsilon(count * up / 2)   # no finite epsilon certified there
    assert below.upper == below.epsilon == math.inf and "numerical slack" in below.note
    assert below.lower == pytest.approx(_gdp_eps(mu, count * up / 2), rel=2e-3)


class _WithFallback(_NearlyBelow):
    """A stand-in whose upper side carries a constant slack ``up`` and whose bracket also
    names a fallback upper mechanism (the Gaussian of noise ``sigma_fb``)."""

    def __init__(self, sigma: float, up: float, sigma_fb: float):
        super().__init__(sigma, (0.0, 0.0), up)
        self.sigma_fb = sigma_fb

    def bracket(self, rtol: float) -> Bracket:
        return super().bracket(rtol)._replace(upper_fallback=Gaussian(self.sigma_fb))


@pytest.mark.parametrize("up,sigma_fb,side", [(1e-3, 1.5, "fallback"), (0.0, 1.5, "main"),
                                              (9e-7, 1.9, "fallback")])
def test_the_smaller_of_the_two_upper_sides_is_reported(up, sigma_fb, side):
    """Upper = the smaller of the computed side (exact epsilon at delta - E up, inf where
    E up >= delta) and the fallback (exact epsilon of E Gaussians of sigma_fb); both
    queries, the note saying which."""
    count, sigma, delta = 10, 2.0, 1e-5
    acc = PLDAccountant().compose(_WithFallback(sigma, up, sigma_fb), count)
    r = acc.epsilon(delta)
    fb = _gdp_eps(math.sqrt(count) / sigma_fb, delta)
    main = (_gdp_eps(math.sqrt(count) / sigma, delta - count * up) if count * up < delta
            else math.inf)
    want = min(main, fb)
    assert (want == fb) == (side == "fallback")
    assert want <= r.upper <= want * (1 + 1e-3) and r.lower <= r.upper
    assert ("fallback upper pair" in r.note) == (side == "fallback")
    eps = np.array([0.5, 1.0])
    d = acc.delta(eps)
    mu, mu_fb = math.sqrt(count) / sigma, math.sqrt(count) / sigma_fb
    exact = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    exact_fb = norm.cdf(-eps / mu_fb + mu_fb / 2) - np.exp(eps) * norm.cdf(-eps / mu_fb
                                                                          - mu_fb / 2)
    want_d = np.minimum(exact + count * up, exact_fb)
    assert np.all(want_d <= d.upper) and np.allclose(d.upper, want_d, rtol=2e-3)
    assert np.all(d.lower <= d.upper) and np.all(d.delta == d.upper)
