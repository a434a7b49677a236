"""A mechanism known by a bracket of two pairs: every accountant answers its upper bound from
the upper mechanism and its lower bound from the lower one (accountants/bracketed.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from tightdp import Gaussian, GDPAccountant, PLDAccountant, PRVAccountant
from tightdp.mechanisms import Mechanism
from tightdp.mechanisms.base import Bracket


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
    """epsilon of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13), by bisection."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        e = (lo + hi) / 2
        d = norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
        lo, hi = (e, hi) if d > delta else (lo, e)
    return hi


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
