"""IndividualSPAAccountant: the SP-MSD0 path against the saddle-point accountant, and per-example
answers that do not depend on the other examples (order, block, chunk)."""

import numpy as np
import pytest

from tightdp import (
    Gaussian,
    IndividualSPAAccountant,
    PoissonSubsampled,
    SaddlePointAccountant,
)

DELTA = 1e-5


@pytest.mark.parametrize("q, sigma, steps", [(0.01, 1.0, 1000), (0.1, 2.0, 500)])
def test_spa_msd0_equals_accountant(q, sigma, steps):
    """SP-MSD0 (Alghamdi et al. 2023, eq. (60)): an example whose norms are all >= C is the
    accountant's composition of ``PoissonSubsampled(Gaussian(sigma), q)``, one whose norms are
    all C/2 that with noise multiplier 2 sigma: the same eps to the accountant's Newton
    tolerance (the individual accountant iterates with the exact slope of g, the accountant
    with secant slopes)."""
    g = np.empty((2, steps))
    g[0] = 2.0
    g[1] = 0.5
    acc = IndividualSPAAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=1.0,
                                  n_examples=2, method="msd0")
    acc.step_many(g)
    r = acc.epsilon(DELTA)
    for i, s in ((0, sigma), (1, 2 * sigma)):
        ref = SaddlePointAccountant("msd0").compose(PoissonSubsampled(Gaussian(s), q),
                                                    steps).epsilon(DELTA)
        assert r.epsilon[i] == pytest.approx(ref.epsilon, rel=1e-8)


def _profiles_counts(n: int, rng: np.random.Generator) -> np.ndarray:
    """Counts of ``n`` examples (T = 300 steps, 20 buckets) drawn from 40 recorded profiles,
    60% of them from one profile (so that some brackets are shared by most examples of a
    block and others by few)."""
    prof = IndividualSPAAccountant(sampling_rate=0.02, noise_multiplier=1.0, clip_norm=1.0,
                                   n_examples=40, n_buckets=20)
    scale = rng.lognormal(-0.7, 0.8, 40)
    prof.step_many(scale[:, None] * rng.exponential(1.0, (40, 300)))
    pick = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 40, n))
    return np.asarray(prof.counts)[pick]


def test_spa_per_example_independent_of_order_and_blocks():
    """Each example's eps, certified upper, flags and SP-MSD1 terms depend only on its own
    counts: the same numbers with the rows shuffled and cut into other blocks (more examples
    than are solved at a time inside a block, and blocks of one example)."""
    rng = np.random.default_rng(3)
    counts = _profiles_counts(15000, rng)
    kw = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0, "progress": False}
    ref = IndividualSPAAccountant.from_counts(counts, **kw).epsilon(DELTA)
    perm = rng.permutation(counts.shape[0])
    r = IndividualSPAAccountant.from_counts(counts[perm], chunk_size=6000,
                                            **kw).epsilon(DELTA)
    np.testing.assert_allclose(r.epsilon, ref.epsilon[perm], rtol=1e-11)
    np.testing.assert_allclose(r.upper, ref.upper[perm], rtol=1e-14)
    np.testing.assert_array_equal(r.details["reliable"], ref.details["reliable"][perm])
    np.testing.assert_allclose(r.details["msd1_terms"], ref.details["msd1_terms"][perm],
                               rtol=1e-9)
    assert r.details["fallback"] == ref.details["fallback"]
    # the same for a few examples solved alone (blocks of one)
    few = perm[:5]
    r1 = IndividualSPAAccountant.from_counts(counts[few], chunk_size=1, **kw).epsilon(DELTA)
    np.testing.assert_allclose(r1.epsilon, ref.epsilon[few], rtol=1e-11)
    np.testing.assert_allclose(r1.upper, ref.upper[few], rtol=1e-14)
    # several brackets in play, and the examples are not all equal
    assert np.unique(np.round(ref.epsilon, 9)).size > 10


@pytest.mark.parametrize("method", ["msd1", "msd0", "clt"])
def test_spa_final_step_extrapolation_equals_evaluation(monkeypatch, method):
    """eps at the final Newton iterate extrapolated from the last evaluation (first order in
    the step; the fast path) against the interpolant evaluated there (the reference path,
    forced by ``FINAL_STEP = 0``): the same eps to 1e-12, the same flags, the SP-MSD1 terms
    to the solver's tolerance in the tilt."""
    from tightdp.individual.spa import solver

    counts = _profiles_counts(3000, np.random.default_rng(5))
    kw = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0,
          "progress": False, "method": method}
    fast = IndividualSPAAccountant.from_counts(counts, **kw).epsilon(DELTA)
    monkeypatch.setattr(solver, "FINAL_STEP", 0.0)
    ref = IndividualSPAAccountant.from_counts(counts, **kw).epsilon(DELTA)
    np.testing.assert_allclose(fast.epsilon, ref.epsilon, rtol=1e-12)
    np.testing.assert_array_equal(fast.upper, ref.upper)
    np.testing.assert_array_equal(fast.details["reliable"], ref.details["reliable"])
    np.testing.assert_allclose(fast.details["msd1_terms"], ref.details["msd1_terms"],
                               rtol=1e-6)


@pytest.mark.parametrize("min_run", [1, 10**9])
def test_spa_products_over_ranges_equal_copies(monkeypatch, min_run):
    """The products over ranges of consecutive examples (views of the counts; the fast path)
    against products over copies of the columns (the reference path, forced by a huge
    ``MIN_RUN``) and over every range however short (``MIN_RUN = 1``): the same numbers up to
    the summation order of the products."""
    from tightdp.individual.spa import products

    counts = _profiles_counts(6000, np.random.default_rng(11))
    kw = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0, "progress": False}
    ref = IndividualSPAAccountant.from_counts(counts, **kw).epsilon(DELTA)
    monkeypatch.setattr(products, "MIN_RUN", min_run)
    r = IndividualSPAAccountant.from_counts(counts, **kw).epsilon(DELTA)
    np.testing.assert_allclose(r.epsilon, ref.epsilon, rtol=1e-11)
    np.testing.assert_allclose(r.upper, ref.upper, rtol=1e-14)
    np.testing.assert_array_equal(r.details["reliable"], ref.details["reliable"])


@pytest.mark.slow
def test_budget_many_buckets():
    """3,000 examples x 5,000 buckets (3,895 used, 6e3 steps): the saddle-point accountant
    answers or refuses within 60 s and 2 GB (it had no budget: a MemoryError at 3.7 GB after
    ~100 s under a 4 GB cap); the check is the one of test_individual."""
    from _budget_cases import SPA_CASE, check_budget_case
    check_budget_case(SPA_CASE)


def test_budget_many_buckets_short_budget():
    """The same runaway under max_seconds=10: the budget holds at a tenth of the default too
    (the form the default run affords)."""
    from _budget_cases import SPA_CASE, check_budget_case
    old = "clip_norm=1.0).epsilon(1e-3)"
    assert old in SPA_CASE
    check_budget_case(SPA_CASE.replace(old, "clip_norm=1.0, max_seconds=10).epsilon(1e-3)"),
                      seconds=20)


def test_budget_parameters():
    """max_memory / max_seconds are validated as everywhere (Budget.make), and a tiny
    max_memory makes the blocks smaller, not the answer different."""
    rng = np.random.default_rng(3)
    norms = rng.exponential(0.7, size=(6000, 20))
    with pytest.raises(ValueError, match="max_seconds"):
        IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                n_examples=6000, max_seconds=-1)
    got = []
    for mem in (None, 1e8):  # two blocks of at most 5434 examples with 1e8
        acc = IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                      n_examples=6000, max_memory=mem)
        acc.step_many(norms)
        assert acc._block_rows() == (65536 if mem is None else int(0.25 * mem // 4600))
        got.append(acc.epsilon(1e-5).upper)
    np.testing.assert_allclose(got[0], got[1], rtol=1e-9)
    # 5,000 buckets: 83,000 bytes an example, 24 in a quarter of 8 MB
    acc = IndividualSPAAccountant(sampling_rate=0.01, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=10, n_buckets=5000, max_memory=8e6)
    assert acc._block_rows() == 24
