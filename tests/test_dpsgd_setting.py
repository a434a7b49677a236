"""The DP-SGD setting's samplings of one epoch (random allocation, shuffling) and truncated
Poisson: validation in one line naming the parameter, epochs and steps, the relation each is
accounted under, and the numbers of the front doors against closed forms."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

import oracle
import tightdp as td
from tightdp.dpsgd.setting import dpsgd_setting, make_sampling

DELTA = 1e-5


def _gdp_eps(mu: float, delta: float = DELTA) -> float:
    """eps of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13), exact (mpmath)."""
    return float(oracle.gaussian_epsilon(1.0 / mu, 1, delta))


@pytest.mark.parametrize("kwargs, message", [
    (dict(sampling="shuffle", batch_size=10, dataset_size=1001),
     r"^dataset_size 1001 is not a multiple of batch_size 10: .*partial batch of 1.*"
     r"drop_last.*dataset_size=1000"),
    (dict(sampling="random_allocation", batch_size=7, dataset_size=100),
     r"^dataset_size 100 \* selected 1 is not a multiple of batch_size 7: .*steps_per_epoch"),
    (dict(sampling="random_allocation", steps_per_epoch=10, selected=11),
     r"^selected must be in \[1, steps_per_epoch=10\], got 11"),
    (dict(sampling="random_allocation", steps_per_epoch=10, selected=0),
     r"^selected must be an integer >= 1"),
    (dict(sampling="truncated_poisson", sampling_rate=0.1, dataset_size=100,
          max_batch_size=0), r"^max_batch_size must be an integer >= 1"),
    (dict(sampling="truncated_poisson", sampling_rate=0.1, dataset_size=100,
          max_batch_size=101), r"^max_batch_size must be in \[1, dataset_size=100\]"),
    (dict(sampling="truncated_poisson", sampling_rate=0.1, max_batch_size=5),
     r"^dataset_size is required for sampling='truncated_poisson'"),
    (dict(sampling="truncated_poisson", sampling_rate=0.1, dataset_size=100),
     r"^max_batch_size is required"),
    (dict(sampling="shuffle", sampling_rate=0.1), r"^sampling_rate does not apply to "
                                                  r"sampling='shuffle'"),
    (dict(sampling="shuffle", steps_per_epoch=10, selected=2),
     r"^selected applies only to sampling=random_allocation"),
    (dict(sampling="poisson", sampling_rate=0.1, max_batch_size=3),
     r"^max_batch_size applies only to sampling=truncated_poisson"),
    (dict(sampling="poisson", sampling_rate=0.1, steps_per_epoch=3),
     r"^steps_per_epoch applies only to sampling=random_allocation or shuffle"),
    (dict(sampling="shuffle"), r"^steps_per_epoch is required for sampling='shuffle'"),
    (dict(sampling="shuffle", steps_per_epoch=4, batch_size=10, dataset_size=40),
     r"^steps_per_epoch: give either"),
])
def test_bad_sampling_is_one_line_naming_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message) as e:
        make_sampling(**kwargs)
    assert "\n" not in str(e.value)


def test_steps_must_be_whole_epochs_and_epochs_round_up():
    with pytest.raises(ValueError, match=r"^steps 25 is not a multiple of steps_per_epoch 10 "
                                         r".*give steps=20 or 30, or epochs"):
        dpsgd_setting(noise_multiplier=1.0, steps=25, sampling="shuffle", steps_per_epoch=10)
    s = dpsgd_setting(noise_multiplier=1.0, steps=30, sampling="random_allocation",
                      steps_per_epoch=10, selected=2)
    assert (s.steps, s.count, s.sampling.sampling_rate) == (30, 3, 0.2)
    s = dpsgd_setting(noise_multiplier=1.0, epochs=2.1, sampling="shuffle", batch_size=100,
                      dataset_size=60000)
    assert (s.sampling.steps_per_epoch, s.count, s.steps) == (600, 3, 1800)
    s = dpsgd_setting(noise_multiplier=1.0, epochs=1, sampling="truncated_poisson",
                      batch_size=10, dataset_size=1000, max_batch_size=20)
    assert (s.steps, s.count, s.sampling.sampling_rate) == (100, 100, 0.01)


def test_shuffle_relation_replace_special_by_default_add_remove_refused():
    """Shuffling's upper side is one Gaussian step per epoch (no amplification): sensitivity
    1 under replace_special, 2 under replace_one: mu = sqrt(E) / sigma or 2 sqrt(E) / sigma."""
    kw = dict(sampling="shuffle", steps_per_epoch=50, noise_multiplier=2.0, epochs=3,
              delta=DELTA)
    r = td.dpsgd_epsilon(**kw)
    assert r.details["neighboring"] == "replace_special" and r.details["epochs"] == 3
    assert "replace_special (zero-out" in r.note and r.details["sampling"] == "shuffle"
    exact = _gdp_eps(math.sqrt(3) / 2.0)
    assert exact <= r.upper <= exact * (1 + 1e-3) and r.lower <= r.upper
    r1 = td.dpsgd_epsilon(**kw, neighboring="replace_one")
    exact1 = _gdp_eps(2 * math.sqrt(3) / 2.0)
    assert exact1 <= r1.upper <= exact1 * (1 + 1e-3)
    assert r1.details["neighboring"] == "replace_one"
    with pytest.raises(ValueError, match=r"^neighboring: sampling='shuffle' is accounted "
                                         r"under 'replace_special' or 'replace_one'"):
        td.dpsgd_epsilon(**kw, neighboring="add_or_remove_one")
    with pytest.raises(ValueError, match=r"^neighboring: sampling='fixed_batch'"):
        td.dpsgd_epsilon(sampling="fixed_batch", batch_size=10, dataset_size=100,
                         noise_multiplier=1.0, steps=3, delta=DELTA, neighboring="replace_one")


def test_a_shuffled_epoch_is_refused_by_an_add_remove_accountant():
    mech = dpsgd_setting(noise_multiplier=1.0, steps=10, sampling="shuffle",
                         steps_per_epoch=10).mechanism()
    with pytest.raises(ValueError, match="add_or_remove_one") as e:
        td.PLDAccountant().compose(mech)
    assert "\n" not in str(e.value)


def test_delta_front_door_and_group_refusal():
    d = td.dpsgd_delta(sampling="shuffle", steps_per_epoch=20, noise_multiplier=1.5,
                       steps=40, epsilon=1.0)
    mu = math.sqrt(2) / 1.5
    exact = norm.cdf(-1 / mu + mu / 2) - math.exp(1.0) * norm.cdf(-1 / mu - mu / 2)
    assert exact <= d.upper <= exact * 1.01 and d.lower <= d.upper
    for kw in (dict(sampling="shuffle", steps_per_epoch=20),
               dict(sampling="random_allocation", steps_per_epoch=20),
               dict(sampling="truncated_poisson", sampling_rate=0.01, dataset_size=1000,
                    max_batch_size=20)):
        with pytest.raises(ValueError, match=r"^sampling must be poisson or fixed_batch for "
                                             r"group privacy"):
            td.group_epsilon(group_size=2, noise_multiplier=1.0, steps=20, delta=DELTA, **kw)


def test_random_allocation_against_closed_forms():
    """selected = steps_per_epoch: every example in every step, E epochs are the Gaussian of
    sensitivity sqrt(E k) (mu = sqrt(E k) / sigma); selected = 1: at most one Gaussian per
    epoch (each example in one step: joint convexity), and the bracket is narrow."""
    r = td.dpsgd_epsilon(sampling="random_allocation", steps_per_epoch=4, selected=4,
                         noise_multiplier=3.0, epochs=2, delta=DELTA)
    exact = _gdp_eps(math.sqrt(8) / 3.0)
    assert r.lower <= exact <= r.upper <= exact * (1 + 1e-3)
    assert r.details["neighboring"] == "add_or_remove_one" and r.details["epochs"] == 2
    r = td.dpsgd_epsilon(sampling="random_allocation", batch_size=20, dataset_size=200,
                         noise_multiplier=1.0, epochs=2, delta=DELTA)
    assert r.details["mechanism"]["steps_per_epoch"] == 10 and r.details["steps"] == 20
    assert r.lower <= r.upper < _gdp_eps(math.sqrt(2) / 1.0)
    assert r.upper - r.lower < 2e-3 * r.upper
    r2 = td.dpsgd_epsilon(sampling="random_allocation", steps_per_epoch=10,
                          noise_multiplier=1.0, epochs=2, delta=DELTA,
                          neighboring="replace_special")
    assert r2.details["neighboring"] == "replace_special" and r2.upper <= r.upper * (1 + 1e-3)
