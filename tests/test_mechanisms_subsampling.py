"""Poisson subsampling under the replace-one relation (mechanisms/subsampling.py): the
antipodal pair ``(1-q) N(0) + q N(+-c)``, against numerical integrals, a two-dimensional
check of its domination, and dp_accounting's REPLACE_ONE answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from tightdp import Gaussian, Laplace, PLDAccountant, PoissonSubsampled, RDPAccountant

#: (q, sigma, steps) of the comparisons with dp_accounting at delta=1e-5
_SETTINGS = [(0.01, 1.0, 1000), (0.1, 2.0, 100), (0.02, 0.8, 300)]


def _mixture(q: float, shift: float, s: float):
    return lambda x: (1 - q) * norm.pdf(x, 0.0, s) + q * norm.pdf(x, shift, s)


def _delta_quad(q: float, s: float, c: float, eps: float) -> float:
    """delta(eps) of one step: the integral of (p - e^eps q)_+ over the line, p and q the
    mixtures at +c and -c (the positive part split at its one sign change)."""
    p, qq = _mixture(q, c, s), _mixture(q, -c, s)
    f = lambda x: max(p(x) - math.exp(eps) * qq(x), 0.0)  # noqa: E731
    return sum(integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-11, limit=400)[0]
               for a, b in ((-np.inf, 0.0), (0.0, 5.0 * s), (5.0 * s, np.inf)))


@pytest.mark.parametrize("q,s", [(0.01, 1.0), (0.3, 0.7), (0.9, 2.0)])
def test_one_step_matches_the_integral(q, s):
    m = PoissonSubsampled(Gaussian(s), q, neighboring="replace_one")
    acc = PLDAccountant(neighboring="replace_one").compose(PoissonSubsampled(Gaussian(s), q))
    for eps in (0.0, 0.05, 0.5, 2.0):
        ref = _delta_quad(q, s, 1.0, eps)
        assert float(m.delta(eps)) == pytest.approx(ref, rel=1e-7, abs=1e-13)
        r = acc.delta(eps)
        assert r.lower <= ref * (1 + 1e-9) + 1e-15 and ref <= r.upper * (1 + 1e-9)


def test_the_replace_one_form_is_symmetric_and_the_accountants_choice():
    m = PoissonSubsampled(Gaussian(1.5, 0.5), 0.2)
    rep = m.under("replace_one")
    assert rep.neighboring == "replace_one" and rep.symmetric
    assert rep.under("add_or_remove_one") == m and m.under("replace_special") is m
    # q = 1: the Gaussian at distance 2c, N(0.5) against N(-0.5) at sigma 1.5
    one = PoissonSubsampled(Gaussian(1.5, 0.5), 1.0, neighboring="replace_one")
    mu = 1.0 / 1.5
    ref = norm.cdf(-1.0 / mu + mu / 2) - math.e * norm.cdf(-1.0 / mu - mu / 2)
    assert float(one.delta(1.0)) == pytest.approx(ref, rel=1e-9)
    assert rep.scaled(2.0).neighboring == "replace_one"
    assert "neighboring='replace_one'" in repr(rep) and "neighboring" not in repr(m)


def _hockey_2d(q: float, s: float, a: np.ndarray, b: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """H_{e^eps} between (1-q) N(0, s^2 I) + q N(a, s^2 I) and the same at b in the plane, by
    the midpoint rule on a grid covering every component to 9 sigma."""
    h = s / 60.0
    lo, hi = -1.0 - 9 * s, 1.0 + 9 * s
    x = np.arange(lo + h / 2, hi, h)
    xx, yy = np.meshgrid(x, x, indexing="ij")

    def dens(m):
        g0 = np.exp(-(xx ** 2 + yy ** 2) / (2 * s * s))
        g1 = np.exp(-((xx - m[0]) ** 2 + (yy - m[1]) ** 2) / (2 * s * s))
        return ((1 - q) * g0 + q * g1) / (2 * math.pi * s * s)

    p, qq = dens(a), dens(b)
    return np.array([np.maximum(p - math.exp(e) * qq, 0.0).sum() * h * h for e in eps])


def test_the_antipodal_pair_dominates_records_in_the_ball():
    """The pair of every two records of norm <= 1 (other contributions removed by joint
    convexity) lies below the antipodal pair at every eps: the claim the replace-one form
    rests on (Schuchardt et al. 2024), checked in the plane the two records span."""
    q, s = 0.3, 0.8
    eps = np.array([0.0, 0.3, 1.0, 2.0])
    top = PoissonSubsampled(Gaussian(s), q, neighboring="replace_one").delta(eps)
    rng = np.random.default_rng(3)
    cases = [(np.array([1.0, 0.0]), np.array([-1.0, 0.0]))]
    for _ in range(5):
        r = np.sqrt(rng.uniform(0.2, 1.0, 2))
        t = rng.uniform(0.0, 2 * math.pi, 2)
        cases.append((r[0] * np.array([math.cos(t[0]), math.sin(t[0])]),
                      r[1] * np.array([math.cos(t[1]), math.sin(t[1])])))
    cases.append((np.array([1.0, 0.0]), np.array([0.0, 0.0])))
    cases.append((np.array([1.0, 0.0]), np.array([0.0, 1.0])))
    for a, b in cases:
        h = _hockey_2d(q, s, a, b, eps)
        assert np.all(h <= top + 5e-6), (a, b, h, top)
    # the grid is accurate to a few 1e-6: the antipodal case itself is the 1-d pair, and a
    # pair just inside it (records at +1 and -0.9) is below by more than that
    assert _hockey_2d(q, s, *cases[0], eps) == pytest.approx(top, abs=5e-6)
    inner = _hockey_2d(q, s, np.array([1.0, 0.0]), np.array([-0.9, 0.0]), eps)
    assert np.all(inner < top - 2e-5)


def _check_against_dp_accounting(interval: float):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    from dp_accounting.privacy_accountant import NeighboringRelation

    for q, s, k in _SETTINGS:
        ref = pld.from_gaussian_mechanism(
            s, sampling_prob=q, value_discretization_interval=interval,
            neighboring_relation=NeighboringRelation.REPLACE_ONE).self_compose(k)
        e_ref = ref.get_epsilon_for_delta(1e-5)
        r = PLDAccountant(neighboring="replace_one").compose(
            PoissonSubsampled(Gaussian(s), q), k).epsilon(1e-5)
        assert r.lower <= e_ref <= r.upper, (q, s, k, r.lower, e_ref, r.upper)
        assert r.details["neighboring"] == "replace_one"


def test_bracket_contains_dp_accounting_replace_one():
    """At dp_accounting's default discretization (1e-4; q=0.01, sigma=1, 1000 steps is
    2.8434 there)."""
    _check_against_dp_accounting(1e-4)


@pytest.mark.slow
def test_bracket_contains_dp_accounting_replace_one_fine():
    """At the fine discretization 1e-5 (a minute or more of dp_accounting's time)."""
    _check_against_dp_accounting(1e-5)


def test_refusals_are_one_line():
    with pytest.raises(ValueError, match="neighboring: .*Gaussian base only"):
        PoissonSubsampled(Laplace(1.0), 0.1, neighboring="replace_one")
    with pytest.raises(ValueError, match="neighboring="):
        PLDAccountant(neighboring="replace_one").compose(PoissonSubsampled(Laplace(1.0), 0.1))
    with pytest.raises(ValueError, match="no Rényi-DP formula") as err:
        RDPAccountant(neighboring="replace_one").compose(PoissonSubsampled(Gaussian(1.0), 0.1))
    assert "\n" not in str(err.value)
