"""tightdp.integrations.jax_privacy: TightdpAccountantConfig inside real jax-privacy calls.

Independent values: at sampling rate 1 (batch size = dataset size) a Poisson-sampled Gaussian
is the Gaussian mechanism, and any schedule of Gaussian steps is mu-GDP with
mu^2 = sum_i 1 / sigma_i^2 (Dong, Roth, Su 2019, Cor. 3.3): the mpmath oracle's exact eps;
jax-privacy's own PLD accountant (dp_accounting) elsewhere.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("jax_privacy")

from jax_privacy.accounting import (  # noqa: E402
    DpParams,
    DpsgdTrainingAccountant,
    DpsgdTrainingUserLevelAccountant,
    PldAccountantConfig,
    SamplingMethod,
    calibrate_noise_multiplier,
    calibrate_num_updates,
)

import oracle  # noqa: E402
import tightdp  # noqa: E402
from tightdp.integrations.jax_privacy import (  # noqa: E402
    TightdpAccountantConfig,
    TightdpPLDAccountant,
)

RTOL = tightdp.DEFAULT_RTOL
N = 1000  # dataset size


def _exact(sigmas_counts, delta: float) -> float:
    """Exact eps of Gaussian steps ``[(sigma, count), ...]`` (mu-GDP)."""
    mu2 = sum(k / s**2 for s, k in sigmas_counts)
    return float(oracle.gaussian_epsilon(1 / math.sqrt(mu2), 1, delta))


def _tight():
    return DpsgdTrainingAccountant(dp_accountant_config=TightdpAccountantConfig())


def test_config_is_jax_privacys_and_builds_a_tightdp_accountant():
    cfg = TightdpAccountantConfig(rtol=1e-4)
    acc = cfg.create_accountant()
    assert isinstance(cfg, PldAccountantConfig)
    assert isinstance(acc, TightdpPLDAccountant)
    assert acc.tightdp_accountant.rtol == 1e-4


def test_config_refuses_bad_values_in_one_line():
    with pytest.raises(ValueError, match="rtol"):
        TightdpAccountantConfig(rtol=0.0)
    with pytest.raises(ValueError, match="max_seconds"):
        TightdpAccountantConfig(max_seconds=-1.0)


def test_compute_epsilon_certified_against_gdp():
    p = DpParams(noise_multipliers=3.0, num_samples=N, batch_size=N, delta=1e-5)
    eps = _tight().compute_epsilon(20, p)
    exact = _exact([(3.0, 20)], 1e-5)
    assert exact <= eps <= exact * (1 + RTOL)


def test_noise_schedule_certified_against_gdp():
    # sigma 2 for steps 0-9, 4 for 10-29, 3 from step 30 on: 10, 20 and 15 steps of 45
    sched = [(0, 2.0), (10, 4.0), (30, 3.0)]
    p = DpParams(noise_multipliers=sched, num_samples=N, batch_size=N, delta=1e-6)
    eps = _tight().compute_epsilon(45, p)
    exact = _exact([(2.0, 10), (4.0, 20), (3.0, 15)], 1e-6)
    assert exact <= eps <= exact * (1 + RTOL)


def test_fixed_batch_size_is_doubled_sensitivity():
    # jax-privacy accounts a fixed batch as Poisson sampling at half the noise multiplier
    p = DpParams(noise_multipliers=6.0, num_samples=N, batch_size=N, delta=1e-5,
                 sampling_method=SamplingMethod.FIXED_BATCH_SIZE)
    eps = _tight().compute_epsilon(20, p)
    exact = _exact([(3.0, 20)], 1e-5)
    assert exact <= eps <= exact * (1 + RTOL)


def test_subsampled_run_matches_jax_privacys_pld():
    # q = 0.01, 2000 steps: ours is the certified upper bound; dp_accounting's PLD (its
    # pessimistic estimate at discretization 1e-4) is within a few 1e-4 of it
    p = DpParams(noise_multipliers=1.0, num_samples=60_000, batch_size=600, delta=1e-5)
    ours = _tight().compute_epsilon(2000, p)
    theirs = DpsgdTrainingAccountant(
        dp_accountant_config=PldAccountantConfig()).compute_epsilon(2000, p)
    truth = tightdp.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=2000,
                                  delta=1e-5)
    assert ours == truth.upper
    assert abs(ours - theirs) <= 2e-3 * theirs


def test_calibrate_noise_multiplier_meets_the_target():
    acc = _tight()
    nm = calibrate_noise_multiplier(target_epsilon=2.0, accountant=acc, batch_sizes=N,
                                    num_updates=20, num_samples=N, target_delta=1e-5)
    # the exact eps at the calibrated noise is within the target (ours is an upper bound)
    assert _exact([(nm, 20)], 1e-5) <= 2.0
    # and jax-privacy's search (tol 0.01) is not far above the exact answer's noise
    assert _exact([(nm - 0.02, 20)], 1e-5) > 2.0


def test_calibrate_num_updates_meets_the_target():
    acc = _tight()
    n = calibrate_num_updates(target_epsilon=2.0, accountant=acc, noise_multipliers=8.0,
                              batch_sizes=N, num_samples=N, target_delta=1e-5)
    # mu-GDP: within the target, and at most one update short of the most that are (one
    # fewer only where our upper bound straddles the boundary)
    assert _exact([(8.0, n)], 1e-5) <= 2.0 < _exact([(8.0, n + 2)], 1e-5)


def test_user_level_accountant_is_group_epsilon():
    # jax-privacy's user-level analysis (Chua et al. 2024): k examples per user, each
    # sampled with q, is the mixture of Gaussians of sensitivities Binomial(k, q) -- the
    # group-privacy pair of Ganesh (Thm 3.1) that tightdp.group_epsilon accounts
    p = DpParams(noise_multipliers=1.0, num_samples=60_000, batch_size=600, delta=1e-6,
                 examples_per_user=4)
    ours = DpsgdTrainingUserLevelAccountant(
        dp_accountant_config=TightdpAccountantConfig()).compute_epsilon(200, p)
    g = tightdp.group_epsilon(group_size=4, noise_multiplier=1.0, steps=200, delta=1e-6,
                              sampling_rate=0.01, baselines=False)
    assert g.lower <= ours <= g.upper * (1 + 1e-12)
    assert abs(ours - g.upper) <= RTOL * g.upper


def test_user_level_against_jax_privacys_pld():
    # (dp_accounting's PLD of a mixture of Gaussians takes seconds at its default grid:
    # its grid 1e-2, pessimistic, within 1e-3 of the exact value here)
    p = DpParams(noise_multipliers=2.0, num_samples=1000, batch_size=50, delta=1e-5,
                 examples_per_user=2)
    ours = DpsgdTrainingUserLevelAccountant(
        dp_accountant_config=TightdpAccountantConfig()).compute_epsilon(3, p)
    theirs = DpsgdTrainingUserLevelAccountant(
        dp_accountant_config=PldAccountantConfig(value_discretization_interval=1e-2)
    ).compute_epsilon(3, p)
    assert abs(ours - theirs) <= 2e-3 * theirs


def test_truncated_batch_is_accounted_as_truncated_poisson():
    """jax-privacy's truncated batches (TruncatedSubsampledGaussianDpEvent) are
    tightdp.TruncatedPoisson: the same answer as the front door, and at most jax-privacy's
    own PLD (dp_accounting analyses the cut batches under replace-one, "slightly loose" in
    its own words; ours under add/remove: see tightdp.mechanisms.truncated)."""
    p = DpParams(noise_multipliers=1.0, num_samples=N, batch_size=10, delta=1e-5,
                 truncated_batch_size=12)
    ours = _tight().compute_epsilon(100, p)
    lib = tightdp.dpsgd_epsilon(sampling="truncated_poisson", sampling_rate=10 / N,
                                max_batch_size=12, dataset_size=N, noise_multiplier=1.0,
                                steps=100, delta=1e-5)
    assert ours == pytest.approx(lib.upper, rel=1e-12)
    theirs = DpsgdTrainingAccountant(
        dp_accountant_config=PldAccountantConfig(value_discretization_interval=1e-3)
    ).compute_epsilon(100, p)
    assert lib.lower <= theirs and ours <= theirs * (1 + 1e-3)
