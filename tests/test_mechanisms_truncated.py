"""Truncated Poisson sampling (mechanisms/truncated.py): the probabilities by enumeration and
simulation, the upper pair against the real mechanism on small datasets, the bracket against
dp_accounting's PLD of TruncatedSubsampledGaussianDpEvent, and the case without truncation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from tightdp import (
    Gaussian,
    PLDAccountant,
    PoissonSubsampled,
    RDPAccountant,
    TruncatedPoisson,
    load,
    save,
)
from tightdp.losses import CoinMixtureLoss
from tightdp.mechanisms.truncated import truncation_probabilities
from tightdp.mechanisms.truncated_lower import TruncatedPoissonLowerPair, batch_count_law


def _enumerated(q: float, batch: int, n: int) -> tuple[float, float, float]:
    """(p_T, q_T, q_eff) by summing over the subsets of the n - 1 other records."""
    p_t = kept_cut = kept = 0.0
    for s in itertools.product((0, 1), repeat=n - 1):
        m = sum(s)
        w = q ** m * (1 - q) ** (n - 1 - m)
        keep = q * min(1.0, batch / (m + 1))
        kept += w * keep
        if m >= batch:
            p_t += w
            kept_cut += w * keep
    return p_t, kept_cut / p_t, kept


@pytest.mark.parametrize("q,batch,n", [(0.3, 2, 7), (0.6, 1, 5), (0.2, 3, 9), (1.0, 2, 6)])
def test_probabilities_by_enumeration(q, batch, n):
    assert truncation_probabilities(q, batch, n) == pytest.approx(_enumerated(q, batch, n),
                                                                  rel=1e-12)


def test_record_kept_by_simulation():
    """The procedure itself (Poisson draw, then a uniformly random subset of the maximum
    size): the record is kept with probability q_eff."""
    q, batch, n, draws = 0.3, 2, 7, 200_000
    rng = np.random.default_rng(11)
    drawn = rng.random((draws, n)) < q
    order = np.argsort(rng.random((draws, n)), axis=1)        # a random order per draw
    rank = np.argsort(order, axis=1)                          # each record's place in it
    # the batch: the first `batch` drawn records in the random order
    place = np.cumsum(np.take_along_axis(drawn, order, axis=1), axis=1)
    kept_sorted = np.take_along_axis(drawn, order, axis=1) & (place <= batch)
    kept = np.take_along_axis(kept_sorted, rank, axis=1)[:, 0]
    q_eff = truncation_probabilities(q, batch, n)[2]
    assert abs(kept.mean() - q_eff) < 4.0 * math.sqrt(q_eff * (1 - q_eff) / draws)


def _output_law(values: list[float], q: float, batch: int) -> dict[float, float]:
    """The law of the batch sum of truncated Poisson sampling over records with 1-d
    contributions ``values``: every draw, and every kept subset of a cut batch."""
    law: dict[float, float] = {}
    n = len(values)
    for s in itertools.product((0, 1), repeat=n):
        idx = [i for i in range(n) if s[i]]
        w = q ** len(idx) * (1 - q) ** (n - len(idx))
        subsets = [idx] if len(idx) <= batch else list(itertools.combinations(idx, batch))
        for sub in subsets:
            loc = round(sum(values[i] for i in sub), 12)
            law[loc] = law.get(loc, 0.0) + w / len(subsets)
    return law


def _hockey(p: dict, qq: dict, s: float, eps: np.ndarray) -> np.ndarray:
    """H_{e^eps}(P || Q) of two finite Gaussian mixtures (noise s), by the trapezoid rule."""
    locs = list(p) + list(qq)
    x = np.linspace(min(locs) - 12 * s, max(locs) + 12 * s, 40001)
    dens = [sum(w * norm.pdf(x, m, s) for m, w in d.items()) for d in (p, qq)]
    return np.array([np.trapezoid(np.maximum(dens[0] - math.exp(e) * dens[1], 0.0), x)
                     for e in eps])


@pytest.mark.parametrize("relation", ["add_or_remove_one", "replace_one"])
def test_upper_pair_dominates_small_datasets(relation):
    """Every assignment of contributions in {-1, 0, 1} to 4 records (n = 4, at most 2 kept,
    q = 0.6): the real mechanism's curve, both directions, is below the upper pair's, and
    above the lower pair's on the datasets the lower pair is."""
    q, batch, s = 0.6, 2, 0.7
    eps = np.array([0.0, 0.4, 1.0, 2.0])
    m = TruncatedPoisson(Gaussian(s), q, batch, 4, neighboring=relation)
    b = m.bracket(1e-3)
    top, bottom = b.upper.delta(eps), b.lower.delta(eps)
    worst = np.zeros_like(eps)
    for others in itertools.product((-1.0, 0.0, 1.0), repeat=3):
        for x, y in ([(1.0, None)] if relation == "add_or_remove_one" else [(1.0, -1.0),
                                                                              (1.0, 0.0)]):
            p = _output_law([x, *others], q, batch)
            qq = _output_law(list(others) if y is None else [y, *others], q, batch)
            h = np.maximum(_hockey(p, qq, s, eps), _hockey(qq, p, s, eps))
            assert np.all(h <= top + 1e-7), (others, x, y, h, top)
            worst = np.maximum(worst, h)
    assert np.all(bottom <= top - 1e-3)       # the gap is real: truncation is not resolved
    # the lower pair's datasets (two axes) beat every 1-d assignment at some eps
    assert np.max(bottom - worst) > 5e-3


def _pair_law(q: float, batch: int, n: int, record: float | None) -> dict:
    """The law of (the record's kept contribution a in {0, record}, others kept b) by
    enumeration: the record contributes 100 record (or is absent), the n - 1 others -1, so
    that the batch sum tells both."""
    vals = [-1.0] * (n - 1) if record is None else [100.0 * record, *([-1.0] * (n - 1))]
    return {(round(k / 100.0), round(100.0 * round(k / 100.0) - k)): w
            for k, w in _output_law(vals, q, batch).items() if w > 0.0}


@pytest.mark.parametrize("q,batch,n", [(0.6, 2, 5), (0.3, 1, 6), (1.0, 2, 4), (0.2, 4, 3)])
def test_batch_count_law_by_enumeration(q, batch, n):
    """The law of (a, b) of truncated_lower against every draw and kept subset."""
    for present in (True, False):
        ref = _pair_law(q, batch, n, 1.0 if present else None)
        got: dict = {}
        for a, (b, lw) in enumerate(batch_count_law(q, batch, n, present=present)):
            for bb, w in zip(b.tolist(), np.exp(lw).tolist(), strict=True):
                got[(a, round(bb))] = got.get((a, round(bb)), 0.0) + w
        got = {k: w for k, w in got.items() if w > 0.0}
        assert set(got) == set(ref)
        for k in ref:
            assert got[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-15), (k, present)


def test_batch_count_law_by_simulation():
    """The sampler itself (Poisson draw, a uniformly random subset of the maximum size): the
    frequencies of (record kept, others kept) match batch_count_law."""
    q, batch, n, draws = 0.3, 2, 7, 200_000
    rng = np.random.default_rng(5)
    drawn = rng.random((draws, n)) < q
    order = np.argsort(rng.random((draws, n)), axis=1)
    place = np.cumsum(np.take_along_axis(drawn, order, axis=1), axis=1)
    kept = np.take_along_axis(np.take_along_axis(drawn, order, axis=1) & (place <= batch),
                              np.argsort(order, axis=1), axis=1)
    a, b = kept[:, 0].astype(int), kept[:, 1:].sum(axis=1)
    law: dict = {}
    for ai, (bs, lw) in enumerate(batch_count_law(q, batch, n, present=True)):
        for bb, w in zip(bs.tolist(), np.exp(lw).tolist(), strict=True):
            law[(ai, round(bb))] = law.get((ai, round(bb)), 0.0) + w
    assert len(law) == 5
    for (ai, bb), w in law.items():
        freq = np.mean((a == ai) & (b == bb))
        assert abs(freq - w) < 5.0 * math.sqrt(w * (1 - w) / draws), (ai, bb)


#: the error of _hockey_2d (trapezoid rule across the kink of the positive part: O(h^2),
#: 3.4e-6 at eps = 0 against the equal total variation of the q_eff pair)
_QUAD = 2e-5


def _hockey_2d(p: dict, qq: dict, s: float, cw: float, eps: np.ndarray) -> np.ndarray:
    """H_{e^eps}(P || Q) of two 2-D Gaussian mixtures (noise s) at (a cw, -b), by the
    trapezoid rule on a grid."""
    x = np.linspace(-abs(cw) - 9 * s, abs(cw) + 9 * s, 1401)
    y = np.linspace(-6.0 - 9 * s, 9 * s, 1401)
    dens = [sum(w * norm.pdf(x, a * cw, s)[:, None] * norm.pdf(y, -b, s)[None, :]
                for (a, b), w in d.items()) for d in (p, qq)]
    return np.array([np.trapezoid(np.trapezoid(np.maximum(dens[0] - math.exp(e) * dens[1],
                                                          0.0), y, axis=1), x) for e in eps])


@pytest.mark.parametrize("relation", ["add_or_remove_one", "replace_one"])
def test_lower_pair_against_its_datasets(relation):
    """The binned pair (both angles) against the exact curve of the mechanism on its
    datasets, by enumeration and quadrature: below it (binning is a post-processing) and
    within 2e-3 of it (the cells resolve it); the pi/2 pair above the old lower pair
    (Poisson at q_eff, the mechanism with the others at 0) and below the upper pair."""
    q, batch, n, s = 0.6, 2, 4, 0.7
    eps = np.array([0.0, 0.4, 1.0, 2.0])
    m = TruncatedPoisson(Gaussian(s), q, batch, n, neighboring=relation)
    other = None if relation == "add_or_remove_one" else -1.0
    p, qq = _pair_law(q, batch, n, 1.0), _pair_law(q, batch, n, other)
    for theta in (0.0, math.pi / 2):
        pair = TruncatedPoissonLowerPair(s, 1.0, q, batch, n, 0.05, theta=theta,
                                         neighboring=relation)
        if theta == 0.0:   # one axis: locations a - b (a: the record's kept contribution)
            lp: dict = {}
            lq: dict = {}
            for d, law in ((lp, p), (lq, qq)):
                for (a, b), w in law.items():
                    d[a - b] = d.get(a - b, 0.0) + w
            exact = np.maximum(_hockey(lp, lq, s, eps), _hockey(lq, lp, s, eps))
        else:
            exact = np.maximum(_hockey_2d(p, qq, s, 1.0, eps), _hockey_2d(qq, p, s, 1.0, eps))
            old = PoissonSubsampled(Gaussian(s), truncation_probabilities(q, batch, n)[2],
                                    neighboring=relation).delta(eps)
            assert np.all(exact >= old - _QUAD), (exact, old)
        got = pair.delta(eps)
        assert np.all(got <= exact + (_QUAD if theta else 1e-7)), (theta, got, exact)
        assert np.all(got >= exact - 2e-3), (theta, got, exact)
        assert np.all(got <= m.bracket(1e-3).upper.delta(eps))


@pytest.mark.parametrize("relation,old_lower", [("add_or_remove_one", 1.7241885097479346),
                                                ("replace_one", 2.6767847707456)])
def test_bracket_narrower_than_the_inclusion_pair(relation, old_lower):
    """q = 0.01, sigma = 1, n = 1000, B = 12, 1000 steps, delta = 1e-5: the lower bound is above
    the one of the Poisson pair at q_eff (old_lower, that pair's lower bound) and below the
    upper bound."""
    m = TruncatedPoisson(Gaussian(1.0), 0.01, 12, 1000)
    r = PLDAccountant(neighboring=relation).compose(m, 1000).epsilon(1e-5)
    assert old_lower + 0.1 < r.lower < r.upper


#: dp_accounting's own test settings for this event (dataset size, rate, maximum batch,
#: noise multiplier), then three of ours; 10 steps each, delta = 1e-5
_SETTINGS = [(1000, 1.0, 100, 1.0), (1000, 0.1, 1000, 1.0), (1000, 1.0, 1000, 1.0),
             (1000, 0.01, 12, 1.0), (60000, 0.004, 256, 0.8), (100, 0.1, 10, 2.0)]


def _dp_accounting_check(interval: float, settings):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    rel = pld.NeighborRel
    k, delta = 10, 1e-5
    for n, q, batch, s in settings:
        m = TruncatedPoisson(Gaussian(s), q, batch, n)
        for relation in ("add_or_remove_one", "replace_one"):
            ref = pld.from_truncated_subsampled_gaussian_mechanism(
                n, q, batch, s, value_discretization_interval=interval,
                neighboring_relation=getattr(rel, relation.upper())).self_compose(k)
            e_ref = ref.get_epsilon_for_delta(delta)
            r = PLDAccountant(neighboring=relation).compose(m, k).epsilon(delta)
            assert r.lower <= e_ref * (1 + 1e-9), (n, q, batch, s, relation)
            if relation == "replace_one":  # the same pair as dp_accounting's
                assert e_ref <= r.upper, (n, q, batch, s, r.upper, e_ref)
                continue
            # add/remove: below dp_accounting's (which takes the replace-one pair for the
            # cut batches); our pair, mixed by dp_accounting from its own Poisson PLDs, is
            # inside our bracket of it
            assert r.upper <= e_ref * (1 + 1e-3)
            p_t, q_t, _ = truncation_probabilities(q, batch, n)
            if p_t == 0.0:
                assert r.upper >= e_ref
                continue
            one = pld.from_gaussian_mechanism(s, sampling_prob=q,
                                              value_discretization_interval=interval)
            two = pld.from_gaussian_mechanism(s / 2, sampling_prob=q_t,
                                              value_discretization_interval=interval)
            e_mix = two.compute_mixture(one, p_t).self_compose(k).get_epsilon_for_delta(delta)
            up = PLDAccountant().compose(m.bracket(1e-3).upper, k).epsilon(delta)
            assert up.lower <= e_mix <= up.upper, (n, q, batch, s, up.lower, e_mix, up.upper)


def test_bracket_against_dp_accounting():
    """At dp_accounting's default discretization 1e-4: its always-truncating setting (the
    never-truncating ones are Poisson's: test_no_truncation_is_poisson; the rest run in the
    slow form)."""
    _dp_accounting_check(1e-4, [_SETTINGS[0]])


@pytest.mark.slow
def test_bracket_against_dp_accounting_fine():
    """Every setting at the fine discretization 1e-5 (minutes of dp_accounting's time)."""
    _dp_accounting_check(1e-5, _SETTINGS)


@pytest.mark.parametrize("relation", ["add_or_remove_one", "replace_one"])
def test_no_truncation_is_poisson(relation):
    m = TruncatedPoisson(Gaussian(1.2), 0.05, 500, 500)
    assert m.bracket(1e-3) is None
    a = PLDAccountant(neighboring=relation).compose(m, 50).epsilon(1e-6)
    b = PLDAccountant(neighboring=relation).compose(PoissonSubsampled(Gaussian(1.2), 0.05),
                                                     50).epsilon(1e-6)
    assert (a.lower, a.upper) == (b.lower, b.upper)


def test_coin_mixture_loss_mixes_the_laws():
    """The loss law of a revealed coin is the weighted mixture: delta(eps) is the weighted
    sum of the parts' (closed forms: Gaussian pairs, mu-GDP)."""
    g1, g2 = Gaussian(1.0).privacy_losses()[0], Gaussian(0.5).privacy_losses()[0]
    mix = CoinMixtureLoss([0.25, 0.75], [g1, g2])
    for eps in (0.0, 1.0, 3.0):
        ref = sum(w * (norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))
                  for w, mu in ((0.25, 1.0), (0.75, 2.0)))
        assert float(mix.delta(eps)) == pytest.approx(ref, rel=1e-9)


def test_rdp_state_and_refusals(tmp_path):
    m = TruncatedPoisson(Gaussian(1.0), 0.01, 12, 1000)
    r = RDPAccountant().compose(m, 100).epsilon(1e-5)
    p = PLDAccountant().compose(m, 100).epsilon(1e-5)
    assert r.upper >= p.lower
    path = tmp_path / "acc.json"
    acc = PLDAccountant(neighboring="replace_one").compose(m, 20)
    save(acc, path)
    assert load(path).epsilon(1e-5).upper == acc.epsilon(1e-5).upper
    assert m.scaled(2.0).base.sigma == 2.0 and "\n" not in repr(m)
    for args, name in [((0.0, 2, 10), "sampling_rate"), ((1.5, 2, 10), "sampling_rate"),
                       ((0.1, 0, 10), "max_batch_size"), ((0.1, 2, 0), "dataset_size")]:
        with pytest.raises(ValueError, match=name):
            TruncatedPoisson(Gaussian(1.0), *args)
    with pytest.raises(ValueError, match="base: TruncatedPoisson supports a Gaussian"):
        TruncatedPoisson(PoissonSubsampled(Gaussian(1.0), 0.1), 0.1, 2, 10)  # type: ignore
    with pytest.raises(ValueError, match="neighboring"):
        PLDAccountant(neighboring="replace_special").compose(m)
