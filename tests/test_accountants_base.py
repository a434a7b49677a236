"""The neighbouring relation an accountant holds (``neighboring=``), and the mechanisms it
refuses under it: a composition is a guarantee under one relation, never a number mixing the
pairs of two (sampling without replacement is replace-one, Poisson sampling add/remove)."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import tightdp as td
from tightdp.accountants.registry import ACCOUNTANTS, make_accountant

SWOR = td.SampledWithoutReplacement(td.Gaussian(1.0), 0.01)
POISSON = td.PoissonSubsampled(td.Gaussian(1.0), 0.01)

#: (epsilon, lower, upper) at delta = 1e-5 of 100 x SampledWithoutReplacement(Gaussian(1),
#: 0.01) as main answered them before accountants held a relation (commit 531d542, the
#: accountants of _ACCOUNTANTS below); a replace-one accountant answers them bit for bit
BEFORE = {
    "pld": (6.476231507783284, 6.4761696648690705, 6.476231507783284),
    "prv": (6.485964370578632, 6.466684428310614, 6.485964370578632),
    "rdp": (8.014877699873216, None, 8.014877699873216),
    "fft": (6.47616413765633, None, None),
    "spa": (6.478631644212318, None, 8.013524350853835),
}


def _accountant(name: str, neighboring: str):
    opts = {"pld": {"rtol": 1e-3}, "prv": {"eps_error": 0.01},
            "fft": {"L": 20.0, "n": 200_000}}.get(name, {})
    return make_accountant(name, neighboring=neighboring, **opts)


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
def test_mixed_relations_are_refused_in_one_line_naming_both(name):
    # the default is add/remove: a replace-one mechanism is refused, saying what to pass
    with pytest.raises(ValueError) as e:
        make_accountant(name).compose(SWOR, 100)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("SampledWithoutReplacement is defined under "
                                              "neighboring=replace_one")
    assert f"this {name} accountant's neighboring=add_or_remove_one" in msg
    assert "neighboring='replace_one'" in msg
    # replace-one: a mixture of Gaussians (add/remove, replace-special) is refused after it
    acc = make_accountant(name, neighboring="replace_one")
    if name != "gdp":  # the GDP accountant has no description of sampling without replacement
        acc.compose(SWOR, 100)
    with pytest.raises(ValueError, match=r"^MixtureOfGaussians is defined under neighboring="
                                         r"add_or_remove_one or replace_special, not under "
                                         rf"this {name} accountant's neighboring=replace_one"):
        acc.compose(td.MixtureOfGaussians([0.0, 1.0], [0.5, 0.5], 1.0), 2)
    # and the default composes Poisson sampling, then refuses sampling without replacement
    acc = make_accountant(name).compose(POISSON, 100)
    with pytest.raises(ValueError, match="^SampledWithoutReplacement is defined under"):
        acc.compose(SWOR, 100)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_replace_one_answers_as_before(name):
    r = _accountant(name, "replace_one").compose(SWOR, 100).epsilon(1e-5)
    # the answers recorded before the relation was plumbed through, to 1e-9 relative:
    # FFT-based accountants differ in the last bits between numpy releases (pocketfft), and
    # the root searches move by that much (9e-11 between numpy 2.1 and 2.4)
    got, want = (r.epsilon, r.lower, r.upper), BEFORE[name]
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx(
        [w for w in want if w is not None], rel=1e-9, abs=0)
    assert r.details["neighboring"] == "replace_one"


def _gdp_eps(mu: float, delta: float) -> float:
    """eps(delta) of mu-GDP: the root of Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2) = delta
    (Dong, Roth, Su 2022, Cor. 2.13)."""
    def f(e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(f, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_replace_one_batch_of_everything_is_gaussian_of_sensitivity_two(name):
    # q = 1 under replace-one: the batch is the whole dataset, a record replaced moves the
    # sum by 2c (worst case), so k steps of noise sigma are mu-GDP with mu = 2 sqrt(k) / sigma
    k, sigma, delta = 100, 10.0, 1e-5
    exact = _gdp_eps(2.0 * math.sqrt(k) / sigma, delta)
    mech = td.SampledWithoutReplacement(td.Gaussian(sigma), 1.0)
    r = _accountant(name, "substitute").compose(mech, k).epsilon(delta)
    if r.upper is not None:
        assert r.upper >= exact * (1 - 1e-12)
    if r.lower is not None:
        assert r.lower <= exact * (1 + 1e-12)
    if name == "fft":  # an approximation, within its own error estimate
        assert abs(r.epsilon - exact) <= 1e-3 * exact
    if name == "pld":
        assert r.upper - r.lower <= 2e-3 * exact


def test_relation_names_and_aliases():
    for given, canonical in (("add-remove", "add_or_remove_one"), (" Substitute ", "replace_one"),
                             ("REPLACE_SPECIAL", "replace_special")):
        assert td.PLDAccountant(neighboring=given).neighboring == canonical
    assert td.PLDAccountant().neighboring == "add_or_remove_one"
    for bad in ("add", "", None, 1):
        with pytest.raises(ValueError, match=r"^neighboring must be one of add_or_remove_one, "
                                             r"replace_one, replace_special \(or add_remove"):
            td.PLDAccountant(neighboring=bad)


def test_what_each_mechanism_is_defined_under():
    every = {"add_or_remove_one", "replace_one", "replace_special"}
    for m in (td.Gaussian(1.0), td.Laplace(1.0), td.DiscreteLaplace(1.0), td.PureDP(1.0),
              td.ApproxDP(1.0, 1e-6)):
        assert set(m.relations) == every, m
    for m in (POISSON, td.MixtureOfGaussians([1.0], [1.0], 1.0)):
        assert set(m.relations) == {"add_or_remove_one", "replace_special"}, m
    for m in (SWOR, td.SampledWithReplacement(td.Gaussian(1.0), 2, 10),
              td.RandomizedResponse(0.5)):
        assert m.relations == ("replace_one",), m
    # a query of many deltas names it per query, as every detail of a stacked answer
    r = td.PLDAccountant(rtol=1e-2, neighboring="replace_special").compose(
        POISSON, 10).epsilon([1e-5, 1e-6])
    assert r.details["neighboring"] == ["replace_special"] * 2


def test_repr_shows_the_composition():
    acc = td.PLDAccountant()
    acc.compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), 10_000)
    assert repr(acc) == (
        "PLDAccountant(rtol=0.001, neighboring='add_or_remove_one', terms=["
        "PoissonSubsampled(q=0.01, base=Gaussian(sigma=1.0, sensitivity=1.0)) x 10000])")
    for s in range(6):  # ten distinct mechanisms: the first three shown, then a count
        acc.compose(td.Gaussian(2.0 + s), 2)
    text = repr(acc)
    assert "\n" not in text and text.count(" x ") == 3
    assert text.endswith("... 4 more (10012 steps in all)])")
    assert repr(td.PRVAccountant(eps_error=0.1, neighboring="replace_one")) == (
        "PRVAccountant(eps_error=0.1, delta_error=1e-09, neighboring='replace_one', terms=[])")
