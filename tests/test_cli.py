"""The tightdp command, run as a subprocess: JSON agrees with the Python API, bad options
exit with status 2 and one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tightdp as td

BASE = ["--sampling-rate", "0.02", "--noise-multiplier", "1.0", "--steps", "200"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tightdp.cli", *args], capture_output=True,
                          text=True, timeout=600)


def test_epsilon_json_matches_api():
    p = run("epsilon", *BASE, "--delta", "1e-5", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("epsilon", "lower", "upper", "accountant", "seconds"):
        assert key in out
    r = td.PLDAccountant().compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.02), 200)
    r = r.epsilon(1e-5)
    assert out["epsilon"] == pytest.approx(r.epsilon, rel=1e-12)
    assert out["lower"] == pytest.approx(r.lower, rel=1e-12)
    assert out["epsilon"] == out["upper"] and out["accountant"] == "pld"


def test_printed_numbers_are_still_bounds():
    # the table shows 6 digits: the upper bound rounded up, the lower bound down
    out = json.loads(run("epsilon", *BASE, "--delta", "1e-5", "--json").stdout)
    p = run("epsilon", *BASE, "--delta", "1e-5")
    assert p.returncode == 0, p.stderr
    lower, eps, upper = (float(x) for x in p.stdout.splitlines()[-1].split()[:3])
    assert lower <= out["lower"] and eps >= out["upper"] and upper >= out["upper"]
    from tightdp.cli import _Down, _fmt, _Up

    for x in (2.0, 6.1889912, 6.1889987, 9.999996, 4.9999999e-7, 123456789.0):
        assert float(_fmt(_Up(x))) >= x >= float(_fmt(_Down(x)))


def test_delta_json_matches_api():
    p = run("delta", *BASE, "--epsilon", "1.0", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    r = td.PLDAccountant().compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.02), 200).delta(1.0)
    assert out["delta"] == pytest.approx(r.upper, rel=1e-12)
    assert out["lower"] == pytest.approx(r.lower, rel=1e-12)


def test_human_output_is_a_table():
    p = run("epsilon", *BASE, "--delta", "1e-5")
    assert p.returncode == 0
    assert "certified upper bound" in p.stdout and "lower" in p.stdout


@pytest.mark.parametrize("acc", ["rdp", "gdp", "spa", "prv", "fft"])
def test_other_accountants_same_keys(acc):
    extra = ["--n", "200000"] if acc == "fft" else []
    p = run("epsilon", *BASE, "--delta", "1e-5", "--accountant", acc, "--json", *extra)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"epsilon", "lower", "upper", "accountant", "seconds", "certified"} <= set(out)
    assert out["accountant"] == acc
    if acc == "rdp":
        assert out["lower"] is None and out["certified"] is True


def test_compare_runs_every_accountant():
    p = run("compare", *BASE, "--delta", "1e-5", "--json", "--n", "200000")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    names = {r["accountant"] for r in out["results"]}
    assert {"pld", "rdp", "prv", "spa", "gdp", "fft"} <= names
    ups = [r["upper"] for r in out["results"] if r.get("certified") and r.get("upper")]
    los = [r["lower"] for r in out["results"] if r.get("certified") and r.get("lower")]
    assert min(ups) >= max(los)


def test_epochs_option():
    p = run("epsilon", "--sampling-rate", "0.02", "--noise-multiplier", "1", "--epochs", "4",
            "--delta", "1e-5", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["steps"] == 200


@pytest.mark.parametrize("args,option", [
    (["epsilon", "--sampling-rate", "1.5", "--noise-multiplier", "1", "--steps", "10",
      "--delta", "1e-5"], "--sampling-rate"),
    (["epsilon", "--sampling-rate", "0.1", "--noise-multiplier", "0", "--steps", "10",
      "--delta", "1e-5"], "--noise-multiplier"),
    (["epsilon", "--sampling-rate", "0.1", "--noise-multiplier", "1", "--steps", "-1",
      "--delta", "1e-5"], "--steps"),
    (["epsilon", "--sampling-rate", "0.1", "--noise-multiplier", "1", "--steps", "10",
      "--delta", "1"], "--delta"),
    (["delta", "--sampling-rate", "0.1", "--noise-multiplier", "1", "--steps", "10",
      "--epsilon", "nan"], "--epsilon"),
    (["epsilon", "--sampling-rate", "0.1", "--noise-multiplier", "1", "--steps", "x",
      "--delta", "1e-5"], "--steps"),
    (["group", "--group-size", "0", "--sampling-rate", "0.1", "--noise-multiplier", "1",
      "--steps", "10", "--delta", "1e-5"], "group"),
])
def test_bad_options_exit_2_one_line(args, option):
    p = run(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tightdp: error:")
    assert option in lines[0] or option == "group"


def test_help_has_examples():
    p = run("epsilon", "--help")
    assert p.returncode == 0 and "examples:" in p.stdout
