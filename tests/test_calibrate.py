"""Calibration: the returned setting meets the target by the certified upper bound and is
tight (a 0.5% smaller noise provably misses it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
