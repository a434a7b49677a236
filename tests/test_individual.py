"""Tests of tightdp.individual: GDP/RDP filters, odometer, individual GDP filter, individual
PLD accounting (Koskela, Tobaben, Honkela, paper 000)."""

from __future__ import annotations

import math
import os
import sys

import mpmath
import numpy as np
import pytest
from scipy import fft as sfft

from tightdp import (
    BudgetExceeded,
    Gaussian,
    PLDAccountant,
    PoissonSubsampled,
    SaddlePointAccountant,
)
from tightdp.individual import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    IndividualPLDAccountant,
    IndividualSPAAccountant,
    RDPFilter,
    individual_epsilons,
    rdp_to_epsilon,
)
from tightdp.individual.evaluator import Evaluator
from tightdp.individual.plancherel import (
    LOG_WINDOW_TAIL,
    BucketLaws,
    Direction,
    bucket_loss_range,
)
from tightdp.losses.cgf import cgf
from tightdp.pld.discretize import connect_the_dots

DELTA = 1e-5


def mp_gdp_delta(mu: float, eps: float) -> float:
    """Independent mu-GDP curve (Dong, Roth, Su 2022, Cor. 2.13) in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    phi = mpmath.ncdf
    return float(phi(-eps / mu + mu / 2) - mpmath.exp(eps) * phi(-eps / mu - mu / 2))


# ----------------------------------------------------------------------------------------------
# GDP filter
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mu,sigma", [(1.0, 10.0), (0.7191174352, 50.0), (2.5, 3.0)])
def test_gdp_filter_admits_floor_mu2_sigma2(mu, sigma):
    f = GDPFilter(mu)
    n = 0
    while f.request(1.0 / sigma):
        n += 1
    # closed form: largest k with k / sigma^2 <= mu^2 (mpmath to decide exact ties)
    mpmath.mp.dps = 40
    k = int(mpmath.floor(mpmath.mpf(mu) ** 2 * mpmath.mpf(sigma) ** 2 * (1 + mpmath.mpf(1e-14))))
    assert n == k
    assert f.spent_mu <= mu * (1 + 1e-14)


def test_gdp_filter_curve_matches_mpmath():
    f = GDPFilter(1.3)
    for eps in (0.0, 0.5, 2.0, 5.0):
        assert f.delta(eps).delta == pytest.approx(mp_gdp_delta(1.3, eps), rel=1e-9)
    e = f.epsilon(1e-6).epsilon
    assert mp_gdp_delta(1.3, e) == pytest.approx(1e-6, rel=1e-8)


def test_gdp_filter_composition_never_exceeds_budget_and_tight_when_spent():
    """Adaptive random requests: the exact curve of the admitted composition (Gaussian
    mechanisms, accounted by the certified PLD accountant) stays below the budget curve; after
    spending the remainder exactly (Remark 3) the curves coincide."""
    rng = np.random.default_rng(3)
    budget = 1.0
    f = GDPFilter(budget)
    admitted = []
    for _ in range(40):
        mu_t = float(rng.uniform(0.05, 0.6)) * (1.5 if admitted and admitted[-1] > 0.3 else 1)
        if f.request(mu_t):
            admitted.append(mu_t)
    acc = PLDAccountant()
    for m in admitted:
        acc.compose(Gaussian(1.0 / m))
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    comp = acc.delta(eps)
    assert np.all(comp.lower <= f.delta(eps).delta)
    # spend the rest exactly: now the composition is exactly budget-GDP
    rest = f.remaining_mu
    assert rest > 0 and f.request(rest)
    assert f.spent_mu == pytest.approx(budget, rel=1e-14)
    acc.compose(Gaussian(1.0 / rest))
    comp = acc.delta(eps)
    assert np.all(comp.lower <= f.delta(eps).delta)
    assert np.all(f.delta(eps).delta <= comp.upper * (1 + 1e-12) + 1e-15)
    assert not f.request(1e-3)


def test_gdp_filter_rejects_bad_input():
    with pytest.raises(ValueError, match="mu_budget"):
        GDPFilter(0.0)
    with pytest.raises(ValueError, match="mu_t"):
        GDPFilter(1.0).request(-1.0)
    with pytest.raises(ValueError, match="delta"):
        GDPFilter(1.0).epsilon(0.0)


def test_gdp_odometer():
    od = GDPOdometer(0.5)
    for _ in range(10):
        od.record(0.25)  # four steps per filter of budget 0.5
    assert od.n_filters == 3
    assert od.spent_mu == pytest.approx(math.sqrt(3) * 0.5, rel=1e-12)
    assert od.spent_mu >= od.realized_mu
    assert od.delta(1.0).delta == pytest.approx(mp_gdp_delta(od.spent_mu, 1.0), rel=1e-9)
    with pytest.raises(ValueError, match="step_mu"):
        od.record(0.6)


# ----------------------------------------------------------------------------------------------
# RDP filter
# ----------------------------------------------------------------------------------------------
def test_rdp_filter_counts_and_conversion():
    eps, sigma = 3.0, 50.0
    r = RDPFilter.from_epsilon_delta(eps, DELTA)
    a = r.order
    # budget converts exactly to eps by (C.3)
    direct = r.budget + math.log((a - 1) / a) - (math.log(DELTA) + math.log(a)) / (a - 1)
    assert direct == pytest.approx(eps, rel=1e-12)
    assert r.epsilon(DELTA).epsilon == pytest.approx(eps, rel=1e-9)
    n = 0
    while r.request(1.0 / sigma):
        n += 1
    assert n == math.floor(r.budget * 2 * sigma ** 2 / a * (1 + 1e-14))
    # GDP admits more steps for the same (eps, delta) (App. C.4)
    g = GDPFilter.__new__(GDPFilter)
    from tightdp.curves.gdp import gdp_mu

    g.__init__(gdp_mu(eps, DELTA))
    m = 0
    while g.request(1.0 / sigma):
        m += 1
    assert m > n


def test_rdp_to_epsilon_formula():
    # (C.3) at alpha = 2, rdp = 1: 1 + log(1/2) - (log delta + log 2)
    assert rdp_to_epsilon(1.0, 2.0, DELTA) == pytest.approx(
        1.0 + math.log(0.5) - (math.log(DELTA) + math.log(2.0)), rel=1e-12)


# ----------------------------------------------------------------------------------------------
# individual GDP filter
# ----------------------------------------------------------------------------------------------
def test_individual_gdp_filter_exact_last_step():
    sigma, C, budget = 2.0, 1.5, 1.0
    f = IndividualGDPFilter(budget, sigma, C, 3)
    norms = np.array([5.0, 0.75, 0.0])  # clipped: mu = 0.5 per step; 0.25; 0
    contrib = []
    for _ in range(20):
        fac = f.step(norms)
        contrib.append(fac * np.minimum(norms, C) / (sigma * C))
    contrib = np.array(contrib)
    spent = np.sqrt((contrib ** 2).sum(axis=0))
    # example 0: 4 full steps of 0.5 fill 1.0 exactly; example 1: 16 steps of 0.25
    assert np.count_nonzero(contrib[:, 0]) == 4
    assert np.count_nonzero(contrib[:, 1]) == 16
    assert spent[:2] == pytest.approx([budget, budget], rel=1e-14)
    assert f.active.tolist() == [False, False, True]
    assert f.spent_mu == pytest.approx(spent, rel=1e-14, abs=0)
    # exhausted examples get the (tight, Remark 3) budget curve
    e = f.epsilon(DELTA).epsilon
    assert e[0] == pytest.approx(f.budget_epsilon(DELTA).epsilon, rel=1e-12)
    assert e[2] == 0.0
    assert mp_gdp_delta(budget, f.budget_epsilon(DELTA).epsilon) == pytest.approx(DELTA,
                                                                                 rel=1e-8)


def test_individual_gdp_filter_scaled_last_step():
    sigma, C, budget = 1.0, 1.0, 1.0
    f = IndividualGDPFilter(budget, sigma, C, 1)
    assert f.step(np.array([0.8]))[0] == 1.0  # spends 0.64
    fac = f.step(np.array([0.8]))[0]  # 0.36 left: factor 0.6 / 0.8
    assert fac == pytest.approx(0.75, rel=1e-14)
    assert f.spent_mu[0] == pytest.approx(1.0, rel=1e-14)
    assert f.step(np.array([0.8]))[0] == 0.0


def test_individual_gdp_filter_skip_mode_and_validation():
    f = IndividualGDPFilter(1.0, 1.0, 1.0, 2, exact_last_step=False)
    f.step(np.array([0.8, 0.8]))
    fac = f.step(np.array([0.8, 0.5]))  # 0.64+0.64 > 1 skipped; 0.64+0.25 fits
    assert fac.tolist() == [0.0, 1.0]
    assert f.active.tolist() == [True, True]
    with pytest.raises(ValueError, match="grad_norms"):
        f.step(np.array([1.0]))
    with pytest.raises(ValueError, match="grad_norms"):
        f.step(np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="noise_multiplier"):
        IndividualGDPFilter(1.0, -1.0, 1.0, 2)


# ----------------------------------------------------------------------------------------------
# individual PLD accounting
# ----------------------------------------------------------------------------------------------
Q, SIGMA, T = 0.05, 1.0, 100


@pytest.fixture(scope="module")
def worst_and_half():
    acc_w = PLDAccountant().compose(PoissonSubsampled(Gaussian(SIGMA), Q), T)
    acc_h = PLDAccountant().compose(PoissonSubsampled(Gaussian(2 * SIGMA), Q), T)
    return acc_w.epsilon(DELTA), acc_h.epsilon(DELTA)


@pytest.fixture(scope="module")
def individual_run():
    rng = np.random.default_rng(0)
    g = np.empty((4, T))
    g[0] = rng.uniform(1.0, 3.0, T)  # always >= C: worst case
    g[1] = 0.5  # always C/2: noise multiplier 2 sigma
    g[2] = rng.uniform(0.0, 1.2, T)
    g[3] = 0.0  # never any loss
    acc = IndividualPLDAccountant(sampling_rate=Q, noise_multiplier=SIGMA, clip_norm=1.0,
                                  n_examples=4)
    for t in range(T):
        acc.step(g[:, t])
    return g, acc, acc.epsilon(DELTA)


def test_worst_case_example_matches_certified_accountant(worst_and_half, individual_run):
    r, _ = worst_and_half
    e = individual_run[2].epsilon
    assert r.lower <= e[0] <= r.upper * (1 + 1e-3)


def test_half_norm_example_is_noise_multiplier_two_sigma(worst_and_half, individual_run):
    _, r = worst_and_half
    e = individual_run[2].epsilon
    assert r.lower <= e[1] <= r.upper * (1 + 2e-3)


def test_zero_norm_and_ordering(individual_run):
    e = individual_run[2].epsilon
    assert e[3] == 0.0
    assert e[1] < e[2] < e[0]


def test_batch_equals_streaming(individual_run):
    g, acc, r = individual_run
    e = r.epsilon
    e2 = individual_epsilons(g, sampling_rate=Q, noise_multiplier=SIGMA, clip_norm=1.0,
                             delta=DELTA,
                             grid_step=r.details["grid_step"]).epsilon
    assert np.array_equal(e, e2)


def _exact_eps_bracket(norms: np.ndarray, q: float, sigma: float):
    """Certified bracket of one example's composition with its exact (unbucketed) ratios."""
    acc = PLDAccountant(rtol=1e-3)
    vals, cnt = np.unique(np.minimum(norms, 1.0), return_counts=True)
    for c, k in zip(vals, cnt, strict=True):
        if c > 0:
            acc.compose(PoissonSubsampled(Gaussian(sigma, float(c)), q), int(k))
    return acc.epsilon(DELTA)


@pytest.mark.parametrize("n_buckets", [4, 100])
def test_bucketing_never_below_exact_composition(n_buckets):
    rng = np.random.default_rng(10 + n_buckets)
    q, sigma, steps = 0.2, 1.0, 6
    g = rng.uniform(0.05, 1.3, size=(3, steps))
    e = individual_epsilons(g, sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                            delta=DELTA, n_buckets=n_buckets).epsilon
    for i in range(g.shape[0]):
        r = _exact_eps_bracket(g[i], q, sigma)
        assert e[i] >= r.lower
        if n_buckets == 100:  # fine grid: close to the exact composition
            assert e[i] <= r.upper * 1.05


@pytest.mark.slow
def test_bucketing_never_below_exact_composition_many():
    full = os.environ.get("TIGHTDP_SLOW") == "1"
    rng = np.random.default_rng(7)
    q, sigma, steps = 0.1, 0.8, (15 if full else 5)
    g = rng.uniform(0.0, 1.5, size=(8 if full else 2, steps))
    for nb in ((3, 10, 50) if full else (3,)):
        e = individual_epsilons(g, sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                delta=DELTA, n_buckets=nb).epsilon
        for i in range(g.shape[0]):
            assert e[i] >= _exact_eps_bracket(g[i], q, sigma).lower


@pytest.mark.parametrize("case", ["refused", "coarser"])
def test_small_budget_never_under_reports(case):
    """A level whose transforms exceed the memory budget moves its examples one level
    coarser (first round). They used to be evaluated with the coarser level as built for its
    own examples, their other buckets left out: eps 0 for examples with loss (max_memory 5e6
    here). Now the levels are grouped again first: each example's upper bound is at least the
    certified lower bound of its exact composition (PLDAccountant), or the query is refused
    with BudgetExceeded."""
    q, sigma = 0.05, 1.0
    rng = np.random.default_rng(0 if case == "refused" else 1)
    if case == "refused":
        g = np.vstack([np.ones((1, 50)), rng.uniform(0.25, 0.42, (3, 50))])
        budgets = (2e6, 5e6, 9e6)
    else:  # one level moved, then evaluated (measured: grid steps d0 and d0/2 only)
        g = np.vstack([np.ones((1, 40)), 0.5 * np.ones((1, 40)), rng.uniform(0.1, 0.3, (2, 40)),
                       rng.uniform(0.03, 0.06, (2, 40))])
        budgets = (1.04e7,)
    done = 0
    for mm in budgets:
        try:
            r = individual_epsilons(g, sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                    delta=DELTA, max_memory=mm)
        except BudgetExceeded:
            continue
        done += 1
        for i in range(g.shape[0]):
            assert r.epsilon[i] >= _exact_eps_bracket(g[i], q, sigma).lower
        if case == "coarser":  # the examples of level 2 (d0 / 4) were evaluated at level 1
            steps = r.details["grid_steps"]
            assert steps[1] == pytest.approx(steps[0] / 2, rel=1e-12)
    if case == "coarser":
        assert done == 1


def test_laws_over_budget_refused_before_they_are_built():
    """867 buckets on a grid step of ~2e-5 (q = 1e-4, sigma = 0.5, 3000 steps, delta =
    1e-3): their laws alone would take ~1.5 GB. Refused in a fraction of a second, before
    they are discretized; it used to discretize them for 66 s (2.4 GB) and then refuse."""
    import time

    g = np.random.default_rng(1).uniform(0.0, 1.5, (1, 3000))
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceeded, match="n_buckets"):
        individual_epsilons(g, sampling_rate=1e-4, noise_multiplier=0.5, clip_norm=1.0,
                            delta=1e-3, n_buckets=1000, max_seconds=20)
    assert time.perf_counter() - t0 < 10.0


@pytest.mark.parametrize("grid_step", [2e-3, 2e-2])
def test_plancherel_equals_inverse_fft(grid_step):
    """Lemma 1 of App. D: the Plancherel evaluation of delta at grid points equals the direct
    sum over the inverse FFT of the composed transform (both frequency code paths)."""
    plds = []
    for c in (0.3, 0.7, 1.0):  # three buckets, remove direction, connect-the-dots
        loss = PoissonSubsampled(Gaussian(1.0, c), 0.05).privacy_losses()[0]
        plds.append(connect_the_dots(loss, grid_step,
                                     *bucket_loss_range(loss, math.log(1e-40))).trimmed())
    counts = np.array([[10.0, 25.0, 17.0], [3.0, 0.0, 40.0]])
    laws = BucketLaws(plds)
    dr = Direction(plds, laws, grid_step, laws.extent(counts, LOG_WINDOW_TAIL, grid_step))
    kh = dr.K // 2 + 1
    ev = Evaluator(dr, counts, kh, np.zeros(2), np.zeros(2))
    P = dr.transform(counts, kh)
    p = sfft.irfft(P, n=dr.K, axis=1)
    idx = np.arange(dr.K)
    m0 = -dr.i_lo
    for m in (m0, m0 + int(0.3 / grid_step), m0 + int(0.8 / grid_step)):
        direct = np.empty(2)
        for r in range(2):
            ys = ev.s[r] + (dr.i_lo + idx) * grid_step  # window losses of this example
            w = np.where(ys > ys[m], -np.expm1(ys[m] - ys), 0.0)
            direct[r] = p[r] @ w
        plan = ev.hinge(np.full(2, m))
        assert np.all(direct > 1e-7)
        np.testing.assert_allclose(plan, direct, rtol=1e-12, atol=0)


@pytest.mark.parametrize("direction", [0, 1])
def test_refined_moments_bound_of_a_direction_is_above_exact_gaussian_eps(direction):
    """:meth:`Direction.rma_eps` (the test that settles the add direction without evaluating
    it) on Gaussian buckets (q = 1: the composition is exactly mu-GDP, mu^2 = sum_j n_j c_j^2
    / sigma^2; Dong, Roth, Su 2022, Cor. 3.3): at or above the exact eps (mpmath), and no
    looser than the refined-moments bound is on these (measured 1.06-1.09x; with a grid of
    tilts a factor 2 apart)."""
    sigma, d, cs = 1.0, 2e-3, (0.3, 0.7, 1.0)
    plds = []
    for c in cs:
        loss = PoissonSubsampled(Gaussian(sigma, c), 1.0).privacy_losses()[direction]
        plds.append(connect_the_dots(loss, d,
                                     *bucket_loss_range(loss, math.log(1e-40))).trimmed())
    counts = np.array([[10.0, 25.0, 17.0], [3.0, 0.0, 40.0], [0.0, 0.0, 1.0], [200.0, 0.0, 0.0]])
    laws = BucketLaws(plds)
    dr = Direction(plds, laws, d, laws.extent(counts, LOG_WINDOW_TAIL, d))
    eps = dr.rma_eps(counts, DELTA)
    for row, e in zip(counts, eps, strict=True):
        mu = math.sqrt(sum(n * c * c for n, c in zip(row, cs, strict=True))) / sigma
        assert mp_gdp_delta(mu, e) <= DELTA  # e is at or above the exact eps
        assert mp_gdp_delta(mu, e / 1.15) > DELTA  # and within 15% of it


def test_settled_add_direction_changes_no_number(monkeypatch):
    """Examples whose add direction is settled by its refined-moments bound (at most the
    remove direction's certified lower bound) get the same bracket, to the last bit, as when
    both directions are evaluated; on this workload most are settled."""
    rng = np.random.default_rng(3)
    g = rng.uniform(0.0, 1.3, size=(64, 300)) * rng.uniform(0.2, 1.0, size=(64, 1))
    kw = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0, "delta": DELTA}
    r = individual_epsilons(g, **kw)
    assert r.details["add_direction_settled"] >= 32
    blocks = sys.modules["tightdp.individual.pld_blocks"]
    monkeypatch.setattr(blocks, "settled",
                        lambda block, ex, *a: np.zeros(ex.size, dtype=bool))
    r_all = individual_epsilons(g, **kw)
    assert r_all.details["add_direction_settled"] == 0
    assert np.array_equal(r.epsilon, r_all.epsilon)
    assert np.array_equal(r.lower, r_all.lower)


def test_individual_input_validation():
    acc = IndividualPLDAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=2)
    with pytest.raises(ValueError, match="grad_norms"):
        acc.step(np.array([1.0]))
    with pytest.raises(ValueError, match="grad_norms"):
        acc.step(np.array([-1.0, 1.0]))
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(1e-12)
    with pytest.raises(ValueError, match="sampling_rate"):
        IndividualPLDAccountant(sampling_rate=1.5, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=2)
    with pytest.raises(ValueError, match="grad_norms"):
        individual_epsilons(np.ones(3), sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                            delta=1e-5)


@pytest.mark.parametrize("n", [1, 3, 7, 100, 1000])
def test_bucket_index_rounds_sensitivity_up(n):
    from tightdp.individual.history import bucket_index, sensitivity_grid

    rng = np.random.default_rng(n)
    grid = sensitivity_grid(n)
    r = np.concatenate([rng.uniform(0, 1, 2000), grid, np.nextafter(grid, 0),
                        np.nextafter(grid, 2)[:-1], [0.0, 1e-300]])
    idx = bucket_index(r, grid)
    pos = r > 0
    assert np.all(idx[~pos] == 0)
    # smallest grid point >= r
    assert np.all(grid[idx[pos] - 1] >= r[pos])
    assert np.all((idx[pos] == 1) | (grid[np.maximum(idx[pos] - 2, 0)] < r[pos]))
    assert bucket_index(np.array([np.nan]), grid)[0] == n  # unknown norm: worst case


@pytest.mark.parametrize("kk", [1, 7, 300, 5000])
def test_horner_paths_equal_direct_sum(kk):
    from tightdp.individual.evaluator import horner

    rng = np.random.default_rng(kk)
    K, n = 12000, 5
    q = rng.normal(size=(kk, 2, n)) + 1j * rng.normal(size=(kk, 2, n))
    q /= np.arange(1, kk + 1)[:, None, None]
    m = rng.integers(0, K, n)
    h1, h2 = horner(q, m, K)
    k = np.arange(1, kk)
    e = np.exp(2j * np.pi * np.outer(k, m) / K)
    np.testing.assert_allclose(h1, (q[1:, 0] * e).sum(axis=0).real, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h2, (q[1:, 1] * e).sum(axis=0).real, rtol=1e-10, atol=1e-12)


def test_single_step_is_finite_and_matches_accountant():
    """T = 1: the window holds the whole support, nothing is charged for folded mass."""
    q, sigma = 0.1, 2.0
    e = individual_epsilons(np.array([[3.0], [0.0]]), sampling_rate=q, noise_multiplier=sigma,
                            clip_norm=1.0, delta=DELTA).epsilon
    r = PLDAccountant().compose(PoissonSubsampled(Gaussian(sigma), q), 1).epsilon(DELTA)
    assert r.lower <= e[0] <= r.upper * (1 + 2e-3)
    assert e[1] == 0.0


def _reference_bracket(acc: IndividualPLDAccountant, i: int):
    """Certified bracket (PLDAccountant, rtol 1e-5) of example ``i``'s bucketed composition."""
    ref = PLDAccountant(rtol=1e-5)
    for j, k in enumerate(acc.counts[i, 1:]):
        if k > 0:
            ref.compose(PoissonSubsampled(Gaussian(acc.noise_multiplier, float(acc.grid[j])),
                                          acc.sampling_rate), int(k))
    return ref.epsilon(DELTA)


@pytest.fixture(scope="module")
def mixed_population():
    """Full-norm examples beside small-norm ones (issue 17: the small-eps examples' upper bounds
    were 1e-3 to 4e-3 loose with one grid step for all, e.g. 0.27314 for a truth in
    [0.27214, 0.27214], 0.49607 for [0.49546, 0.49547])."""
    q, sigma, steps = 0.01, 0.6, 1000
    rng = np.random.default_rng(3)
    norms = [1.0, 0.4, 0.25, 0.15]
    acc = IndividualPLDAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                  n_examples=len(norms) + 2)
    mixed = rng.choice([0.1, 0.3, 1.5], size=steps, p=[0.6, 0.3, 0.1])
    for t in range(steps):
        acc.step(np.array(norms + [mixed[t], 0.0]))
    return acc, acc.epsilon(DELTA)


def test_brackets_within_rtol_against_pld_accountant(mixed_population):
    acc, r = mixed_population
    assert r.certified and r.lower is not None
    assert r.details["converged"] and r.details["loose"] == 0
    assert len(r.details["grid_steps"]) >= 2  # small-eps examples got a finer grid
    for i in range(5):
        ref = _reference_bracket(acc, i)
        # certified on both sides ...
        assert r.lower[i] <= ref.upper
        assert r.upper[i] >= ref.lower
        # ... and within 1e-3 relative (the bracket and the distance to the truth)
        assert r.upper[i] - r.lower[i] <= 1e-3 * r.upper[i]
        assert r.upper[i] <= ref.upper * (1 + 1e-3)
        assert r.lower[i] >= ref.lower * (1 - 1e-3)
    assert r.upper[5] == r.lower[5] == 0.0
    assert np.array_equal(r.epsilon, r.upper)


def test_brackets_over_budget_stay_certified_and_say_so(mixed_population):
    """A small memory budget forces coarser grids: brackets wider than rtol, still around the
    reference, flagged (converged False, a note)."""
    acc, _ = mixed_population
    small = IndividualPLDAccountant(sampling_rate=acc.sampling_rate,
                                    noise_multiplier=acc.noise_multiplier, clip_norm=1.0,
                                    n_examples=4,
                                    max_memory="1MB")
    small.step_many(np.tile(np.array([[1.0], [0.4], [0.25], [0.15]]), acc.n_steps))
    assert np.array_equal(small.counts, acc.counts[:4])
    r = small.epsilon(DELTA)
    assert not r.details["converged"] and r.details["loose"] > 0
    assert "wider than rtol" in r.note
    for i in range(4):
        ref = _reference_bracket(acc, i)
        assert r.lower[i] <= ref.lower and r.upper[i] >= ref.upper


def _mp_subsampled_gaussian_eps(q: float, sigma: float, c: float, delta: float) -> float:
    """eps(delta) of one Poisson subsampled Gaussian (sensitivity c, noise sigma, rate q),
    the larger of the remove and add directions, from the hockey-stick divergence in closed
    form (the likelihood ratio is monotone in the output) in 40-digit arithmetic."""
    mpmath.mp.dps = 40
    q, s, c = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(c)
    phi = mpmath.ncdf

    def remove(eps):  # P = (1-q) N(0) + q N(c), Q = N(0): region x > x*
        x = s ** 2 / c * mpmath.log((mpmath.exp(eps) - 1 + q) / q) + c / 2
        return ((1 - q) * phi(-x / s) + q * phi((c - x) / s)
                - mpmath.exp(eps) * phi(-x / s)) - delta

    def add(eps):  # P = N(0), Q = (1-q) N(0) + q N(c): region x < x'
        r = mpmath.exp(-eps)
        if r <= 1 - q:
            return -delta
        x = s ** 2 / c * mpmath.log((r - 1 + q) / q) + c / 2
        return (phi(x / s) - mpmath.exp(eps) * ((1 - q) * phi(x / s) + q * phi((x - c) / s))
                - delta)

    out = []
    for f in (remove, add):
        if f(mpmath.mpf("1e-12")) <= 0:
            out.append(0.0)
            continue
        lo, hi = mpmath.mpf("1e-12"), mpmath.mpf(1)
        while f(hi) > 0:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        out.append(float(hi))
    return max(out)


def test_one_step_brackets_contain_exact_value():
    """T = 1: every bracket holds the exact eps (mpmath) and is within 1e-3 relative."""
    q, sigma = 0.2, 1.0
    norms = np.array([[1.0], [0.3], [0.05]])
    r = individual_epsilons(norms, sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                            delta=DELTA)
    for i, c in enumerate((1.0, 0.3, 0.05)):
        exact = _mp_subsampled_gaussian_eps(q, sigma, c, DELTA)
        assert r.lower[i] <= exact <= r.upper[i]
        assert r.upper[i] - r.lower[i] <= 1e-3 * r.upper[i]


# ----------------------------------------------------------------------------------------------
# individual saddle-point accounting (an approximation; paper 002 with paper 000's buckets)
# ----------------------------------------------------------------------------------------------
# (q, sigma, T): the first is the DP-SGD workload, where the accountant flags its own
# worst case unreliable (about q T = 10 sampled steps); the second has about 100 sampled steps
SPA_REGIMES = [(0.01, 1.0, 1000), (0.1, 2.0, 1000)]


@pytest.fixture(scope="module", params=SPA_REGIMES, ids=["q0.01-sigma1", "q0.1-sigma2"])
def spa_history(request):
    q, sigma, steps = request.param
    rng = np.random.default_rng(1)
    g = np.empty((3, steps))
    g[0] = rng.uniform(1.0, 3.0, steps)  # always >= C: the worst case
    g[1] = 0.5  # always C/2: noise multiplier 2 sigma
    g[2] = 0.0  # never any loss
    acc = IndividualSPAAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                  n_examples=3)
    acc.step_many(g)
    return q, sigma, steps, acc


def _spa_accountant(method, sigma, q, steps):
    return SaddlePointAccountant(method).compose(PoissonSubsampled(Gaussian(sigma), q),
                                                 steps).epsilon(DELTA)


@pytest.mark.parametrize("method", ["msd1", "clt"])
def test_spa_individual_equals_accountant(spa_history, method):
    """Example 0 (norms >= C) is the accountant's composition of the worst case, example 1
    (norms C/2) that with noise multiplier 2 sigma: the same computation, so the same eps
    (to the accountant's Newton tolerance) and the same reliability verdict."""
    q, sigma, steps, hist = spa_history
    r = IndividualSPAAccountant.from_history(hist, method=method).epsilon(DELTA)
    for i, s in ((0, sigma), (1, 2 * sigma)):
        ref = _spa_accountant(method, s, q, steps)
        assert r.epsilon[i] == pytest.approx(ref.epsilon, rel=1e-8)
        reliable_ref = "saddle-point regime" in ref.details["regime"]
        assert bool(r.details["reliable"][i]) == reliable_ref
    assert r.epsilon[2] == 0.0 and r.upper[2] == 0.0 and r.details["reliable"][2]
    assert r.certified is False
    assert "NOT a certified bound" in r.note and "IndividualPLDAccountant" in r.note
    if not r.details["reliable"].all():
        assert "WARNING" in r.note and "unreliable" in r.note


def test_spa_individual_upper_is_refined_moments_bound(spa_history):
    """The certified upper of the worst-case example against the refined moments bound
    (paper 002, eq. (43)) minimized independently on a fine tilt grid with the CGF of one
    step times T; and above the certified PLD lower bound of that composition."""
    q, sigma, steps, hist = spa_history
    r = IndividualSPAAccountant.from_history(hist).epsilon(DELTA)
    mech = PoissonSubsampled(Gaussian(sigma), q)
    ts = np.geomspace(0.05, 200.0, 4000)
    log_m = ts * np.log(ts) - (1.0 + ts) * np.log1p(ts)
    eps_rma = max(float(np.min((steps * cgf(loss, ts)[0] + log_m - math.log(DELTA)) / ts))
                  for loss in mech.privacy_losses())
    # (the fine grid's minimum is within ~1e-6 of the true one)
    assert eps_rma * (1 - 1e-5) <= r.upper[0] <= eps_rma * (1 + 1e-3)
    pld = PLDAccountant().compose(mech, steps).epsilon(DELTA)
    assert r.upper[0] >= pld.lower


def test_spa_individual_matches_pld_where_reliable():
    """Random norm histories with about 100 sampled steps (q = 0.1, T = 1000): every example
    is flagged reliable and its saddle-point eps is within 1% of the certified individual PLD
    eps (observed: within 0.1%); the certified refined-moments upper is at least the PLD
    accountant's certified lower bound of the same composition (two examples) and at least
    the certified individual PLD value."""
    q, sigma, steps, n = 0.1, 2.0, 1000, 30
    rng = np.random.default_rng(5)
    g = rng.lognormal(-0.5, 0.6, n)[:, None] * rng.exponential(1.0, (n, steps))
    pld = IndividualPLDAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                  n_examples=n, n_buckets=10)
    pld.step_many(g)
    e = pld.epsilon(DELTA).epsilon
    r = IndividualSPAAccountant.from_history(pld).epsilon(DELTA)
    assert r.details["reliable"].all()
    np.testing.assert_allclose(r.epsilon, e, rtol=1e-2)
    assert np.all(r.upper >= e)
    for i in (0, int(np.argmin(e))):
        c = pld.counts[i]
        acc = PLDAccountant()
        sacc = SaddlePointAccountant()
        for b in np.nonzero(c)[0]:
            if b:
                m = PoissonSubsampled(Gaussian(sigma, b / 10), q)
                acc.compose(m, int(c[b]))
                sacc.compose(m, int(c[b]))
        assert r.upper[i] >= acc.epsilon(DELTA).lower
        # and the accountant composing the same buckets gives the same approximation
        assert r.epsilon[i] == pytest.approx(sacc.epsilon(DELTA).epsilon, rel=1e-8)


def test_spa_individual_gaussian_symmetric():
    """q = 1: Gaussian losses, one (symmetric) direction, closed-form CGFs."""
    g = np.array([[0.5] * 50, [2.0] * 50])
    acc = IndividualSPAAccountant(sampling_rate=1.0, noise_multiplier=4.0, clip_norm=1.0,
                                  n_examples=2)
    acc.step_many(g)
    r = acc.epsilon(DELTA)
    assert r.details["directions"] == ["both (symmetric)"]
    for i, s in ((0, 8.0), (1, 4.0)):
        ref = SaddlePointAccountant().compose(Gaussian(s), 50).epsilon(DELTA)
        assert r.epsilon[i] == pytest.approx(ref.epsilon, rel=1e-8)
        # mu-GDP with mu = sqrt(50) / s: the certified upper is above the exact curve's eps
        assert mp_gdp_delta(math.sqrt(50) / s, r.upper[i]) <= DELTA


def test_spa_individual_chunks_and_beyond():
    """Chunking does not change the answers; an example whose saddle point lies beyond the
    supported tilt range (one step with a tiny norm) gets its certified bound and a flag."""
    q, sigma = 0.1, 1.0
    g = np.array([[0.01], [1.0], [0.3]])
    acc = IndividualSPAAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                  n_examples=3)
    acc.step_many(g)
    r = acc.epsilon(DELTA)
    assert r.epsilon[0] == r.upper[0] and not r.details["reliable"][0]
    assert r.details["beyond"] == 1 and "beyond" in r.note
    r1 = IndividualSPAAccountant.from_history(acc, chunk_size=1).epsilon(DELTA)
    np.testing.assert_allclose(r1.epsilon, r.epsilon, rtol=1e-12)
    np.testing.assert_array_equal(r1.details["reliable"], r.details["reliable"])


def test_spa_individual_input_validation():
    with pytest.raises(ValueError, match="method"):
        IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=2, method="exact")
    with pytest.raises(ValueError, match="sampling_rate"):
        IndividualSPAAccountant(sampling_rate=0.0, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=2)
    with pytest.raises(ValueError, match="noise_multiplier"):
        IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=-1.0, clip_norm=1.0,
                                n_examples=2)
    with pytest.raises(ValueError, match="chunk_size"):
        IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=2, chunk_size=0)
    with pytest.raises(ValueError, match="history"):
        IndividualSPAAccountant.from_history(np.ones((2, 3)))
    acc = IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=2)
    with pytest.raises(ValueError, match="grad_norms"):
        acc.step(np.array([1.0, -2.0]))
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            acc.epsilon(bad)


def test_no_loss_at_all_is_zero_for_every_example():
    """Every norm 0: no example pays anything (eps = 0 exactly), in both accountants."""
    z = np.zeros((6, 4))
    r = individual_epsilons(z, sampling_rate=0.1, noise_multiplier=1.0, clip_norm=1.0,
                            delta=1e-5)
    assert np.array_equal(r.epsilon, np.zeros(6)) and np.array_equal(r.lower, np.zeros(6))
    assert r.details["summary"]["max"] == 0.0 and r.details["summary"]["count"] == 6
    spa = IndividualSPAAccountant(sampling_rate=0.1, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=6)
    spa.step_many(z)
    s = spa.epsilon(1e-5)
    assert np.array_equal(s.epsilon, np.zeros(6)) and np.array_equal(s.upper, np.zeros(6))


def test_per_example_numbers_do_not_depend_on_blocks_or_chunks():
    """Each example keeps its own frequency cut-off, rounding allowance and summation path,
    so its bracket is the same bit for bit whichever examples share its block or chunk (what
    makes the Dask result equal the in-process one)."""
    rng = np.random.default_rng(11)
    n = 3000
    h = IndividualPLDAccountant(sampling_rate=0.02, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=n, n_buckets=30)
    scale = rng.uniform(0.05, 1.5, n)
    for _ in range(40):
        h.step(scale * rng.uniform(0.5, 1.2, n))
    kw = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0, "progress": False}
    ref = IndividualPLDAccountant.from_counts(h.counts, **kw).epsilon(1e-5)
    for opts in ({"block_rows": 701}, {"chunk_size": 97}, {"block_rows": 1000, "chunk_size": 1}):
        r = IndividualPLDAccountant.from_counts(h.counts, **kw, **opts).epsilon(1e-5)
        assert np.array_equal(r.upper, ref.upper) and np.array_equal(r.lower, ref.lower), opts
    assert ref.details["blocks"] == 1


def test_budget_many_buckets_long_run():
    """3,000 examples x 5,000 buckets (2,091 used, 2.4e6 steps): refused (or answered)
    within 60 s and 2 GB; it took 54-222 s and 2.8-4.6 GB before a refusal."""
    from _budget_cases import PLD_CASE, check_budget_case
    check_budget_case(PLD_CASE)


def test_history_of_counts_records_further_steps():
    """An accountant attached to counts and a saddle-point accountant sharing them go on
    recording (the count of steps is the rows' sum, as every step adds one to each row);
    once a TypeError when the counts came without a step count."""
    from tightdp.individual import IndividualSPAAccountant
    counts = np.array([[5, 2, 0], [3, 0, 4]])
    pld = IndividualPLDAccountant.from_counts(counts, sampling_rate=0.1, noise_multiplier=1.0,
                                              clip_norm=1.0)
    spa = IndividualSPAAccountant.from_history(pld)
    assert spa.n_steps == 7
    spa.step(np.array([0.1, 0.9]))
    assert spa.n_steps == 8 and spa.counts.sum(axis=1).tolist() == [8, 8]
