"""The group-of-two pair (losses/group.py) against closed forms: mu-GDP twice is 2 mu-GDP
(Dong, Roth & Su 2022, group privacy), and the hull pair of a discrete pair's own profile
samples is that pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import tightdp as td
from tightdp.losses import DiscreteLoss, GaussianLoss, PrivacyLoss
from tightdp.losses.group import group_of_two, hull_pair
from tightdp.mechanisms.base import Mechanism


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2022, Cor. 2.13)."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_epsilon(mu: float, delta: float) -> float:
    return brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, 500.0, xtol=1e-13)


class _Pair(Mechanism):
    """A mechanism of one loss for both orders (the replace-one relation)."""

    relations = ("replace_one",)

    def __init__(self, loss: PrivacyLoss):
        self._loss = loss

    def _build_losses(self):
        return self._loss, self._loss


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gaussian_twice_is_the_gaussian_of_twice_mu(mu):
    """f = g = G_mu: the realized pair's profile is never below 2 mu-GDP's closed form;
    its eps at delta from 1e-2 to 1e-200 within 1e-3 of 2 mu-GDP's; after 10 compositions
    its eps at delta = 1e-5 is within 1e-3 of 2 mu sqrt(10)-GDP's, never below."""
    g = GaussianLoss(mu)
    pair = group_of_two(g, g, points=2000)
    assert abs(pair.p.sum() + pair.inf_mass - 1.0) < 1e-9
    assert abs(pair.q.sum() + pair.neg_inf_mass - 1.0) < 1e-9
    eps = np.linspace(-3.0, gdp_epsilon(2 * mu, 1e-200), 201)
    exact = np.array([gdp_delta(2 * mu, e) for e in eps])
    assert np.all(pair.delta(eps) >= exact * (1 - 1e-12))
    for d in (1e-2, 1e-5, 1e-10, 1e-30, 1e-200):
        ref = gdp_epsilon(2 * mu, d)
        got = brentq(lambda e, d=d: float(pair.delta(np.array(e))) - d, 0.0, 2 * ref + 1)
        assert ref * (1 - 1e-12) <= got <= ref * (1 + 1e-3)
    acc = td.PLDAccountant(rtol=1e-4, neighboring="replace_one").compose(_Pair(pair), 10)
    r = acc.epsilon(1e-5)
    ref = gdp_epsilon(2 * mu * math.sqrt(10), 1e-5)
    assert ref <= r.upper <= ref * (1 + 1e-3)


def test_fewer_points_is_coarser_and_still_above():
    """500 points per span: still never below 2 mu-GDP (a subset of valid lines), and
    farther above it than 2000 points."""
    g = GaussianLoss(1.0)
    eps = np.linspace(0.0, 8.0, 81)
    exact = np.array([gdp_delta(2.0, e) for e in eps])
    coarse = group_of_two(g, g, points=500).delta(eps)
    fine = group_of_two(g, g, points=2000).delta(eps)
    assert np.all(coarse >= exact * (1 - 1e-12)) and np.all(fine >= exact * (1 - 1e-12))
    assert np.max(coarse / exact) > np.max(fine / exact)


def test_ceiling_lines_take_over_where_smaller():
    """Group of two of 1-GDP with a 1.5-GDP ceiling (a valid bound of its own: smaller
    than 2-GDP everywhere): the pair follows the ceiling, never below it, its eps within
    1e-3 of the ceiling's down to delta = 1e-200."""
    g = GaussianLoss(1.0)
    pair = group_of_two(g, g, points=2000, ceiling=GaussianLoss(1.5))
    eps = np.linspace(0.0, gdp_epsilon(1.5, 1e-200), 60)
    exact = np.array([gdp_delta(1.5, e) for e in eps])
    assert np.all(pair.delta(eps) >= exact * (1 - 1e-12))
    for d in (1e-2, 1e-5, 1e-10, 1e-30, 1e-200):
        ref = gdp_epsilon(1.5, d)
        got = brentq(lambda e, d=d: float(pair.delta(np.array(e))) - d, 0.0, 2 * ref + 1)
        assert ref <= got <= ref * (1 + 1e-3)


def test_hull_pair_of_a_discrete_profile_is_that_pair():
    """Samples of a three-atom pair's profile at its atoms' losses (plus points above the
    hull, which it ignores) give back its profile, sum_i (p_i - e^eps q_i)_+ by hand."""
    y = np.array([-0.5, 0.3, 1.2])
    q = np.array([0.5, 0.3, 0.2])
    p = q * np.exp(y)
    p = p / p.sum() * 0.99        # the rest, 0.01, at +inf
    q = p * np.exp(-y)
    q_rest = 1.0 - q.sum()        # at -inf
    true = DiscreteLoss(y, p, q, inf_mass=0.01, neg_inf_mass=q_rest)

    def by_hand(e):
        return 0.01 + sum(max(pi - math.exp(e) * qi, 0.0) for pi, qi in zip(p, q, strict=True))

    samples = np.concatenate([y, [0.0, 0.8]])
    deltas = np.array([by_hand(e) for e in y] + [by_hand(0.0) + 0.05, by_hand(0.8) + 0.01])
    pair = hull_pair(samples, deltas)
    grid = np.linspace(-2.0, 3.0, 51)
    want = np.array([by_hand(e) for e in grid])
    assert np.allclose(pair.delta(grid), want, rtol=1e-12, atol=1e-13)
    assert np.all(pair.delta(grid) >= true.delta(grid) - 1e-15)
    assert pair.y.size == 3
