"""tightdp.risk: certified trade-off curves against closed forms and peer libraries."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

import tightdp as td
from tightdp.risk import Profile, tradeoff

ALPHAS = np.concatenate([np.geomspace(1e-10, 1.0, 41), [0.0, 0.3, 0.5, 0.9, 0.999]])


def gdp_beta(alpha, mu):
    """Dong, Roth & Su (2022), eq. (2.4): G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)."""
    return norm.cdf(norm.ppf(1 - np.asarray(alpha)) - mu)


def gdp_delta(eps, mu):
    """The mu-GDP privacy profile (Dong, Roth & Su, Cor. 2.13)."""
    eps = np.asarray(eps, dtype=float)
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu,k", [(0.01, 1), (0.5, 4), (2.0, 1), (2.0, 16), (20.0, 1)])
def test_gaussian_composition_bracket_contains_gdp_curve(mu, k):
    # k Gaussian steps of noise sqrt(k)/mu are mu-GDP: beta = G_mu exactly, advantage
    # 2 Phi(mu/2) - 1
    acc = td.PLDAccountant().compose(td.Gaussian(math.sqrt(k) / mu), k)
    r = tradeoff(acc, fpr=ALPHAS)
    exact = 1 - gdp_beta(ALPHAS, mu)
    assert np.all(r.tpr_lower <= exact + 1e-15) and np.all(exact <= r.tpr_upper + 1e-15)
    adv = 2 * norm.cdf(mu / 2) - 1
    assert r.advantage_lower <= adv <= r.advantage_upper
    if mu <= 2:  # the default bracket is within tol where the dominated pair is tight
        assert np.max(r.tpr_upper - r.tpr_lower) <= 1e-3
    for d in range(len(r.details["directions"])):  # one direction: the same pair
        lo, hi = r.tpr(ALPHAS, direction=d)
        assert np.all(lo <= exact + 1e-15) and np.all(exact <= hi + 1e-15)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_pure_dp_bracket_contains_randomized_response_curve(eps):
    # Kairouz, Oh & Viswanath (2015): eps-DP is f(alpha) = max(0, 1 - e^eps a, e^-eps (1 - a))
    acc = td.PLDAccountant(neighboring="replace_one").compose(td.RandomizedResponse(eps=eps), 1)
    r = tradeoff(acc, fpr=ALPHAS)
    f = np.maximum.reduce([np.zeros_like(ALPHAS), 1 - math.exp(eps) * ALPHAS,
                           math.exp(-eps) * (1 - ALPHAS)])
    assert np.all(r.tpr_lower <= 1 - f + 1e-15) and np.all(1 - f <= r.tpr_upper + 1e-15)
    adv = (math.exp(eps) - 1) / (math.exp(eps) + 1)
    assert r.advantage_lower <= adv <= r.advantage_upper
    assert r.advantage_upper - r.advantage_lower <= 1e-3


def test_posterior_gdp_and_conversions():
    mu = 1.5
    acc = td.PLDAccountant().compose(td.Gaussian(1 / mu), 1)
    r = tradeoff(acc, fpr=0.01)
    for pi in (0.1, 0.5, 0.9):
        # Bayes success 1 - min_a [pi G(a) + (1 - pi) a], by quadrature-free search on a
        a = np.linspace(0, 1, 200001)
        exact = 1 - np.min(pi * gdp_beta(a, mu) + (1 - pi) * a)
        lo, hi = r.posterior(pi)
        assert lo[0] - 1e-9 <= exact <= hi[0] + 1e-9
        assert hi[0] - lo[0] < 1e-3
    e = np.array([-1.0, 0.0, 0.5, 2.0, 6.0])
    lo, hi = r.delta(np.abs(e))
    exact = gdp_delta(np.abs(e), mu)
    assert np.all(lo <= exact) and np.all(exact <= hi)
    elo, eup = r.epsilon([1e-5, 1e-2])
    for j, dl in enumerate((1e-5, 1e-2)):
        assert elo[j] <= td.gdp_epsilon(mu, dl) <= eup[j] and eup[j] - elo[j] < 0.1
    mlo, mhi = r.gdp_mu()
    assert mlo <= mu <= mhi and mhi - mlo < 0.01


def test_profile_duality_is_certified_from_samples():
    # a Profile of exact GDP samples (coarse on purpose): the bounds still contain G_mu
    mu = 1.0
    z = np.linspace(0, 6, 13)
    d = gdp_delta(z, mu)
    p = Profile(z, d, d, 0.0, symmetric=True)
    lo, hi = p.beta(ALPHAS)
    g = gdp_beta(ALPHAS, mu)
    assert np.all(lo <= g + 1e-15) and np.all(g <= hi + 1e-15)
    assert np.max(hi - lo) > 1e-3  # coarse samples: a wide but valid bracket


def test_bad_input_one_line():
    acc = td.PLDAccountant().compose(td.Gaussian(1.0), 1)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"^fpr must be in \[0, 1\]"):
            tradeoff(acc, fpr=bad)
    r = tradeoff(acc, fpr=0.1)
    for bad in (0.0, 1.0, 2.0):
        with pytest.raises(ValueError, match=r"^prior must be in \(0, 1\)"):
            r.posterior(bad)
    with pytest.raises(ValueError, match="^tol"):
        tradeoff(acc, fpr=0.1, tol=0)


def _np_tpr(pld, alpha):
    """TPR of the Neyman-Pearson test of a dp_accounting PLD (one direction), at alpha:
    thresholds on the loss, randomized between them (independent of tightdp)."""
    d = pld.to_dense_pmf()
    p = d._probs
    ls = (d._lower_loss + np.arange(p.size)) * d._discretization
    qa = np.cumsum((p * np.exp(-ls))[::-1])[::-1]   # Q(L >= l_i)
    pb = np.cumsum(p)                                # P(L <= l_i)
    i = np.searchsorted(-qa, -alpha)
    w = (alpha - qa[i]) / (qa[i - 1] - qa[i])
    return 1 - (pb[i - 1] + (pb[i - 2] - pb[i - 1]) * w)


def test_subsampled_gaussian_against_dp_accounting():
    pm = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    q, sigma, steps = 0.01, 1.0, 1000
    ref = pm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=q,
                                     use_connect_dots=True,
                                     value_discretization_interval=1e-4).self_compose(steps)
    r = td.dpsgd_risk(sampling_rate=q, noise_multiplier=sigma, steps=steps,
                      fpr=[1e-3, 1e-2, 1e-1])
    # the remove direction's dominating pair: its NP curve at dp_accounting's grid 1e-4
    for j, a in enumerate(r.fpr):
        t = _np_tpr(ref._pmf_remove, a)
        lo, hi = r.tpr(a, direction=0)
        assert lo[0] - 2e-4 <= t <= hi[0] + 2e-4
        assert r.tpr_lower[j] - 2e-4 <= t <= r.tpr_upper[j] + 2e-4
    assert r.advantage_lower - 1e-4 <= ref.get_delta_for_epsilon(0) <= r.advantage_upper + 1e-4
    assert np.max(r.tpr_upper - r.tpr_lower) <= 1e-3


def test_against_riskcal():
    pytest.importorskip("riskcal")
    pm = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from riskcal.analysis import get_advantage_from_pld, get_beta_from_pld
    # Gaussian (a symmetric pair): riskcal's curve, from dp_accounting's PLD at grid 1e-4
    pld = pm.from_gaussian_mechanism(standard_deviation=0.8, value_discretization_interval=1e-4)
    a = np.array([1e-3, 1e-2, 1e-1])
    ref = 1 - np.asarray(get_beta_from_pld(pld, alpha=a))
    r = tradeoff(td.PLDAccountant().compose(td.Gaussian(0.8), 1), fpr=a)
    assert np.all(r.tpr_lower - 2e-4 <= ref) and np.all(ref <= r.tpr_upper + 2e-4)
    # subsampled: the advantage agrees; riskcal's TPR lies below our lower bound at small
    # FPR (its symmetrization takes max(f, f^-1) there; the remove direction's NP test on
    # dp_accounting's own PLD reaches our bracket, test above), never above our upper one
    pld = pm.from_gaussian_mechanism(standard_deviation=1.0, sampling_prob=0.01,
                                     use_connect_dots=True,
                                     value_discretization_interval=1e-4).self_compose(1000)
    r = td.dpsgd_risk(sampling_rate=0.01, noise_multiplier=1.0, steps=1000, fpr=a)
    ref = 1 - np.asarray(get_beta_from_pld(pld, alpha=a))
    assert np.all(ref <= r.tpr_upper + 2e-4)
    assert r.advantage_lower - 1e-4 <= get_advantage_from_pld(pld) <= r.advantage_upper + 1e-4


def test_public_example_width_and_speed():
    # q=0.01, sigma=1, 10^4 steps; riskcal 1.5.1 reports (recorded) advantage 0.480 and TPR
    # 0.153 / 0.505 at FPR 1e-2 / 0.1; the NP test of dp_accounting's remove PLD (grid 1e-4,
    # recorded) 0.038014 / 0.153947 / 0.505077 at FPR 1e-3 / 1e-2 / 0.1
    r = td.dpsgd_risk(sampling_rate=0.01, noise_multiplier=1.0, steps=10_000,
                      fpr=[1e-3, 1e-2, 1e-1])
    ref = np.array([0.038014, 0.153947, 0.505077])
    assert np.all(r.tpr_lower - 2e-4 <= ref) and np.all(ref <= r.tpr_upper + 2e-4)
    assert np.max(r.tpr_upper - r.tpr_lower) <= 1e-3
    assert r.advantage_lower - 5e-4 <= 0.480 <= r.advantage_upper + 5e-4
    import time
    t0 = time.perf_counter()
    lo, hi = r.tpr(np.geomspace(1e-5, 1, 100))
    assert time.perf_counter() - t0 < 0.5 and np.all(lo <= hi)
    assert "<table>" in r._repr_html_()
    assert r.as_dict()["tpr_upper"] == r.tpr_upper.tolist()


def test_other_accountants_through_delta():
    acc = td.PRVAccountant().compose(td.Gaussian(1.0), 4)
    r = tradeoff(acc, fpr=[0.01, 0.1])
    exact = 1 - gdp_beta(r.fpr, 2.0)   # 4 steps of sigma 1: mu = 2
    assert np.all(r.tpr_lower <= exact) and np.all(exact <= r.tpr_upper)


def test_readme_risk_section_runs(capsys):
    import re

    from conftest import ROOT

    text = (ROOT / "README.md").read_text()
    block = re.search(r"## What eps means.*?```python\n(.*?)```", text, re.S)
    assert block, "README has no risk section"
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.split("\n")
    lo = [float(x) for x in re.findall(r"[\d.]+", out[0])]
    assert lo[0] <= 0.038014 <= lo[4]   # tpr_lower[0], tpr_upper[0] (NP test, recorded)
