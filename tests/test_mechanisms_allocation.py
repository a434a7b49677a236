"""Random allocation (mechanisms/allocation.py, losses/allocation.py): the bracket against
closed forms, a Monte Carlo of the real sampler, and pld-accounting's bracket."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

import oracle
import tightdp as td
from tightdp.mechanisms.fields import mechanism_from_dict, mechanism_to_dict

SLOW = os.environ.get("TIGHTDP_SLOW") == "1"


def _exact_t2(sigma: float, eps: float) -> tuple[float, float]:
    """(remove, add) delta(eps) of one of two steps, k = 1: with ``w`` iid lognormal under
    Q (``log w ~ N(-a, 2a)``, ``a = 1/(2 sigma^2)``), remove is ``E[(S/2 - e^eps)_+]`` and
    add ``E[(1 - e^eps S/2)_+]``, ``S = w1 + w2``; the inner expectation over ``w2`` in
    closed form (lognormal partial moments), the outer by quadrature."""
    a = 1.0 / (2.0 * sigma * sigma)
    sd = math.sqrt(2.0 * a)

    def rem_inner(w1: float) -> float:
        c = 2.0 * math.exp(eps) - w1          # E[(w2 - c)_+]
        if c <= 0:
            return 1.0 - c
        lc = math.log(c)
        return norm.cdf((a - lc) / sd) - c * norm.cdf((-a - lc) / sd)

    def add_inner(w1: float) -> float:
        c = 2.0 * math.exp(-eps) - w1         # E[(c - w2)_+]
        if c <= 0:
            return 0.0
        lc = math.log(c)
        return c * norm.cdf((lc + a) / sd) - norm.cdf((lc - a) / sd)

    def outer(f) -> float:
        g = lambda z: norm.pdf(z) * f(math.exp(-a + sd * z))   # noqa: E731
        return integrate.quad(g, -12, 12, limit=400, epsabs=1e-13, epsrel=1e-11)[0]

    return outer(rem_inner) / 2.0, math.exp(eps) / 2.0 * outer(add_inner)


def _gauss_delta(mu: float, eps: float) -> float:
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("sigma,eps", [(1.0, 0.5), (0.8, 1.0), (2.0, 0.1)])
def test_two_steps_bracket_the_exact_integral_both_directions(sigma, eps):
    b = td.RandomAllocation(td.Gaussian(sigma), 2).bracket(2.5e-4)
    exact = _exact_t2(sigma, eps)
    up, lo = b.upper.privacy_losses(), b.lower.privacy_losses()
    for i in (0, 1):
        d_up, d_lo = float(up[i].delta(eps)), float(lo[i].delta(eps))
        assert d_lo <= exact[i] <= d_up, (i, d_lo, exact[i], d_up)
        assert d_up - d_lo < 1e-2 * exact[i]   # the rounding near s = 0 at t = 2
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), 2)).delta(eps)
    assert r.lower <= max(exact) <= r.upper


@pytest.mark.parametrize("sigma", [0.5, 0.6])
def test_two_steps_at_small_noise_bracket_the_exact_integral(sigma):
    """At small noise the lognormal's tail is resolved octave by octave: both sides still
    bracket the exact integral in both directions, and the remove direction (the larger
    delta) is resolved within 2e-3 relative; the add direction is coarser at t = 2 (the
    mass near s = 0 sits on one lattice step)."""
    b = td.RandomAllocation(td.Gaussian(sigma), 2).bracket(2.5e-4)
    up, lo = b.upper.privacy_losses(), b.lower.privacy_losses()
    for eps in (0.5, 1.0, 2.0, 4.0):
        exact = _exact_t2(sigma, eps)
        for i in (0, 1):
            d_up, d_lo = float(up[i].delta(eps)), float(lo[i].delta(eps))
            assert d_lo <= exact[i] <= d_up, (eps, i, d_lo, exact[i], d_up)
        assert float(up[0].delta(eps)) - float(lo[0].delta(eps)) < 2e-3 * exact[0]
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), 2)).delta(1.0)
    assert r.lower <= max(_exact_t2(sigma, 1.0)) <= r.upper


def test_one_step_is_the_gaussian():
    for k, steps in ((1, 1), (3, 3)):
        r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(1.0), steps, k),
                                       4).delta(1.0)
        exact = _gauss_delta(math.sqrt(4 * k) / 1.0, 1.0)
        assert r.lower <= exact <= r.upper and r.upper - r.lower < 2e-3 * exact


#: pld-accounting 2.0's gaussian_allocation_epsilon_range (upper, lower) on these settings
#: (sigma, steps, selected, epochs, delta): the public example and runs of the peer
_PEER = {(1.0, 1000, 1, 1, 1e-6): (0.17568649056940722, 0.16865279019689836),
         (0.5, 100, 1, 1, 1e-5): (5.407755511453674, 5.384319999558688)}


@pytest.mark.parametrize("setting", list(_PEER))
def test_intersects_the_vendored_peer_bracket(setting):
    sigma, t, k, e, d = setting
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t, k), e).epsilon(d)
    up, lo = _PEER[setting]
    assert r.lower <= up and lo <= r.upper and r.lower <= r.upper
    if sigma < 0.8:   # the heavy tail's lattice: narrower than the peer's bracket
        assert r.upper - r.lower < up - lo


#: the default run compares one setting (pld-accounting answers it in ~2 s); the other four
#: are the full-size check (TIGHTDP_SLOW=1)
_PEER_SETTINGS = [pytest.param((1.0, 100, 1, 3, 1e-5), id="s1-t100-E3")] + [
    pytest.param(s, marks=pytest.mark.slow) for s in
    [(1.0, 1000, 1, 1, 1e-6), (2.0, 1000, 2, 1, 1e-6), (1.0, 500, 1, 5, 1e-6),
     (1.5, 200, 3, 2, 1e-5)]]


@pytest.mark.parametrize("setting", _PEER_SETTINGS)
def test_intersects_pld_accounting(setting):
    pa = pytest.importorskip("PLD_accounting")
    sigma, t, k, e, d = setting
    up, lo = pa.gaussian_allocation_epsilon_range(delta=d, sigma=sigma, num_steps=t,
                                                  num_selected=k, num_epochs=e)
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t, k), e).epsilon(d)
    assert r.lower <= up and lo <= r.upper and r.lower <= r.upper


@pytest.mark.parametrize("sigma,t,e,d", [(1.0, 1000, 1, 1e-6), (2.0, 100, 1, 1e-5),
                                         (3.0, 10000, 3, 1e-6), (0.8, 1000, 10, 1e-8),
                                         (0.5, 10000, 10, 1e-5)])
def test_default_width_for_one_of_t(sigma, t, e, d):
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t), e).epsilon(d)
    assert 0 < r.upper - r.lower <= 1e-3 * r.upper
    assert r.details["bracket_gap"] is None
    # below E Gaussian steps of noise sigma (the allocation is a mixture of them)
    mu = math.sqrt(e) / sigma
    assert _gauss_delta(mu, r.upper) > d


def test_the_sides_slacks_are_applied_exactly():
    """The joined delta bracket is the lower side's lower bound less E times its slack and
    the upper side's upper bound plus E times its own (constant) slack: both visible,
    recomputed here from the sides."""
    e, eps = 10, np.array([0.5, 1.0, 1.5])
    acc = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(0.8), 1000), e)
    d = acc.delta(eps)
    up, lo, _, (up_slacks, lo_slacks) = acc._bracket_sides()
    (k_up, f_up), (k_lo, f_lo) = up_slacks[0], lo_slacks[0]
    assert k_up == k_lo == e
    s_up, s_lo = e * f_up(eps), e * f_lo(eps)
    assert np.all(s_lo > 0) and np.all(s_up > 0) and np.all(s_up < 1e-9)
    assert np.all(np.diff(s_lo) > 0)   # the lower slack grows with e^eps
    raw_up, raw_lo = up.delta(eps), lo.delta(eps)
    assert np.allclose(d.upper, raw_up.upper + s_up, rtol=1e-14, atol=0)
    assert np.allclose(d.lower, raw_lo.lower - s_lo, rtol=1e-14, atol=0)
    assert np.allclose(d.details["lower_slack"], s_lo) and np.all(d.lower < d.upper)


def _log_ratio(x: np.ndarray, sigma: float, k: int) -> np.ndarray:
    """The exact loss log(P/Q) of outputs ``x`` (n x t): the log of the mean over k-subsets
    of ``prod_{i in S} w_i``, ``w_i = exp((x_i - 1/2) / sigma^2)``."""
    import itertools
    t = x.shape[1]
    lw = (x - 0.5) / sigma ** 2
    subs = list(itertools.combinations(range(t), k))
    terms = np.stack([lw[:, list(s)].sum(axis=1) for s in subs], axis=1)
    m = terms.max(axis=1, keepdims=True)
    return (m[:, 0] + np.log(np.exp(terms - m).mean(axis=1)))


@pytest.mark.parametrize("k,sigma,eps", [(1, 1.0, 0.5), (2, 1.0, 0.5), (1, 0.5, 2.0)])
def test_monte_carlo_of_the_sampler_meets_the_bracket(k, sigma, eps):
    """Evidence, not proof: the real sampler's delta(eps) by Monte Carlo, both directions,
    with a 5-standard-error interval, meets the accountant's bracket (at small noise too,
    where the lattice splits off the large coordinates)."""
    rng = np.random.default_rng(7 + k)
    t, n = 4, 200_000
    x_q = rng.normal(0.0, sigma, size=(n, t))
    x_p = rng.normal(0.0, sigma, size=(n, t))
    for row, s in enumerate(rng.permuted(np.tile(np.arange(t), (n, 1)), axis=1)[:, :k]):
        x_p[row, s] += 1.0
    rem = np.maximum(1.0 - np.exp(eps - _log_ratio(x_p, sigma, k)), 0.0)   # E_P, remove
    add = np.maximum(1.0 - np.exp(eps + _log_ratio(x_q, sigma, k)), 0.0)   # E_Q, add
    est = [(v.mean(), 5 * v.std() / math.sqrt(n)) for v in (rem, add)]
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t, k)).delta(eps)
    hi = max(m + s for m, s in est)
    lo = max(m - s for m, s in est)
    assert r.lower <= hi and lo <= r.upper


def test_bad_input_is_one_line():
    cases = [lambda: td.RandomAllocation(td.Laplace(1.0), 10),
             lambda: td.RandomAllocation(td.Gaussian(1.0), 3, 4),
             lambda: td.RandomAllocation(td.Gaussian(1.0), 3, 0),
             lambda: td.RandomAllocation(td.Gaussian(1.0), 0),
             lambda: td.RandomAllocation(td.Gaussian(1.0), 2.5)]
    names = ["base", "selected", "selected", "steps", "steps"]
    for f, name in zip(cases, names, strict=True):
        with pytest.raises(ValueError) as err:
            f()
        assert "\n" not in str(err.value) and str(err.value).startswith(name)


def test_relations_state_and_scaling():
    m = td.RandomAllocation(td.Gaussian(1.5), 100, 2)
    assert "\n" not in repr(m) and "steps=100" in repr(m)
    assert mechanism_from_dict(mechanism_to_dict(m)) == m
    with pytest.raises(ValueError, match="selected"):
        mechanism_from_dict({"mechanism": "RandomAllocation", "params": {
            "base": mechanism_to_dict(td.Gaussian(1.0)), "steps": 3, "selected": 5}})
    assert m.scaled(2.0) == td.RandomAllocation(td.Gaussian(3.0), 100, 2)
    # replace-one: its own bracketed form (tests/test_mechanisms_allocation_replace.py)
    assert td.PLDAccountant(neighboring="replace_one").compose(m).terms[0][0] \
        == td.AllocationReplaceOne(m)
    acc = td.PLDAccountant(neighboring="replace_special").compose(m, 2)
    d = acc.delta(np.array([0.0, 0.5, 2.0]))
    assert np.all(d.lower <= d.upper) and "composition" in d.note


@pytest.mark.parametrize("sigma", [0.03, 1e-20, 1e-300])
def test_noise_below_the_lattice_range_answers_no_amplification(sigma):
    """Below SIGMA_LATTICE_MIN the lattice's likelihood ratios overflow: the answer is no
    amplification (one Gaussian per epoch: exact mu-GDP, mu = 1 / sigma, from the oracle)
    above and 0 below, said in the note; beyond the doubles the closed form's inf."""
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), 100), 1).epsilon(1e-5)
    assert r.lower is None or r.lower == 0.0
    if sigma >= 1e-100:
        exact = float(oracle.gaussian_epsilon(sigma, 1, 1e-5))
        assert exact <= r.upper <= exact * (1 + 1e-3)
        assert "allocation lattice is beyond floating point" in r.note
    else:
        assert r.upper == math.inf


@pytest.mark.parametrize("sigma", [0.1, 0.2])
def test_small_noise_upper_is_at_most_no_amplification(sigma):
    """Where the lattice's slack exceeds delta its upper side has no finite bound; the
    answer's upper bound is then the no-amplification one (one Gaussian per epoch: its
    exact epsilon and delta from the oracle, within the PLD's rtol), finite, and the
    bracket stays ordered."""
    acc = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), 1000), 2)
    r = acc.epsilon(1e-5)
    exact = float(oracle.gaussian_epsilon(sigma, 2, 1e-5))
    assert math.isfinite(r.upper) and r.upper <= exact * (1 + 1e-3)
    assert r.lower is None or r.lower <= r.upper
    eps = np.array([0.5 * exact, exact])
    d = acc.delta(eps)
    gauss = np.array([float(oracle.gaussian_delta(sigma, 2, e)) for e in eps])
    assert np.all(d.upper < 1.0) and np.all(d.upper <= gauss * (1 + 1e-2))
    assert np.all(d.lower <= d.upper)
