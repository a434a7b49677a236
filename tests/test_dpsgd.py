"""Tests for tightdp.dpsgd.setting: the one validated DP-SGD setting every front door and the
command account.

Independent references: the mechanisms built by hand from their papers (Poisson: Koskela,
Jälkö, Honkela 2020, Sec. 6.1; fixed batch: Ganesh 2024, Thm 3.3 with k = 1, sensitivity 2
with probability B / (n + 1)), dp_accounting's mixture-of-Gaussians PLD for the fixed-batch
pair, and epoch counts worked out by hand.
"""

from __future__ import annotations

import json
import math

import pytest

import tightdp as td
from tightdp import cli
from tightdp.dpsgd import dpsgd_setting


def _cli_json(capsys, *args: str) -> dict:
    assert cli.main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _cli_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(list(args))
    assert e.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tightdp: error: ")
    return lines[0].removeprefix("tightdp: error: ")


# --- validation: every error names the public parameter ----------------------------------------

GOOD = dict(noise_multiplier=1.0, steps=10, sampling_rate=0.01)


@pytest.mark.parametrize("changes,name", [
    (dict(noise_multiplier=0.0), "noise_multiplier"),
    (dict(noise_multiplier=float("nan")), "noise_multiplier"),
    (dict(noise_multiplier=None), "noise_multiplier"),
    (dict(steps=-1), "steps"),
    (dict(steps=2.5), "steps"),
    (dict(steps=None), "steps"),                                   # neither steps nor epochs
    (dict(epochs=2.0), "steps"),                                   # both
    (dict(steps=None, epochs=0.0), "epochs"),
    (dict(steps=None, epochs=math.inf), "epochs"),
    (dict(sampling_rate=0.0), "sampling_rate"),
    (dict(sampling_rate=1.5), "sampling_rate"),
    (dict(sampling_rate=None), "sampling_rate"),
    (dict(batch_size=10, dataset_size=1000), "sampling_rate"),     # rate and sizes
    (dict(sampling_rate=None, batch_size=10), "dataset_size"),
    (dict(sampling_rate=None, dataset_size=1000), "batch_size"),
    (dict(sampling_rate=None, batch_size=0, dataset_size=1000), "batch_size"),
    (dict(sampling_rate=None, batch_size=100, dataset_size=10), "dataset_size"),
    (dict(sampling="uniform"), "sampling"),
    (dict(sampling="fixed_batch"), "sampling_rate"),                # no free rate
    (dict(sampling="with_replacement"), "sampling_rate"),
    (dict(sampling="fixed_batch", sampling_rate=None), "batch_size"),
])
def test_setting_errors_name_the_parameter(changes, name):
    with pytest.raises(ValueError) as e:
        dpsgd_setting(**{**GOOD, **changes})
    assert str(e.value).startswith(name), str(e.value)


@pytest.mark.parametrize("front,kwargs,name", [
    ("dpsgd_epsilon", dict(delta=2.0), "delta"),
    ("dpsgd_epsilon", dict(delta=1e-5, rtol=0.0), "rtol"),
    ("dpsgd_delta", dict(epsilon=-1.0), "epsilon"),
    ("dpsgd_delta", dict(epsilon=float("nan")), "epsilon"),
    ("calibrate_noise", dict(epsilon=0.0, delta=1e-5), "epsilon"),
    ("calibrate_noise", dict(epsilon=1.0, delta=0.0), "delta"),
    ("group_epsilon", dict(group_size=0, delta=1e-5), "group_size"),
])
def test_front_door_errors_name_the_parameter(front, kwargs, name):
    with pytest.raises(ValueError) as e:
        setting = {k: x for k, x in GOOD.items()
                   if not (front == "calibrate_noise" and k == "noise_multiplier")}
        getattr(td, front)(**setting, **kwargs)
    assert str(e.value).startswith(name), str(e.value)


@pytest.mark.parametrize("front", ["dpsgd_epsilon", "dpsgd_delta", "group_epsilon",
                                   "calibrate_noise", "calibrate_steps",
                                   "calibrate_sampling_rate"])
def test_front_doors_are_keyword_only(front):
    with pytest.raises(TypeError):
        getattr(td, front)(0.01, 1.0, 10, 1e-5)


# --- epochs -> steps ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,steps", [
    (dict(epochs=4, sampling_rate=0.02), 200),
    (dict(epochs=0.5, sampling_rate=0.01), 50),
    # 0.3 and 1/30 are stored below their values: 3 / 0.3 is 10.000000000000002 (not 11)
    (dict(epochs=3, sampling_rate=0.3), 10),
    (dict(epochs=1, sampling_rate=1 / 30), 30),
    (dict(epochs=7, sampling_rate=1 / 30), 210),
    (dict(epochs=1, sampling_rate=1 / 3), 3),
    # any real fraction of a round is a round
    (dict(epochs=1, sampling_rate=0.3), 4),
    (dict(epochs=2.0000001, sampling_rate=0.5), 5),
    # a fraction of a step is a whole step (ceil(x - 1e-9) lost it)
    (dict(epochs=1.000000000005, sampling_rate=0.01), 101),
    # sizes: an epoch is n / B rounds, 2 * 60000 / 256 = 468.75
    (dict(epochs=2, batch_size=256, dataset_size=60000), 469),
    (dict(epochs=1, batch_size=250, dataset_size=1000, sampling="fixed_batch"), 4),
    (dict(epochs=1, batch_size=3, dataset_size=10, sampling="with_replacement"), 4),
])
def test_epochs_to_steps(kwargs, steps):
    assert dpsgd_setting(noise_multiplier=1.0, **kwargs).steps == steps


def test_epochs_and_steps_give_the_same_number():
    a = td.dpsgd_epsilon(noise_multiplier=1.0, epochs=2, sampling="fixed_batch", batch_size=256,
                         dataset_size=60000, delta=1e-5, rtol=1e-2)
    b = td.dpsgd_epsilon(noise_multiplier=1.0, steps=469, sampling="fixed_batch",
                         batch_size=256, dataset_size=60000, delta=1e-5, rtol=1e-2)
    assert (a.lower, a.upper) == (b.lower, b.upper) and a.details["steps"] == 469


# --- the mechanism of each sampling, against the one built by hand ------------------------------

def _bracket(mech, steps, delta=1e-5, rtol=1e-3, neighboring="add_or_remove_one"):
    r = td.PLDAccountant(rtol, neighboring=neighboring).compose(mech, steps).epsilon(delta)
    return r.lower, r.upper


def test_poisson_is_the_subsampled_gaussian():
    r = td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=500, delta=1e-5)
    assert (r.lower, r.upper) == _bracket(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), 500)
    # the rate as batch_size / dataset_size is the same setting
    r2 = td.dpsgd_epsilon(batch_size=10, dataset_size=1000, noise_multiplier=1.0, steps=500,
                          delta=1e-5)
    assert (r2.lower, r2.upper) == (r.lower, r.upper)


def test_fixed_batch_is_ganesh_thm_3_3():
    b, n, sigma, t = 100, 5000, 1.0, 300
    r = td.dpsgd_epsilon(sampling="fixed_batch", batch_size=b, dataset_size=n,
                         noise_multiplier=sigma, steps=t, delta=1e-5)
    rate = b / (n + 1)
    assert (r.lower, r.upper) == _bracket(td.PoissonSubsampled(td.Gaussian(sigma, 2.0), rate),
                                          t)
    # the same pair as a two-component mixture of Gaussians (another loss inverse)
    mog = _bracket(td.MixtureOfGaussians([0.0, 2.0], [1 - rate, rate], sigma), t)
    assert mog[0] <= r.upper and r.lower <= mog[1]
    assert r.upper == pytest.approx(mog[1], rel=1e-6)


def test_fixed_batch_against_dp_accounting():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    b, n, sigma, t = 100, 5000, 1.0, 300
    rate = b / (n + 1)
    pld = pldlib.from_mixture_gaussian_mechanism(sigma, [0.0, 2.0], [1 - rate, rate],
                                                 value_discretization_interval=1e-3)
    peer = pld.self_compose(t).get_epsilon_for_delta(1e-5)
    r = td.dpsgd_epsilon(sampling="fixed_batch", batch_size=b, dataset_size=n,
                         noise_multiplier=sigma, steps=t, delta=1e-5, rtol=1e-3)
    assert r.lower <= peer * (1 + 1e-6)          # the peer's pessimistic estimate
    assert peer == pytest.approx(r.upper, rel=1e-2)


def test_substitute_samplings():
    r = td.dpsgd_epsilon(sampling="without_replacement", sampling_rate=0.01,
                         noise_multiplier=1.0, steps=100, delta=1e-5)
    assert (r.lower, r.upper) == _bracket(
        td.SampledWithoutReplacement(td.Gaussian(1.0), 0.01), 100, neighboring="replace_one")
    assert r.details["neighboring"] == "replace_one"
    r = td.dpsgd_epsilon(sampling="with_replacement", batch_size=2, dataset_size=200,
                         noise_multiplier=1.0, steps=10, delta=1e-5)
    assert (r.lower, r.upper) == _bracket(td.SampledWithReplacement(td.Gaussian(1.0), 2, 200),
                                          10, neighboring="replace_one")
    assert r.details["neighboring"] == "replace_one"
    # the relation of the sampling: another one given is refused, naming it
    with pytest.raises(ValueError, match="^neighboring: sampling='without_replacement' is "
                                         "accounted under 'replace_one'"):
        td.dpsgd_epsilon(sampling="without_replacement", sampling_rate=0.01,
                         noise_multiplier=1.0, steps=100, delta=1e-5,
                         neighboring="add_or_remove_one")
    r = td.dpsgd_epsilon(sampling="fixed_batch", batch_size=2, dataset_size=200,
                         noise_multiplier=1.0, steps=10, delta=1e-5, neighboring="add_remove")
    assert r.details["neighboring"] == "add_or_remove_one"


def test_dpsgd_delta_is_the_inverse_query():
    r = td.dpsgd_delta(sampling_rate=0.01, noise_multiplier=1.0, steps=500, epsilon=1.0)
    ref = td.PLDAccountant().compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), 500)
    d = ref.delta(1.0)
    assert (r.lower, r.delta, r.upper) == (d.lower, d.delta, d.upper)


def test_group_of_one_is_the_example_level_setting():
    kw = dict(noise_multiplier=2.0, steps=200, delta=1e-6, sampling="fixed_batch",
              batch_size=500, dataset_size=50000, rtol=1e-3)
    g = td.group_epsilon(group_size=1, baselines=False, **kw)
    r = td.dpsgd_epsilon(**kw)
    assert (g.lower, g.upper) == (r.lower, r.upper)


def test_group_sweep_equals_one_call_per_size():
    from tightdp.dpsgd import group_epsilons

    kw = dict(noise_multiplier=1.0, steps=50, delta=1e-6, sampling_rate=0.05, rtol=2e-2,
              conversion=True)
    sweep = group_epsilons(group_sizes=[1, 3], **kw)
    for r in sweep:
        one = td.group_epsilon(group_size=r.group_size, **kw)
        assert (r.lower, r.upper, r.example_epsilon, r.conversion) == \
            (one.lower, one.upper, one.example_epsilon, one.conversion)
    with pytest.raises(ValueError, match="group_sizes"):
        group_epsilons(group_sizes=[2, 0], **kw)


def test_calibrate_fixed_batch_meets_the_target():
    kw = dict(sampling="fixed_batch", batch_size=100, dataset_size=5000, steps=100,
              delta=1e-5)
    c = td.calibrate_noise(epsilon=2.0, rtol=1e-2, **kw)
    assert c.epsilon <= 2.0
    assert td.dpsgd_epsilon(noise_multiplier=c.noise_multiplier, **kw).upper <= 2.0
    assert td.dpsgd_epsilon(noise_multiplier=0.99 * c.noise_multiplier, **kw).lower > 2.0


# --- the command accounts the same setting -----------------------------------------------------

@pytest.mark.parametrize("flags,kwargs", [
    (["--sampling-rate", "0.01", "--steps", "300"], dict(sampling_rate=0.01, steps=300)),
    (["--sampling", "fixed-batch", "--batch-size", "100", "--dataset-size", "5000",
      "--steps", "300"],
     dict(sampling="fixed_batch", batch_size=100, dataset_size=5000, steps=300)),
    (["--sampling", "fixed-batch", "--batch-size", "100", "--dataset-size", "5000",
      "--epochs", "3"],
     dict(sampling="fixed_batch", batch_size=100, dataset_size=5000, epochs=3)),
])
def test_cli_equals_library(capsys, flags, kwargs):
    out = _cli_json(capsys, "epsilon", "--noise-multiplier", "1", *flags, "--delta", "1e-5")
    r = td.dpsgd_epsilon(noise_multiplier=1.0, delta=1e-5, **kwargs)
    assert (out["epsilon"], out["lower"], out["upper"]) == (r.epsilon, r.lower, r.upper)
    assert out["steps"] == r.details["steps"]
    out = _cli_json(capsys, "delta", "--noise-multiplier", "1", *flags, "--epsilon", "2")
    d = td.dpsgd_delta(noise_multiplier=1.0, epsilon=2.0, **kwargs)
    assert (out["delta"], out["lower"], out["upper"]) == (d.delta, d.lower, d.upper)


def test_cli_compare_fixed_batch_rdp_is_the_subsampled_pair(capsys):
    out = _cli_json(capsys, "compare", "--noise-multiplier", "1", "--steps", "10", "--delta",
                    "1e-5", "--sampling", "fixed-batch", "--batch-size", "10",
                    "--dataset-size", "1000", "--n", "20000")
    rows = {row["accountant"]: row for row in out["results"]}
    mech = td.PoissonSubsampled(td.Gaussian(1.0, 2.0), 10 / 1001)
    rdp = td.RDPAccountant().compose(mech, 10).epsilon(1e-5)
    assert rows["rdp"]["upper"] == rdp.upper
    assert rows["rdp"]["upper"] >= rows["pld"]["upper"]


@pytest.mark.parametrize("args,message", [
    (["--batch-size", "10"], "--dataset-size is needed with --batch-size"),
    (["--sampling-rate", "0.01", "--batch-size", "10", "--dataset-size", "1000"],
     "--sampling-rate: give either --sampling-rate or --batch-size and --dataset-size, "
     "not both"),
    (["--sampling-rate", "1.5"], "--sampling-rate must be in (0, 1], got 1.5"),
])
def test_cli_prints_the_library_message(capsys, args, message):
    line = _cli_error(capsys, "epsilon", "--noise-multiplier", "1", "--steps", "10",
                      "--delta", "1e-5", *args)
    assert line == message


# --- no module-level cache (private imports: tests/test_architecture.py) ---------------------

def test_no_module_level_cache_of_accountants():
    from tightdp.dpsgd import group

    assert not any(hasattr(obj, "cache_info") for obj in vars(group).values())


@pytest.mark.parametrize("front", ["dpsgd_epsilon", "dpsgd_delta", "group_epsilon",
                                   "group_epsilons", "calibrate_noise", "calibrate_steps"])
def test_unknown_keyword_names_the_parameter_meant(front):
    # Opacus' spelling: before, dpsgd_epsilon said "sampling_rate is required" and the others
    # raised a bare TypeError
    kwargs = dict(sample_rate=0.01, noise_multiplier=1.0, steps=10, delta=1e-5, epsilon=1.0,
                  group_size=2, group_sizes=[2])
    with pytest.raises(ValueError) as e:
        getattr(td, front)(**kwargs)
    assert str(e.value) == "unknown parameter sample_rate; did you mean sampling_rate?"
    assert isinstance(e.value, TypeError)  # as Python's own refusal of a keyword


def test_unknown_keyword_without_a_close_one_lists_the_parameters():
    with pytest.raises(ValueError, match=r"^unknown parameter zzz; the parameters are L, "
                                         r"accountant, batch_size"):
        td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=10, delta=1e-5, zzz=1)
    # the accountant's own options still pass through
    r = td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=10, delta=1e-5,
                         accountant="prv", eps_error=0.05)
    assert r.accountant == "prv"
