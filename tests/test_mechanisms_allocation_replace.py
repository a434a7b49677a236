"""Random allocation under replace-one (mechanisms/allocation_replace.py): the bracket holds
a Monte Carlo estimate of the exact t-dimensional pair, its lower side is the add/remove
lower bound, its upper side the group of two, below the no-amplification Gaussian of
sensitivity 2 (closed form)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import norm

import tightdp as td
from tightdp.mechanisms.fields import mechanism_from_dict, mechanism_to_dict


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2022, Cor. 2.13)."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def replace_acc(sigma: float, t: int, epochs: int = 1, **kw) -> td.PLDAccountant:
    return td.PLDAccountant(neighboring="replace_one", **kw).compose(
        td.RandomAllocation(td.Gaussian(sigma), t), epochs)


def test_bracket_holds_the_monte_carlo_delta_of_the_exact_pair():
    """t = 4, sigma = 1: P = (1/4) sum_i N(e_i, I), Q = (1/4) sum_i N(-e_i, I); the privacy
    loss of x is log sum_i e^{x_i} - log sum_i e^{-x_i} (the e^{-1/2} factors cancel), and
    delta(eps) = E_P (1 - e^{eps - L})_+ (Balle et al. 2018, Thm. 5), estimated from 2e5
    draws of P with a 4-standard-error interval, which must meet the bracket."""
    rng = np.random.default_rng(32)
    n, t, s = 200_000, 4, 1.0
    x = rng.normal(0.0, s, (n, t))
    x[np.arange(n), rng.integers(0, t, n)] += 1.0
    loss = logsumexp(x / s**2, axis=1) - logsumexp(-x / s**2, axis=1)
    acc = replace_acc(s, t)
    for eps in (0.25, 0.5, 1.0):
        w = np.maximum(-np.expm1(eps - loss), 0.0)
        est, se = float(w.mean()), float(w.std() / math.sqrt(n))
        r = acc.delta(eps)
        assert r.lower - 4 * se <= est <= r.upper + 4 * se
        # the add/remove lower (replacement zero) and the group-of-two upper differ
        assert r.lower < est - 4 * se and est + 4 * se < r.upper
        # and the group of two is well below no amplification (2-GDP)
        assert r.upper < 0.6 * gdp_delta(2.0, eps)


@pytest.mark.parametrize("sigma,t,epochs", [(1.0, 10, 1), (0.8, 100, 3)])
def test_lower_is_add_remove_lower_and_upper_below_no_amplification(sigma, t, epochs):
    """The lower side is the add/remove bracket's lower mechanism (the replacement
    contributing zero gives the remove pair exactly): the same lower bound as the add/remove
    accountant; the upper side is at most the Gaussian of sensitivity 2 per epoch,
    2 sqrt(E) / sigma GDP in closed form (within the accountant's resolution), and well
    below it at delta(0.5)."""
    eps = np.array([0.5, 2.0])
    rep = replace_acc(sigma, t, epochs).delta(eps)
    ar = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t),
                                    epochs).delta(eps)
    # two certified lower bounds of one curve (the remove pair's), on two grids: each within
    # the add/remove bracket's width of the other
    assert np.all(rep.lower >= ar.lower - (ar.upper - ar.lower))
    assert np.all(rep.lower <= ar.upper) and np.all(rep.lower <= rep.upper)
    mu = 2.0 * math.sqrt(epochs) / sigma
    exact = np.array([gdp_delta(mu, e) for e in eps])
    assert np.all(rep.upper <= exact * (1 + 2e-3)) and rep.upper[0] < 0.5 * exact[0]
    assert "replace-one" in rep.note and "not tight" in rep.note
    assert rep.details["neighboring"] == "replace_one"


def test_several_steps_each_keep_no_amplification():
    """selected = 2 of 10: the group of two of the Gaussian pair of sensitivity sqrt(2) is
    the Gaussian of sensitivity 2 sqrt(2), no better: the upper side is that Gaussian,
    2 sqrt(2) / sigma GDP in closed form."""
    m = td.RandomAllocation(td.Gaussian(1.0), 10, selected=2)
    r = td.PLDAccountant(neighboring="replace_one").compose(m).delta(np.array([0.5, 2.0]))
    exact = np.array([gdp_delta(2.0 * math.sqrt(2.0), e) for e in (0.5, 2.0)])
    assert np.all(exact <= r.upper) and np.all(r.upper <= exact * (1 + 2e-3))
    assert np.all(r.lower <= r.upper)


@pytest.mark.parametrize("sigma,t,epochs,delta,most", [(1.0, 100, 2, 1e-5, 1.6),
                                                       (1.0, 1000, 1, 1e-6, 0.36),
                                                       (0.5, 1000, 1, 1e-6, None)])
def test_group_of_two_against_no_amplification(sigma, t, epochs, delta, most):
    """eps at delta: lower <= upper, the upper at most no amplification's closed form
    (2 sqrt(E) / sigma GDP) within the accountant's resolution, and far below it where the
    group of two is tight: t = 100, sigma = 1, 2 epochs, 1e-5: 1.524 against 15.46;
    t = 1000, sigma = 1, 1e-6: 0.339 against 11.0. At sigma = 0.5 the dominating pair's
    own error (mass 5e-6 at +inf) keeps the group of two above 1e-6: no amplification."""
    r = replace_acc(sigma, t, epochs).epsilon(delta)
    mu = 2.0 * math.sqrt(epochs) / sigma
    ref = brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, 200.0, xtol=1e-12)
    assert r.lower <= r.upper <= ref * (1 + 1e-3)
    if most is not None:
        assert r.upper <= most < ref / 5
        ar = td.dpsgd_epsilon(sampling="random_allocation", noise_multiplier=sigma,
                              epochs=epochs, steps_per_epoch=t, delta=delta)
        # replace-one is at least add/remove (its lower side), at most twice its eps
        assert ar.lower <= r.upper <= 2.0 * ar.upper * (1 + 1e-3)


def test_every_example_in_every_step_is_the_gaussian_exactly():
    """selected = steps: no allocation, the pair is the Gaussian of sensitivity
    2 sqrt(k): the bracket closes on 2 sqrt(2) / sigma GDP."""
    m = td.RandomAllocation(td.Gaussian(1.5), 2, selected=2)
    r = td.PLDAccountant(neighboring="replace_one").compose(m).delta(1.0)
    exact = gdp_delta(2.0 * math.sqrt(2.0) / 1.5, 1.0)
    assert r.lower <= exact <= r.upper and r.upper - r.lower < 2e-3 * exact
    assert not r.details.get("bracket_gap")


def test_front_door_and_other_accountants():
    """dpsgd_epsilon takes neighboring="replace_one" for random allocation; PRV answers
    both sides, RDP the upper one (no lower)."""
    r = td.dpsgd_epsilon(sampling="random_allocation", noise_multiplier=1.0, epochs=2,
                         steps_per_epoch=100, delta=1e-5, neighboring="replace_one")
    ar = td.dpsgd_epsilon(sampling="random_allocation", noise_multiplier=1.0, epochs=2,
                          steps_per_epoch=100, delta=1e-5)
    assert ar.lower - (ar.upper - ar.lower) <= r.lower <= min(ar.upper, r.upper)
    assert r.details["neighboring"] == "replace_one"
    m = td.RandomAllocation(td.Gaussian(1.0), 100)
    prv = td.PRVAccountant(neighboring="replace_one").compose(m, 2).epsilon(1e-5)
    assert prv.lower <= prv.upper and prv.upper >= r.upper * (1 - 1e-3)
    rdp = td.RDPAccountant(neighboring="replace_one").compose(m, 2).epsilon(1e-5)
    assert rdp.lower is None and rdp.upper >= r.upper * (1 - 1e-3)


def test_fields_repr_scale_and_refusals(tmp_path):
    m = td.RandomAllocation(td.Gaussian(1.2, 0.5), 50).under("replace_one")
    assert isinstance(m, td.AllocationReplaceOne) and m.relations == ("replace_one",)
    d = mechanism_to_dict(m)
    assert mechanism_from_dict(d) == m
    assert "\n" not in repr(m)
    assert m.scaled(2.0) == td.RandomAllocation(td.Gaussian(2.4, 0.5), 50).under("replace_one")
    acc = td.PLDAccountant(neighboring="replace_one").compose(
        td.RandomAllocation(td.Gaussian(1.0), 50), 2)
    td.save(acc, tmp_path / "acc.json")
    assert td.load(tmp_path / "acc.json").epsilon(1e-5).upper == acc.epsilon(1e-5).upper
    bad = {**d, "params": {"allocation": {"mechanism": "Gaussian",
                                          "params": {"sigma": 1.0, "sensitivity": 1.0}}}}
    with pytest.raises(ValueError, match=r"mechanism\.params\.allocation\.mechanism must be"):
        mechanism_from_dict(bad)
    with pytest.raises(ValueError, match="allocation must be a RandomAllocation"):
        td.AllocationReplaceOne(td.Gaussian(1.0))
    # the add/remove accountant keeps the add/remove form
    assert td.RandomAllocation(td.Gaussian(1.0), 5).under("add_or_remove_one") \
        == td.RandomAllocation(td.Gaussian(1.0), 5)


def test_no_amplification_answers_where_the_group_pair_cannot():
    """The no-amplification Gaussian (sensitivity 2 per epoch: 2 epochs of noise 1 are the
    Gaussian of noise 1/2 twice) is the bracket's fallback: it answers for a method that
    refuses the group pair (its mass at +inf: the saddle-point accountant), and where the
    group pair's double-precision floor leaves no finite bound (delta = 1e-290)."""
    import oracle

    ra = td.RandomAllocation(td.Gaussian(1.0), 100)
    spa = td.SaddlePointAccountant(neighboring="replace_one").compose(ra, 2)
    closed = float(oracle.gaussian_epsilon(0.5, 2, 1e-5))
    assert spa.epsilon(1e-5).epsilon == pytest.approx(closed, rel=1e-2)
    pld = td.PLDAccountant(neighboring="replace_one").compose(ra, 2)
    tiny = pld.epsilon(1e-290)
    closed = float(oracle.gaussian_epsilon(0.5, 2, 1e-290))
    assert closed <= tiny.upper <= closed * (1 + 1e-3)
    assert "fallback" in tiny.note and tiny.lower <= tiny.upper
