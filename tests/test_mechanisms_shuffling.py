"""Shuffled fixed batches (mechanisms/shuffling.py): the upper side against the Gaussian closed
form (no amplification), the lower side against the "cube" attack of Chua et al. (ICML 2024)
computed here from the law of the largest batch sum, and the laws against a simulation of the
real sampler."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_ndtr
from scipy.stats import binom, norm

import tightdp as td
from tightdp.mechanisms.fields import mechanism_from_dict, mechanism_to_dict

SIGMAS = (0.5, 0.7, 1.0, 1.5, 2.0)
#: the values of the issue (t = 1000, E = 1, delta = 1e-6), rounded to two decimals
NO_AMP = (11.00, 7.37, 4.89, 3.10, 2.25)
CUBE = (11.00, 7.31, 3.72, 0.60, 0.11)


def _bisect(f, lo: float, hi: float) -> float:
    """The largest eps in [lo, hi] with f(eps) > 0 for a decreasing f (200 halvings)."""
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return hi


def gdp_eps(mu: float, delta: float) -> float:
    """epsilon of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13)."""
    return _bisect(lambda e: norm.cdf(-e / mu + mu / 2)
                   - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0.0, 300.0)


def tails(c, s: float, t: int, shift: float) -> np.ndarray:
    """P(max_i x_i > c) for one x_i ~ N(shift, s^2) and t - 1 ~ N(0, s^2)."""
    c = np.asarray(c, dtype=float)
    return -np.expm1(log_ndtr((c - shift) / s) + (t - 1) * log_ndtr(c / s))


def cube_eps(s: float, t: int, delta: float, shifts=(2.0, 1.0), epochs: int = 1,
             grid=None) -> float:
    """Chua et al.'s lower bound: the sets {max_i x_i > C}, over a grid of C; for several
    epochs the E-fold product of these Bernoulli pairs (the count of epochs in the set)."""
    grid = np.linspace(-5.0, 20.0, 50_001) if grid is None else grid
    p, q = tails(grid, s, t, shifts[0]), tails(grid, s, t, shifts[1])
    if epochs == 1:
        return _bisect(lambda e: float(np.max(p - math.exp(e) * q)) - delta, 0.0, 300.0)
    k = np.arange(epochs + 1)
    pk, qk = binom.pmf(k, epochs, p[:, None]), binom.pmf(k, epochs, q[:, None])
    return _bisect(lambda e: float(np.max(np.maximum(pk - math.exp(e) * qk, 0.0).sum(1)))
                   - delta, 0.0, 300.0)


def cube_sup(s: float, t: int, delta: float, shifts=(2.0, 1.0)) -> float:
    """Chua et al.'s one-epoch lower bound with its threshold continuous: the sup over C of
    the epsilon of the pair of Bernoulli laws of {max_i x_i > C}, ``log((P - delta) / Q)``
    (Chua et al. 2024, Sec. 4), scipy.stats only: the tails from ``norm.logcdf``, the best
    C of a grid refined by a bounded Brent search."""
    def eps_c(c: float) -> float:
        p, q = (-math.expm1(norm.logcdf((c - m) / s) + (t - 1) * norm.logcdf(c / s))
                for m in shifts)
        return math.log((p - delta) / q) if p > delta else -math.inf

    grid = np.linspace(-5.0, 20.0, 2001)
    k = int(np.argmax([eps_c(c) for c in grid]))
    best = minimize_scalar(lambda c: -eps_c(c), bounds=(grid[k - 1], grid[k + 1]),
                           method="bounded", options={"xatol": 1e-12})
    return max(-float(best.fun), eps_c(grid[k]))


def special(s: float, t: int, epochs: int = 1, **kw) -> td.PLDAccountant:
    return td.PLDAccountant(neighboring="replace_special", **kw).compose(
        td.Shuffled(td.Gaussian(s), t), epochs)


@pytest.mark.parametrize("i", range(len(SIGMAS)))
def test_one_epoch_between_the_attack_and_no_amplification(i):
    s, t, delta = SIGMAS[i], 1000, 1e-6
    acc = special(s, t)
    r = acc.epsilon(delta)
    no_amp, cube = gdp_eps(1.0 / s, delta), cube_eps(s, t, delta)
    assert (round(no_amp, 2), round(cube, 2)) == (NO_AMP[i], CUBE[i])
    # upper: the Gaussian step, certified from above within the accountant's rtol
    assert no_amp <= r.upper <= no_amp * (1 + 1e-3)
    # lower: one epoch is answered from the exact law of the largest batch sum, which is at
    # least as strong as its best threshold set (the cube bound, here with its threshold
    # continuous). Its likelihood ratio is monotone, so the two coincide: the margin is
    # floating point only, the reference's tails (t u relative each: ~2e-13 in eps) and
    # the certified rounding charge of ours (< 1e-13 in eps), 1e-12 in all
    sup = cube_sup(s, t, delta)
    assert cube <= sup <= cube + 1e-5   # the grid's sup is below, by its spacing squared
    assert sup - 1e-12 <= r.lower <= r.upper
    assert r.lower - sup < 1e-9   # the same statistic: no more than the cube either
    # at the cube's epsilon, delta: the reference's tails carry t u each, (P + e^eps Q) t u
    # in delta, below 1e-10 delta here
    d = acc.delta(sup)
    assert delta * (1 - 1e-10) <= d.lower <= d.upper
    assert "no certified upper bound better than no amplification" in r.note
    assert "Chua et al." in r.note


@pytest.mark.parametrize("name", ["pld", "prv", "spa", "rdp", "gdp"])
def test_one_epoch_lower_is_the_cube_for_every_accountant_with_one(name):
    """One epoch: every accountant that answers the lower side answers at least the cube
    bound (the single application's exact curve, whatever its own discretization); those
    without a lower bound keep none. sigma = 1: the cube is 3.72 (table)."""
    from tightdp.accountants.registry import make_accountant
    s, t, delta = 1.0, 1000, 1e-6
    acc = make_accountant(name, neighboring="replace_special").compose(
        td.Shuffled(td.Gaussian(s), t))
    sup = cube_sup(s, t, delta)
    r, d = acc.epsilon(delta), acc.delta(sup)
    assert r.lower is None or sup - 1e-12 <= r.lower <= r.upper
    assert d.lower is None or delta * (1 - 1e-10) <= d.lower <= d.upper
    assert (r.lower is None) == (name in ("spa", "rdp", "gdp"))
    assert (d.lower is None) == (name in ("rdp", "gdp"))


@pytest.mark.parametrize("s", [0.7, 1.5])
def test_the_binned_pair_holds_every_threshold_set_of_its_edges(s):
    """The lower pair's bins are exact: its hockey-stick divergence is at least that of each
    set {max > C} with C an edge, computed here from the closed-form tails."""
    t = 1000
    low = td.Shuffled(td.Gaussian(s), t).bracket(2.5e-4).lower
    lp, lq = low.log_masses()
    p, q = np.exp(lp), np.exp(lq)
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and q.sum() == pytest.approx(1.0, abs=1e-12)
    edges = low.edges()
    for eps in (0.0, 0.5 * cube_eps(s, t, 1e-6), cube_eps(s, t, 1e-6)):
        a = math.exp(eps)
        binned = float(np.maximum(p - a * q, 0.0).sum())
        sets = float(np.max(tails(edges, s, t, 2.0) - a * tails(edges, s, t, 1.0)))
        assert binned >= sets * (1 - 1e-9)


@pytest.mark.parametrize("s", SIGMAS)
def test_five_epochs_beat_the_composed_attack(s):
    t, delta, e = 1000, 1e-6, 5
    r = special(s, t, e).epsilon(delta)
    no_amp = gdp_eps(math.sqrt(e) / s, delta)
    assert no_amp <= r.upper <= no_amp * (1 + 1e-3)
    one = special(s, t).epsilon(delta)
    composed = cube_eps(s, t, delta, epochs=e, grid=np.linspace(0.0, 12.0, 481))
    assert one.lower < composed <= r.lower <= r.upper


def test_replace_one_pair():
    """Replace-one: the record +1 against -1, the others -1 (the batch moves by 2 or 0):
    upper of sensitivity 2, lower at least the threshold sets of that pair."""
    s, t, delta = 1.0, 1000, 1e-6
    m = td.Shuffled(td.Gaussian(s), t, neighboring="replace_one")
    r = td.PLDAccountant(neighboring="replace_one").compose(m, 2).epsilon(delta)
    no_amp = gdp_eps(math.sqrt(2) * 2.0 / s, delta)
    assert no_amp <= r.upper <= no_amp * (1 + 1e-3)
    composed = cube_eps(s, t, delta, shifts=(2.0, 0.0), epochs=2,
                        grid=np.linspace(0.0, 12.0, 481))
    assert composed * (1 - 1e-3) <= r.lower <= r.upper
    with pytest.raises(ValueError, match="neighboring=replace_one"):
        td.PLDAccountant(neighboring="replace_special").compose(m)


def test_the_pair_is_not_symmetric_and_both_directions_count():
    rem, add = td.Shuffled(td.Gaussian(1.0), 100).bracket(1e-3).lower.privacy_losses()
    d_rem, d_add = rem.delta(np.array([0.5, 1.0])), add.delta(np.array([0.5, 1.0]))
    assert not np.allclose(d_rem, d_add)
    d = td.PLDAccountant(neighboring="replace_special").compose(
        td.Shuffled(td.Gaussian(1.0), 100)).delta(np.array([0.5, 1.0]))
    assert np.all(d.lower >= np.maximum(d_rem, d_add) * (1 - 1e-3))
    assert np.all(d.lower <= d.upper)


def test_simulated_shuffling_lies_in_the_bracket():
    """The real sampler on Chua et al.'s dataset: 8 records in 4 batches of 2, the record
    +1 (D) or null (D'), the others -1; noise sigma = 1. The empirical law of the largest
    batch sum matches the closed form, and its best threshold set's hockey-stick estimate
    lies within the bracket (within four standard errors)."""
    rng = np.random.default_rng(20240611)
    n, s, t, eps = 200_000, 1.0, 4, 0.5
    maxima = []
    for record in (1.0, 0.0):
        values = np.array([record] + [-1.0] * 7)
        perm = np.argsort(rng.random((n, 8)), axis=1)
        sums = values[perm].reshape(n, t, 2).sum(axis=2) + rng.normal(0.0, s, (n, t))
        maxima.append(sums.max(axis=1) + 2.0)   # relative to a batch of two -1s
    mp, mq = maxima
    for c in (0.5, 1.5, 2.5, 3.5):
        for m, shift in ((mp, 2.0), (mq, 1.0)):
            f = float(tails(c, s, t, shift))
            assert abs(np.mean(m > c) - f) < 4 * math.sqrt(f * (1 - f) / n)
    cs = np.linspace(-1.0, 6.0, 141)
    hp, hq = (mp[:, None] > cs).mean(0), (mq[:, None] > cs).mean(0)
    k = int(np.argmax(hp - math.exp(eps) * hq))
    est = hp[k] - math.exp(eps) * hq[k]
    se = math.sqrt(hp[k] * (1 - hp[k]) / n + math.exp(2 * eps) * hq[k] * (1 - hq[k]) / n)
    r = td.PLDAccountant(neighboring="replace_special").compose(
        td.Shuffled(td.Gaussian(s), t)).delta(eps)
    assert r.lower - 4 * se <= est <= r.upper + 4 * se
    assert abs(est - r.lower) < 4 * se + 1e-3 * r.lower   # the attack is the max statistic


def test_other_accountants_answer_both_sides_or_the_upper():
    m = td.Shuffled(td.Gaussian(1.0), 1000)
    prv = td.PRVAccountant(neighboring="replace_special").compose(m, 3).epsilon(1e-6)
    no_amp = gdp_eps(math.sqrt(3), 1e-6)
    assert prv.lower <= prv.upper and prv.upper >= no_amp
    assert prv.lower >= special(1.0, 1000, 3).epsilon(1e-6).lower * (1 - 1e-2)
    gdp = td.GDPAccountant(neighboring="replace_special").compose(m, 3).epsilon(1e-6)
    assert gdp.upper == pytest.approx(no_amp, rel=1e-6)
    assert gdp.lower is None   # no gdp() for the binned pair: the upper side only
    rdp = td.RDPAccountant(neighboring="replace_special").compose(m, 3).epsilon(1e-6)
    assert rdp.lower is None and rdp.upper >= no_amp


def test_one_batch_closes_the_bracket():
    """steps = 1: no shuffling, the lower pair is the Gaussian pair (N(2, s^2), N(1, s^2))."""
    r = special(1.3, 1, 4).epsilon(1e-6)
    exact = gdp_eps(2.0 / 1.3, 1e-6)
    assert r.lower <= exact <= r.upper and r.upper - r.lower < 2e-3 * exact


@pytest.mark.parametrize("t", [1000, 100_000])
def test_a_query_is_fast(t):
    acc = special(0.8, t, 10)
    start = time.perf_counter()
    r = acc.epsilon(1e-6)
    assert time.perf_counter() - start < 5.0
    assert 0 < r.lower <= r.upper


def test_fields_repr_scale_and_refusals():
    m = td.Shuffled(td.Gaussian(1.2, 0.5), 250)
    d = mechanism_to_dict(m)
    assert d == {"mechanism": "Shuffled", "params": {
        "base": {"mechanism": "Gaussian", "params": {"sigma": 1.2, "sensitivity": 0.5}},
        "steps": 250, "neighboring": "replace_special"}}
    assert mechanism_from_dict(d) == m
    assert "\n" not in repr(m) and "steps=250" in repr(m)
    assert "\n" not in repr(m.bracket(1e-3).lower)
    assert m.scaled(2.0) == td.Shuffled(td.Gaussian(2.4, 0.5), 250)
    # loss scale: that of one Gaussian step, r^2 / 2 + r with r = C / sigma
    r = 0.5 / 1.2
    assert m.loss_scale == pytest.approx(r * r / 2 + r)
    r = 1.0 / 1.2
    assert td.Shuffled(td.Gaussian(1.2, 0.5), 2, neighboring="substitute").loss_scale \
        == pytest.approx(r * r / 2 + r)
    bad = [(lambda: td.Shuffled(td.Gaussian(1.0), 0), "steps must be an integer >= 1"),
           (lambda: td.Shuffled(td.Laplace(1.0), 10), "base must be a Gaussian"),
           (lambda: td.Shuffled(td.Gaussian(1.0), 10, neighboring="add_or_remove_one"),
            "neighboring must be replace_special or replace_one"),
           (lambda: td.PLDAccountant().compose(td.Shuffled(td.Gaussian(1.0), 10)),
            "defined under neighboring=replace_special"),
           (lambda: mechanism_from_dict({**d, "params": {**d["params"], "steps": 0}}),
            r"mechanism\.params\.steps must be an integer >= 1")]
    for make, msg in bad:
        with pytest.raises(ValueError, match=msg) as err:
            make()
        assert "\n" not in str(err.value)


def test_saved_and_loaded(tmp_path):
    acc = special(1.0, 500, 3)
    td.save(acc, tmp_path / "acc.json")
    back = td.load(tmp_path / "acc.json")
    assert back.epsilon(1e-5).upper == acc.epsilon(1e-5).upper


@pytest.mark.parametrize("s", [0.05, 0.3, 10.0, 1e3])
def test_extreme_noise_keeps_the_order(s):
    """Far outside the table: small noise (bins merged where a mass underflows), large noise
    (laws nearly equal); the bracket stays ordered and the upper is the Gaussian's."""
    r = special(s, 100_000, 2).epsilon(1e-6)
    assert 0 <= r.lower <= r.upper
    assert r.upper >= gdp_eps(math.sqrt(2) / s, 1e-6)


def test_vanishing_noise_answers_without_a_traceback():
    """sigma = 1e-300: the lower pair's bins are capped (its span overflows) and the answer is
    the closed form of the upper side beyond the doubles (limits): inf, no lower bound."""
    r = td.PLDAccountant(neighboring="replace_special").compose(
        td.Shuffled(td.Gaussian(1e-300), 100), 1).epsilon(1e-5)
    assert r.upper == math.inf and r.lower is None
