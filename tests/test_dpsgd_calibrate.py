"""Calibration: the returned setting meets the target by the certified upper bound and is
tight (a 0.5% smaller noise provably misses it)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import oracle
from tightdp import calibrate_noise, calibrate_sampling_rate, calibrate_steps, dpsgd_epsilon


def dpsgd_bracket(q, sigma, steps, delta, **options):
    return dpsgd_epsilon(sampling_rate=q, noise_multiplier=sigma, steps=steps, delta=delta,
                         **options)


@pytest.mark.parametrize("target,q,steps", [(3.0, 0.01, 2000), (1.0, 0.02, 500),
                                            pytest.param(8.0, 0.05, 1000,
                                                         marks=pytest.mark.slow)])
def test_noise_round_trip(target, q, steps):
    r = calibrate_noise(epsilon=target, delta=1e-5, sampling_rate=q, steps=steps, rtol=1e-3)
    assert r.epsilon <= target
    assert r.epsilon >= target * (1 - 1e-3) - 1e-9
    smaller = dpsgd_bracket(q, r.noise_multiplier * 0.995, steps, 1e-5, rtol=1e-4)
    assert smaller.lower > target


def test_steps_and_rate():
    r = calibrate_steps(epsilon=2.0, delta=1e-5, sampling_rate=0.02, noise_multiplier=1.0)
    assert r.epsilon <= 2.0
    assert dpsgd_bracket(0.02, 1.0, r.steps + 1, 1e-5).lower > 2.0 or \
        dpsgd_bracket(0.02, 1.0, r.steps + 1, 1e-5).upper > 2.0
    rq = calibrate_sampling_rate(epsilon=2.0, delta=1e-5, noise_multiplier=1.0, steps=500)
    assert rq.epsilon <= 2.0
    assert dpsgd_bracket(rq.sampling_rate * 1.01, 1.0, 500, 1e-5).lower > 2.0


def test_bad_input():
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_noise(epsilon=0.0, delta=1e-5, sampling_rate=0.01, steps=100)
    with pytest.raises(ValueError, match="accountant"):
        calibrate_noise(epsilon=1.0, delta=1e-5, sampling_rate=0.01, steps=100,
                        accountant="fft")


def test_cli_calibrate_json():
    p = subprocess.run([sys.executable, "-m", "tightdp.cli", "calibrate", "--sampling-rate",
                        "0.02", "--steps", "500", "--delta", "1e-5", "--epsilon", "1", "--json"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["epsilon"] <= 1.0 and out["noise_multiplier"] > 0


def _rdp_upper(**setting):
    return dpsgd_epsilon(delta=1e-5, sampling_rate=0.02, accountant="rdp", **setting).upper


def test_steps_cap_is_queried_not_assumed():
    # max_steps is returned only when its own certified bound meets the target (it was once
    # returned unqueried, with epsilon 0.0)
    free = calibrate_steps(epsilon=2.0, delta=1e-5, sampling_rate=0.02, noise_multiplier=1.0,
                           accountant="rdp")
    assert _rdp_upper(noise_multiplier=1.0, steps=free.steps) <= 2.0 < \
        _rdp_upper(noise_multiplier=1.0, steps=free.steps + 1)
    for cap in (10, 100, free.steps, free.steps + 1):
        r = calibrate_steps(epsilon=2.0, delta=1e-5, sampling_rate=0.02, noise_multiplier=1.0,
                            accountant="rdp", max_steps=cap)
        assert r.steps == min(cap, free.steps)
        assert r.epsilon == _rdp_upper(noise_multiplier=1.0, steps=r.steps) <= 2.0
    with pytest.raises(ValueError, match="max_steps"):
        calibrate_steps(epsilon=2.0, delta=1e-5, sampling_rate=0.02, noise_multiplier=1.0,
                        max_steps=0)


def _limit_queries(monkeypatch) -> list:
    """Search clocks run out after ``left[0]`` more accountant queries (``left`` returned:
    set it before each search)."""
    import importlib

    cal = importlib.import_module("tightdp.dpsgd.calibrate")
    options, left = cal.SearchClock.options, [0]

    def limited(self):
        if left[0] <= 0:
            raise cal.OutOfTime
        left[0] -= 1
        return options(self)
    monkeypatch.setattr(cal.SearchClock, "options", limited)
    return left


def test_out_of_time_returns_a_met_setting_and_its_bracket(monkeypatch):
    left = _limit_queries(monkeypatch)
    left[0] = 5
    # steps: 1, 2, 4, 8, 16 met the target; no count was seen to miss it
    r = calibrate_steps(epsilon=2.0, delta=1e-5, sampling_rate=0.02, noise_multiplier=1.0,
                        accountant="rdp")
    assert r.steps == 16 and r.evaluations == 5 and r.details["converged"] is False
    assert r.epsilon == _rdp_upper(noise_multiplier=1.0, steps=16) <= 2.0
    assert "answer in [16, 1e+08]" in r.details["note"]
    # noise: 2 misses eps = 1 (500 steps), 4 meets it, then the bisection in log sigma
    left[0] = 5
    r = calibrate_noise(epsilon=1.0, delta=1e-5, sampling_rate=0.02, steps=500,
                        accountant="rdp")
    assert r.details["converged"] is False and r.evaluations == 5
    lo, hi = r.details["sigma_infeasible_below"], r.noise_multiplier
    assert 2.0 <= lo < hi <= 4.0 and math.isclose(hi, 2.0 * 2.0 ** 0.125, rel_tol=1e-15)
    assert r.epsilon == _rdp_upper(noise_multiplier=hi, steps=500) <= 1.0
    assert _rdp_upper(noise_multiplier=lo, steps=500) > 1.0
    # sampling rate: 1 misses, 1e-9 meets, then sqrt(1e-9) ...
    left[0] = 4
    r = calibrate_sampling_rate(epsilon=2.0, delta=1e-5, noise_multiplier=1.0, steps=500,
                                accountant="rdp")
    assert r.details["converged"] is False and r.evaluations == 4
    assert r.epsilon == dpsgd_epsilon(delta=1e-5, sampling_rate=r.sampling_rate,
                                      noise_multiplier=1.0, steps=500,
                                      accountant="rdp").upper <= 2.0
    # nothing met the target yet: a clear refusal
    left[0] = 1
    with pytest.raises(ValueError, match="max_seconds: the search found no noise multiplier"):
        calibrate_noise(epsilon=1.0, delta=1e-5, sampling_rate=0.02, steps=500,
                        accountant="rdp")


def _gdp_eps(mu: float, delta: float) -> float:
    """eps of mu-GDP at delta (Dong, Roth & Su 2022, Cor. 2.13), exact (mpmath)."""
    return float(oracle.gaussian_epsilon(1.0 / mu, 1, delta))


def test_noise_for_shuffling_meets_target_and_matches_closed_form():
    """Shuffling's certified side is one Gaussian step per epoch (replace_special): the
    noise is sqrt(E) / mu* with mu*-GDP meeting the target, and sigma (1 - 1e-3) misses."""
    kw = dict(sampling="shuffle", steps_per_epoch=40, epochs=3)
    r = calibrate_noise(epsilon=2.0, delta=1e-5, rtol=1e-3, **kw)
    assert r.epsilon <= 2.0 and r.steps == 120 and r.details["epochs"] == 3
    assert r.details["sampling"] == "shuffle"
    lo, hi = 0.01, 10.0  # mu* with eps(mu*) = 2, by bisection
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _gdp_eps(mid, 1e-5) < 2.0 else (lo, mid)
    exact = math.sqrt(3) / lo
    assert exact <= r.noise_multiplier <= exact * (1 + 2e-3)
    miss = dpsgd_epsilon(noise_multiplier=r.noise_multiplier * (1 - 1e-3), delta=1e-5,
                         rtol=1e-4, **kw)
    assert miss.upper > 2.0


def test_steps_for_shuffling_are_whole_epochs():
    """The largest number of epochs E with sqrt(E)/2-GDP (one Gaussian per epoch, sigma 2)
    within eps 3 at 1e-5, in steps of 25 per epoch."""
    r = calibrate_steps(epsilon=3.0, delta=1e-5, noise_multiplier=2.0, sampling="shuffle",
                        steps_per_epoch=25)
    e = max(k for k in range(1, 200) if _gdp_eps(math.sqrt(k) / 2.0, 1e-5) <= 3.0)
    assert _gdp_eps(math.sqrt(e + 1) / 2.0, 1e-5) > 3.0 * 1.01  # not at the boundary
    assert r.steps == 25 * e and r.details["epochs"] == e and r.epsilon <= 3.0
    with pytest.raises(ValueError, match=r"^max_steps must be >= steps_per_epoch \(25\)"):
        calibrate_steps(epsilon=3.0, delta=1e-5, noise_multiplier=2.0, sampling="shuffle",
                        steps_per_epoch=25, max_steps=10)


@pytest.mark.parametrize("t, rtol", [(10, 4e-3), pytest.param(100, 1e-3,
                                                             marks=pytest.mark.slow)])
def test_noise_for_random_allocation_meets_target_and_is_tight(t, rtol):
    """The sigma found meets eps 2 by the certified upper bound, and sigma (1 - rtol)
    provably misses it (a tighter query's lower bound is above the target)."""
    kw = dict(sampling="random_allocation", steps_per_epoch=t, epochs=2)
    r = calibrate_noise(epsilon=2.0, delta=1e-5, rtol=rtol, **kw)
    assert r.epsilon <= 2.0 and r.details["sampling"] == "random_allocation"
    assert r.steps == 2 * t and r.details["epochs"] == 2
    assert r.noise_multiplier * (1 - rtol / 4) <= r.details["sigma_infeasible_below"]
    miss = dpsgd_epsilon(noise_multiplier=r.noise_multiplier * (1 - rtol), delta=1e-5,
                         rtol=1e-4, **kw)
    assert miss.lower > 2.0
    # below the closed form of no amplification (one Gaussian per epoch): sqrt(2)/sigma-GDP
    assert _gdp_eps(math.sqrt(2) / r.noise_multiplier, 1e-5) > 2.0


# --- calibration to a risk target (tightdp.risk) ---------------------------------------------
def test_calibrate_noise_to_tpr_meets_target_and_is_within_half_percent():
    import tightdp as td

    setting = {"sampling_rate": 0.01, "steps": 10_000}
    r = td.calibrate_noise(tpr=0.05, fpr=0.01, **setting)
    sigma = r.noise_multiplier
    # re-checked with the certified curve: the target is met by the upper bound
    at = td.dpsgd_risk(noise_multiplier=sigma, fpr=0.01, **setting)
    assert at.tpr_upper[0] <= 0.05
    # 0.5% less noise provably misses it: the certified LOWER bound exceeds the target
    below = td.dpsgd_risk(noise_multiplier=sigma * (1 - 0.005), fpr=0.01, **setting)
    assert below.tpr_lower[0] > 0.05
    assert r.seconds < 30
    # riskcal 1.5.1 output, recorded (find_noise_multiplier_for_err_rates(alpha=0.01,
    # beta=0.95, sample_rate=0.01, num_steps=10_000): 619 s here): 1.62283, within its
    # tolerance (beta_tol 1e-3, about 0.5% of sigma here) of ours
    assert sigma == pytest.approx(1.62283, rel=5e-3)


def test_calibrate_noise_to_advantage_against_riskcal():
    import tightdp as td

    # riskcal 1.5.1 output, recorded (find_noise_multiplier_for_advantage(advantage=0.2,
    # sample_rate=0.01, num_steps=1000): 90 s here, so not rerun; its search stops within
    # about 1% of sigma): 0.8697891235351562
    ref = 0.8697891235351562
    r = td.calibrate_noise(advantage=0.2, sampling_rate=0.01, steps=1000)
    assert r.noise_multiplier == pytest.approx(ref, rel=0.01)
    at = td.dpsgd_risk(noise_multiplier=r.noise_multiplier, sampling_rate=0.01, steps=1000)
    assert at.advantage_upper <= 0.2
    below = td.dpsgd_risk(noise_multiplier=r.noise_multiplier * 0.995, sampling_rate=0.01,
                          steps=1000)
    assert below.advantage_lower > 0.2


@pytest.mark.parametrize("kw,name", [
    ({"tpr": 0.01, "fpr": 0.05}, "tpr"),
    ({"tpr": 0.5, "fpr": 1.5}, "fpr"),
    ({"tpr": 0.5}, "tpr and fpr"),
    ({"advantage": 1.2}, "advantage"),
    ({"advantage": 0.1, "epsilon": 1.0}, "epsilon, delta"),
])
def test_calibrate_noise_risk_bad_input(kw, name):
    import tightdp as td

    with pytest.raises(ValueError, match=f"^{name}") as err:
        td.calibrate_noise(sampling_rate=0.01, steps=100, **kw)
    assert "\n" not in str(err.value)


def test_calibrate_noise_risk_other_samplings():
    import tightdp as td

    # the search only changes sigma of the validated setting: any sampling scheme
    r = td.calibrate_noise(advantage=0.3, sampling="fixed_batch", batch_size=100,
                           dataset_size=10_000, steps=200)
    at = td.dpsgd_risk(noise_multiplier=r.noise_multiplier, sampling="fixed_batch",
                       batch_size=100, dataset_size=10_000, steps=200, fpr=0.5)
    assert at.advantage_upper <= 0.3


# --- steps and sampling rate for a risk target --------------------------------------------
def test_calibrate_steps_to_tpr_against_gdp_closed_form():
    from scipy.stats import norm

    import tightdp as td

    # rate 1: k Gaussian steps of noise sigma are sqrt(k)/sigma-GDP, whose TPR at FPR a is
    # Phi(sqrt(k)/sigma + Phi^-1(a)) (Dong, Roth & Su, eq. (2.4)); the target is placed at
    # k = 64.5, so 64 steps meet it and 65 miss it
    sigma, fpr = 10.0, 0.05
    tpr = norm.cdf(math.sqrt(64.5) / sigma + norm.ppf(fpr))
    r = td.calibrate_steps(noise_multiplier=sigma, sampling_rate=1.0, tpr=tpr, fpr=fpr)
    assert r.steps == 64 and r.details["tpr_upper"] <= tpr
    assert r.details["tpr_lower"] <= norm.cdf(0.8 + norm.ppf(fpr)) <= r.details["tpr_upper"]
    assert math.isnan(r.epsilon) and r.details["target"].startswith("TPR <=")


def test_calibrate_steps_to_tpr_one_more_step_misses_it():
    import tightdp as td

    setting = {"noise_multiplier": 1.0, "sampling_rate": 0.05}
    r = td.calibrate_steps(tpr=0.2, fpr=0.05, **setting)
    assert r.steps == 152 and r.seconds < 5
    at = td.dpsgd_risk(steps=r.steps, fpr=0.05, **setting)
    assert at.tpr_upper[0] <= 0.2
    # one more step provably misses it: its certified LOWER bound (a finer curve) exceeds it
    more = td.dpsgd_risk(steps=r.steps + 1, fpr=0.05, tol=1e-4, rtol=1e-4, **setting)
    assert more.tpr_lower[0] > 0.2


def test_calibrate_steps_to_advantage_whole_epochs_shuffle():
    from scipy.stats import norm

    import tightdp as td

    # shuffle's certified upper side is no amplification, one Gaussian per epoch: E epochs
    # are sqrt(E)/sigma-GDP, advantage 2 Phi(mu / 2) - 1 (Dong, Roth & Su, Cor. 2.13);
    # target at E = 4.5 epochs, so 4 whole epochs (40 steps) meet it
    adv = 2 * norm.cdf(math.sqrt(4.5) / 5.0 / 2) - 1
    r = td.calibrate_steps(noise_multiplier=5.0, sampling="shuffle", steps_per_epoch=10,
                           advantage=adv)
    assert r.steps == 40 and r.details["epochs"] == 4
    assert r.details["advantage_upper"] == pytest.approx(2 * norm.cdf(0.2) - 1, rel=1e-3)
    assert r.details["advantage_upper"] <= adv


def test_calibrate_sampling_rate_to_advantage_one_step_closed_form():
    from scipy.stats import norm

    import tightdp as td

    # one Poisson-subsampled Gaussian step: the advantage is the total variation
    # q (2 Phi(1 / (2 sigma)) - 1) (the mixture's TV is q times the Gaussians'), so the
    # largest rate for advantage A is A / (2 Phi(1 / (2 sigma)) - 1)
    ref = 0.1 / (2 * norm.cdf(0.5) - 1)
    r = td.calibrate_sampling_rate(noise_multiplier=1.0, steps=1, advantage=0.1)
    assert r.sampling_rate <= ref and r.sampling_rate == pytest.approx(ref, rel=2e-3)
    assert r.details["advantage_upper"] <= 0.1


def test_calibrate_sampling_rate_to_advantage_higher_rate_misses_it():
    import tightdp as td

    r = td.calibrate_sampling_rate(noise_multiplier=1.0, steps=200, advantage=0.3)
    assert r.seconds < 5
    q = r.sampling_rate
    at = td.dpsgd_risk(noise_multiplier=1.0, steps=200, sampling_rate=q)
    assert at.advantage_upper <= 0.3
    above = td.dpsgd_risk(noise_multiplier=1.0, steps=200, sampling_rate=q * 1.005)
    assert above.advantage_lower > 0.3


@pytest.mark.parametrize("kw,name", [
    ({"tpr": 0.2, "fpr": 0.05, "epsilon": 1.0, "delta": 1e-5}, "epsilon, delta"),
    ({"tpr": 0.01, "fpr": 0.05}, "tpr"),
    ({"tpr": 0.2}, "tpr and fpr"),
    ({"advantage": 0.0}, "advantage"),
    ({"advantage": 0.2, "accountant": "rdp"}, "accountant"),
    ({}, "epsilon and delta"),
])
@pytest.mark.parametrize("solve", ["steps", "rate"])
def test_calibrate_steps_rate_risk_bad_input(kw, name, solve):
    import tightdp as td

    with pytest.raises(ValueError, match=f"^{name}") as err:
        if solve == "steps":
            td.calibrate_steps(noise_multiplier=1.0, sampling_rate=0.05, **kw)
        else:
            td.calibrate_sampling_rate(noise_multiplier=1.0, steps=100, **kw)
    assert "\n" not in str(err.value)
