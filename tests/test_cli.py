"""The tightdp command, run as a subprocess: JSON agrees with the Python API, bad options
exit with status 2 and one line."""

from __future__ import annotations

import json
import math
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
    from tightdp.cli import RoundDown, RoundUp, format_value

    for x in (2.0, 6.1889912, 6.1889987, 9.999996, 4.9999999e-7, 123456789.0):
        assert float(format_value(RoundUp(x))) >= x >= float(format_value(RoundDown(x)))


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


# --- strict and honest command line (issue 14) -------------------------------------------------
# cheap settings: every query below is a few milliseconds of accounting

from tightdp import cli  # noqa: E402
from tightdp import results as acc_results  # noqa: E402
from tightdp.accountants import base as acc_base  # noqa: E402
from tightdp.budget import Budget  # noqa: E402

CHEAP = ["--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps", "10"]


def cli_error(capsys, *args: str) -> str:
    """Run ``tightdp args`` in-process; it must exit with status 2 and one stderr line."""
    with pytest.raises(SystemExit) as e:
        cli.main(list(args))
    assert e.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tightdp: error:"), err
    return lines[0]


def cli_json(capsys, *args: str) -> dict:
    """Run ``tightdp args --json`` in-process; its output must be strict JSON."""
    assert cli.main([*args, "--json"]) == 0

    def no_constant(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(capsys.readouterr().out, parse_constant=no_constant)


@pytest.fixture
def built(monkeypatch):
    """The budgets of every accountant constructed while the test runs."""
    seen: list[Budget] = []
    init = acc_base.Accountant.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append(self.budget)

    monkeypatch.setattr(acc_base.Accountant, "__init__", spy)
    return seen


@pytest.mark.parametrize("accountant,option", [
    ("pld", "--rtol"), ("prv", "--eps-error"), ("prv", "--delta-error"), ("fft", "--L"),
    ("fft", "--n"),
])
def test_zero_is_a_value_not_the_default(capsys, accountant, option):
    # `o.get(...) or default` turned 0 into the default and answered: now the accountant's
    # own validation rejects it, and the message names the option
    line = cli_error(capsys, "epsilon", *CHEAP, "--delta", "1e-5", "--accountant", accountant,
                     option, "0")
    assert line.startswith(f"tightdp: error: {option} must be")


@pytest.mark.parametrize("args,option", [
    (["--accountant", "prv", "--rtol", "1e-3"], "--rtol"),
    (["--accountant", "rdp", "--rtol", "1e-3"], "--rtol"),
    (["--accountant", "spa", "--rtol", "1e-3"], "--rtol"),
    (["--accountant", "gdp", "--rtol", "1e-3"], "--rtol"),
    (["--accountant", "fft", "--rtol", "1e-3"], "--rtol"),
    (["--eps-error", "0.1"], "--eps-error"),
    (["--accountant", "rdp", "--delta-error", "1e-9"], "--delta-error"),
    (["--accountant", "prv", "--L", "10"], "--L"),
    (["--n", "1000"], "--n"),
    (["--accountant", "fft", "--spa-method", "clt"], "--spa-method"),
])
def test_inapplicable_accountant_flag_is_an_error(capsys, built, args, option):
    line = cli_error(capsys, "epsilon", *CHEAP, "--delta", "1e-5", *args)
    assert option in line and "applies only to" in line
    assert not built  # refused before any accountant was built


@pytest.mark.parametrize("args,option", [
    # the rate and batch/dataset sizes together
    (["--sampling-rate", "0.01", "--batch-size", "10", "--dataset-size", "1000"],
     "--sampling-rate"),
    # half of batch/dataset size
    (["--batch-size", "10"], "--dataset-size"),
    (["--dataset-size", "1000"], "--batch-size"),
    # fixed batches and sampling with replacement have no free rate
    (["--sampling", "fixed-batch", "--sampling-rate", "0.01", "--batch-size", "10",
      "--dataset-size", "1000"], "--sampling-rate"),
    (["--sampling", "with-replacement", "--sampling-rate", "0.01"], "--sampling-rate"),
    (["--batch-size", "100", "--dataset-size", "10"], "--dataset-size"),
])
def test_conflicting_sampling_flags(capsys, args, option):
    line = cli_error(capsys, "epsilon", "--noise-multiplier", "1", "--steps", "10",
                     "--delta", "1e-5", *args)
    assert option in line


def test_rate_from_sizes_still_works_but_not_beside_the_rate(capsys):
    out = cli_json(capsys, "epsilon", "--noise-multiplier", "1", "--steps", "10",
                   "--batch-size", "10", "--dataset-size", "1000", "--delta", "1e-5")
    ref = cli_json(capsys, "epsilon", *CHEAP, "--delta", "1e-5")
    assert out["sampling_rate"] == 0.01 and out["epsilon"] == ref["epsilon"]
    # the same rate given both ways was silently accepted (a different one silently won)
    line = cli_error(capsys, "epsilon", *CHEAP, "--batch-size", "10", "--dataset-size",
                     "1000", "--delta", "1e-5")
    assert "not both" in line


@pytest.mark.parametrize("solve,args,option", [
    ("noise-multiplier", ["--sampling-rate", "0.01", "--steps", "10", "--noise-multiplier",
                          "1"], "--noise-multiplier"),
    ("steps", ["--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps", "10"],
     "--steps"),
    ("steps", ["--sampling-rate", "0.01", "--noise-multiplier", "1", "--epochs", "1"],
     "--epochs"),
    ("sampling-rate", ["--noise-multiplier", "1", "--steps", "10", "--sampling-rate", "0.01"],
     "--sampling-rate"),
    ("sampling-rate", ["--noise-multiplier", "1", "--steps", "10", "--batch-size", "10",
                       "--dataset-size", "1000"], "--batch-size"),
    ("sampling-rate", ["--noise-multiplier", "1", "--epochs", "2"], "--epochs"),
])
def test_calibrate_unknown_given_is_an_error(capsys, built, solve, args, option):
    line = cli_error(capsys, "calibrate", "--epsilon", "1", "--delta", "1e-5",
                     "--solve-for", solve, *args)
    assert option in line
    assert not built


@pytest.mark.parametrize("args", [
    ["delta", *CHEAP, "--epsilon", "1", "--delta", "5"],     # was read as --delta-error 5
    ["epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1", "--epoch", "1",
     "--delta", "1e-5"],                                    # was read as --epochs 1
    ["epsilon", *CHEAP, "--delta", "1e-5", "--acc", "rdp"],  # was read as --accountant rdp
])
def test_no_abbreviations(capsys, args):
    assert "unrecognized arguments" in cli_error(capsys, *args)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"tightdp {td.__version__}"


def test_version_and_exit_2_in_a_real_process():
    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"tightdp {td.__version__}"
    p = run("epsilon", *CHEAP, "--delta", "1e-5", "--accountant", "pld", "--rtol", "0")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "tightdp: error: --rtol must be in (0, inf), got 0.0"]


def _raise(exc):
    def f(*args, **kwargs):
        raise exc
    return f


def test_ctrl_c_exits_130_without_traceback(capsys, monkeypatch):
    monkeypatch.setattr(td.PLDAccountant, "epsilon", _raise(KeyboardInterrupt()))
    with pytest.raises(SystemExit) as e:
        cli.main(["epsilon", *CHEAP, "--delta", "1e-5"])
    assert e.value.code == 130
    assert capsys.readouterr().err == "tightdp: interrupted\n"


def test_ctrl_c_in_a_real_process():
    code = ("import sys, tightdp as td\n"
            "from tightdp import cli\n"
            "def stop(*a, **k):\n"
            "    raise KeyboardInterrupt\n"
            "td.PLDAccountant.epsilon = stop\n"
            f"sys.exit(cli.main({['epsilon', *CHEAP, '--delta', '1e-5']!r}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 130 and p.stderr == "tightdp: interrupted\n"


def test_memory_error_names_max_memory(capsys, monkeypatch):
    monkeypatch.setattr(td.PLDAccountant, "epsilon", _raise(MemoryError()))
    assert "--max-memory" in cli_error(capsys, "epsilon", *CHEAP, "--delta", "1e-5")


def test_a_bug_is_not_swallowed(capsys, monkeypatch):
    monkeypatch.setattr(td.PLDAccountant, "epsilon", _raise(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["epsilon", *CHEAP, "--delta", "1e-5"])


@pytest.mark.parametrize("args", [
    ["epsilon", *CHEAP, "--delta", "1e-5"],
    ["epsilon", *CHEAP, "--delta", "1e-5", "--accountant", "rdp"],
    ["delta", *CHEAP, "--epsilon", "1", "--accountant", "prv"],
    ["compare", *CHEAP, "--delta", "1e-5", "--n", "20000"],
    ["calibrate", "--sampling-rate", "0.01", "--steps", "10", "--delta", "1e-5",
     "--epsilon", "1", "--rtol", "1e-2"],
    ["group", "--group-size", "2", *CHEAP, "--delta", "1e-5", "--rtol", "1e-2"],
])
def test_budget_reaches_every_accountant(capsys, built, args):
    cli_json(capsys, *args, "--max-memory", "500MB", "--max-seconds", "7")
    if args[0] == "calibrate":  # a search shares its time budget: each query gets what is left
        assert built and all(b.max_memory == 500_000_000 and 0 < b.max_seconds <= 7.0
                             for b in built)
        assert built[0].max_seconds > built[-1].max_seconds
    else:
        assert built and all(b == Budget(500_000_000, 7.0) for b in built)


def test_budget_reaches_plot(capsys, built, tmp_path):
    pytest.importorskip("matplotlib")
    out = cli_json(capsys, "plot", "--sampling-rate", "0.01", "--noise-multiplier", "1",
                   "--steps", "3", "--kind", "steps", "--accountants", "rdp",
                   "--output", str(tmp_path / "s.png"), "--max-memory", "500MB",
                   "--max-seconds", "7")
    assert (tmp_path / "s.png").stat().st_size > 0
    assert built and all(b == Budget(500_000_000, 7.0) for b in built)
    assert out["accountant"] == "rdp" and out["epsilon"] == out["upper"] > 0


@pytest.mark.parametrize("value,message", [
    ("1kB", "--max-memory"), ("lots", "--max-memory"),
])
def test_bad_max_memory(capsys, value, message):
    assert message in cli_error(capsys, "epsilon", *CHEAP, "--delta", "1e-5",
                                "--max-memory", value)


def test_bad_max_seconds(capsys, built):
    line = cli_error(capsys, "group", "--group-size", "2", *CHEAP, "--delta", "1e-5",
                     "--max-seconds", "0")
    assert line.startswith("tightdp: error: --max-seconds must be")
    assert not built


@pytest.mark.parametrize("output,fragment", [
    ("/nonexistent/x.png", "does not exist"),
    ("{tmp}/curve.jpg", "must be a .png"),
    ("{tmp}", "must be a .png"),
    ("{tmp}/dir.png", "is a directory"),
])
def test_plot_output_checked_before_any_work(capsys, built, tmp_path, output, fragment):
    (tmp_path / "dir.png").mkdir()
    line = cli_error(capsys, "plot", *CHEAP, "--output", output.format(tmp=tmp_path))
    assert "--output" in line and fragment in line
    assert not built


def test_json_infinity_is_null_with_a_flag(capsys, monkeypatch):
    # an eps that is +inf (a delta below the mass at infinity) must not be the string "inf"
    def infinite(self, delta):
        return acc_results.EpsilonResult(math.inf, delta, 1.0, math.inf, "pld", True,
                                      details={"curve": [1.0, math.inf, -math.inf]})

    monkeypatch.setattr(td.PLDAccountant, "epsilon", infinite)
    out = cli_json(capsys, "epsilon", *CHEAP, "--delta", "1e-5")
    assert out["epsilon"] is None and out["epsilon_infinite"] is True
    assert out["upper"] is None and out["upper_infinite"] is True
    assert out["lower"] == 1.0 and "lower_infinite" not in out
    d = out["details"]
    assert d["curve"] == [1.0, None, None]
    assert d["curve_infinite"] == [False, True, False]
    assert d["curve_negative_infinite"] == [False, False, True]


def test_json_encoding_nested():
    x = {"a": math.nan, "b": {"c": -math.inf}, "d": [[1.0, math.inf]], "e": (2, "s", None)}
    out = cli._clean(x)
    json.dumps(out, allow_nan=False)  # strict JSON
    assert out == {"a": None, "b": {"c": None, "c_negative_infinite": True},
                   "d": [[1.0, None]], "d_infinite": [[False, True]], "e": [2, "s", None]}


SCHEMA = {"lower", "upper", "accountant", "certified", "seconds", "note"}


@pytest.mark.parametrize("args,value", [
    (["epsilon", *CHEAP, "--delta", "1e-5"], "epsilon"),
    (["delta", *CHEAP, "--epsilon", "1"], "delta"),
    (["compare", *CHEAP, "--delta", "1e-5", "--n", "20000"], "epsilon"),
    (["calibrate", "--sampling-rate", "0.01", "--steps", "10", "--delta", "1e-5",
      "--epsilon", "1", "--rtol", "1e-2"], "epsilon"),
    (["group", "--group-size", "2", *CHEAP, "--delta", "1e-5", "--rtol", "1e-2"], "epsilon"),
])
def test_one_json_schema(capsys, args, value):
    out = cli_json(capsys, *args)
    assert SCHEMA | {value} <= set(out)
    assert isinstance(out[value], float) and out["certified"] is True
    assert out["upper"] == out[value]  # the headline of a certifying accountant


def test_compare_headline_and_notes(capsys):
    out = cli_json(capsys, "compare", *CHEAP, "--delta", "1e-5", "--n", "20000")
    rows = {r["accountant"]: r for r in out["results"]}
    for r in rows.values():
        assert SCHEMA | {"epsilon", "status"} <= set(r)
    head = {k: v for k, v in rows["pld"].items() if k != "seconds"}
    assert {k: out[k] for k in head} == head  # the default accountant's row on top
    assert rows["pld"]["status"] == "certified upper+lower"
    assert rows["rdp"]["status"] == "certified upper only"
    assert rows["gdp"]["status"] == "approximation"
    assert rows["spa"]["status"].startswith("approximation")
    out = cli_json(capsys, "compare", *CHEAP, "--delta", "1e-5", "--n", "20000",
                   "--accountant", "rdp")
    assert out["accountant"] == "rdp" and out["lower"] is None


def test_compare_text_has_notes_and_refusals(capsys):
    # with-replacement: a mixture of Gaussians, which RDP refuses (fixed-batch is now the
    # Poisson-subsampled pair of Ganesh's Thm 3.3, which RDP accounts)
    assert cli.main(["compare", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5",
                     "--n", "20000", "--sampling", "with-replacement", "--batch-size", "2",
                     "--dataset-size", "200"]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[1].split()
    assert header[-1] == "notes"
    assert "certified upper+lower" in text
    rdp = next(line for line in text.splitlines() if line.startswith("rdp"))
    assert "refused: RDPAccountant" in rdp


def test_compare_bad_option_is_an_error_not_a_refusal(capsys):
    assert "--rtol" in cli_error(capsys, "compare", *CHEAP, "--delta", "1e-5", "--rtol", "0")


def test_group_conversion_is_opt_in(capsys):
    base = ["group", "--group-size", "2", *CHEAP, "--delta", "1e-5", "--rtol", "1e-2"]
    out = cli_json(capsys, *base)
    assert out["conversion"] is None and out["example_epsilon"] > 0
    assert cli.main(base) == 0
    assert "conversion" not in capsys.readouterr().out
    out = cli_json(capsys, *base, "--conversion")
    # the Lemma 1.1 conversion is a certified, looser upper bound
    assert out["conversion"] >= out["upper"]
    assert cli.main([*base, "--conversion"]) == 0
    assert "conversion (Lemma 1.1)" in capsys.readouterr().out
    # the Python front door: the same default
    r = td.group_epsilon(group_size=2, noise_multiplier=1.0, steps=10, delta=1e-5,
                         sampling_rate=0.01, rtol=1e-2)
    assert r.conversion is None and r.conversion_example_delta is None
    assert r.example_epsilon == pytest.approx(out["example_epsilon"], rel=0)


def test_json_names_the_neighbouring_relation(capsys):
    from tightdp import cli

    for sampling, relation, mech in (
            ("poisson", "add_or_remove_one", td.PoissonSubsampled(td.Gaussian(1.0), 0.02)),
            ("without-replacement", "replace_one",
             td.SampledWithoutReplacement(td.Gaussian(1.0), 0.02))):
        assert cli.main(["epsilon", *BASE, "--sampling", sampling, "--delta", "1e-5",
                         "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["details"]["neighboring"] == relation
        r = td.PLDAccountant(neighboring=relation).compose(mech, 200).epsilon(1e-5)
        assert (out["lower"], out["upper"]) == (r.lower, r.upper)


# --- vanishing noise, astronomic step counts, closed pipes, multi-line messages ----------------
def test_vanishing_noise_answers_infinity_plainly(capsys):
    """sigma = 1e-300 at q = 0.01: the loss is beyond the doubles, so is the true eps at
    delta = 1e-5 (three sampled steps lose ~1/(2 sigma^2) each with probability 1.1e-4):
    exit 0, upper infinite, the note says so (before: a 52-line ZeroDivisionError)."""
    out = cli_json(capsys, "epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1e-300",
                   "--steps", "10", "--delta", "1e-5")
    assert out["upper_infinite"] is True and out["certified"] is True
    assert "epsilon = inf" in out["note"]
    assert cli.main(["epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1e-300",
                     "--steps", "10", "--delta", "1e-5"]) == 0
    assert "epsilon = inf" in capsys.readouterr().out


@pytest.mark.parametrize("steps", ["1e18", "1e20", "1e25", "1e30"])
def test_astronomic_steps_answer(capsys, steps):
    """At q = 1 the steps are Gaussian: eps is that of mu-GDP with mu = sqrt(steps)
    (oracle, mpmath), inside the bracket (before: 'Target length must be positive' or an
    OverflowError traceback)."""
    import oracle

    out = cli_json(capsys, "epsilon", "--sampling-rate", "1", "--noise-multiplier", "1",
                   "--steps", steps, "--delta", "1e-5")
    exact = oracle.gaussian_epsilon(1.0, int(float(steps)), 1e-5)
    assert out["lower"] <= exact <= out["upper"] and "count" in out["note"]
    out = cli_json(capsys, "epsilon", *CHEAP[:4], "--steps", steps, "--delta", "1e-5")
    assert out["certified"] is True and math.isfinite(out["upper"])


def test_spec_with_astronomic_count_answers(tmp_path, capsys):
    path = tmp_path / "spec.json"
    td.save(td.PLDAccountant().compose(td.Gaussian(1.0), 10), path)
    path.write_text(path.read_text().replace('"count": 10', '"count": 1e30'))
    out = cli_json(capsys, "epsilon", "--spec", str(path), "--delta", "1e-5")
    import oracle

    exact = oracle.gaussian_epsilon(1.0, int(1e30), 1e-5)  # the file's 1e30, as read
    assert out["lower"] <= exact <= out["upper"] and out["steps"] == int(1e30)


def test_multi_line_refusal_is_one_line(tmp_path, capsys):
    """The RDP accountant refuses a 17-component mixture naming it compactly, and the command
    prints any refusal on one line (before: cut in the middle of an array repr)."""
    path = tmp_path / "spec.json"
    td.save(td.PLDAccountant().compose(
        td.MixtureOfGaussians(list(range(17)), [1 / 17] * 17, 1.0)), path)
    line = cli_error(capsys, "epsilon", "--spec", str(path), "--delta", "1e-5",
                     "--accountant", "rdp")
    assert "17 components" in line
    with pytest.raises(SystemExit):
        cli._fail("first line\n  second line\n")
    assert capsys.readouterr().err == "tightdp: error: first line second line\n"


@pytest.mark.parametrize("args", [
    ["epsilon", *CHEAP, "--delta", "1e-5", "--rtol", "0.1"],
    ["calibrate", *CHEAP[:2], "--steps", "10", "--delta", "1e-5", "--epsilon", "3"],
])
def test_closed_pipe_ends_quietly(args):
    """The reader closes the pipe before the output (``| head -0``): status 0 and nothing
    on stderr, in every run (before: a BrokenPipeError traceback, status 1)."""
    import os

    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "tightdp.cli", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        proc.stdout.close()  # the reader is gone before anything is written
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=600) == 0 and err == "", err


def test_option_tables_name_options_of_the_command():
    # the option tables name options only (their values read through dest_of): each option is
    # one the subcommands reading the table take, stored under the attribute dest_of derives,
    # so renaming a flag without its table entry fails here instead of never being read
    import argparse

    from tightdp.cli import build_parser
    from tightdp.cli.common import dest_of
    from tightdp.cli.options import ACCOUNTANT_FLAGS, SPEC_CONFLICTS, SPEC_OVERRIDES
    from tightdp.cli.sweep import SWEEP_LISTS

    sub = next(x for x in build_parser()._actions if isinstance(x, argparse._SubParsersAction))
    dests = {name: {o: x.dest for x in p._actions for o in x.option_strings}
             for name, p in sub.choices.items()}
    tables = [([o for o, _ in ACCOUNTANT_FLAGS], ["epsilon", "delta", "compare", "plot"]),
              ([o for o, _ in SPEC_OVERRIDES], ["epsilon", "delta"]),
              ([o for o, _, _ in SWEEP_LISTS], ["sweep"])]
    for options, commands in tables:
        for command in commands:
            for o in options:
                assert dests[command].get(o) == dest_of(o), (command, o)
    for o in SPEC_CONFLICTS:  # each taken by some subcommand that takes --spec
        takers = [c for c in ("epsilon", "delta", "calibrate") if o in dests[c]]
        assert takers and all(dests[c][o] == dest_of(o) for c in takers), o
    assert dest_of("--L") == "L" and dest_of("--spa-method") == "spa_method"


def test_epoch_samplings_on_the_command_line(capsys):
    """--sampling shuffle / random-allocation / truncated-poisson with their flags: the JSON
    names the scheme and matches the library; bad flags exit 2 naming the option."""
    out = cli_json(capsys, "epsilon", "--sampling", "shuffle", "--batch-size", "10",
                   "--dataset-size", "200", "--noise-multiplier", "2", "--epochs", "2",
                   "--delta", "1e-5")
    lib = td.dpsgd_epsilon(sampling="shuffle", batch_size=10, dataset_size=200,
                           noise_multiplier=2.0, epochs=2, delta=1e-5)
    assert out["sampling"] == "shuffle" and out["epsilon"] == lib.epsilon
    assert out["steps"] == 40 and out["details"]["epochs"] == 2
    assert out["details"]["neighboring"] == "replace_special"
    err = cli_error(capsys, "epsilon", "--sampling", "shuffle", "--batch-size", "10",
                    "--dataset-size", "201", "--noise-multiplier", "2", "--epochs", "2",
                    "--delta", "1e-5")
    assert "--dataset-size 201 is not a multiple of --batch-size 10" in err
    err = cli_error(capsys, "epsilon", "--sampling", "random-allocation", "--steps-per-epoch",
                    "5", "--selected", "6", "--noise-multiplier", "2", "--steps", "5",
                    "--delta", "1e-5")
    assert "--selected must be in [1, steps_per_epoch=5]" in err
    err = cli_error(capsys, "epsilon", "--sampling", "shuffle", "--steps-per-epoch", "5",
                    "--noise-multiplier", "2", "--steps", "7", "--delta", "1e-5")
    assert "--steps 7 is not a multiple of --steps-per-epoch 5" in err
    err = cli_error(capsys, "epsilon", "--sampling", "truncated-poisson", "--sampling-rate",
                    "0.1", "--dataset-size", "100", "--max-batch-size", "0",
                    "--noise-multiplier", "2", "--steps", "7", "--delta", "1e-5")
    assert "--max-batch-size must be an integer >= 1" in err
    cal = cli_json(capsys, "calibrate", "--sampling", "shuffle", "--steps-per-epoch", "5",
                   "--epochs", "2", "--epsilon", "3", "--delta", "1e-5")
    lib = td.calibrate_noise(sampling="shuffle", steps_per_epoch=5, epochs=2, epsilon=3.0,
                             delta=1e-5)
    assert cal["noise_multiplier"] == lib.noise_multiplier and cal["sampling"] == "shuffle"


# --- conveniences: misspelt options, spellings of choices, the unknown of calibrate ---------

@pytest.mark.parametrize("args,typo,meant", [
    (["epsilon", "--sampling-rate", "0.01", "--noise-multipler", "1", "--steps", "10",
      "--delta", "1e-5"], "--noise-multipler", "--noise-multiplier"),
    # compare requires --noise-multiplier: the misspelling is named, not the missing option
    (["compare", "--sampling-rate", "0.01", "--noise-multipler", "1", "--steps", "10",
      "--delta", "1e-5"], "--noise-multipler", "--noise-multiplier"),
    (["group", "--group-sise", "2", *CHEAP, "--delta", "1e-5"], "--group-sise", "--group-size"),
    (["calibrate", "--sampling-rate", "0.01", "--steps=10", "--delta", "1e-5", "--epsilon",
      "3", "--solve_for=steps"], "--solve_for", "--solve-for"),
])
def test_misspelt_option_gets_a_suggestion(capsys, args, typo, meant):
    line = cli_error(capsys, *args)
    assert line == f"tightdp: error: unrecognized arguments: {typo}; did you mean {meant}?"


def test_unknown_option_without_a_close_one(capsys):
    line = cli_error(capsys, "epsilon", *CHEAP, "--delta", "1e-5", "--zzzzzz", "1")
    assert line == "tightdp: error: unrecognized arguments: --zzzzzz"


@pytest.mark.parametrize("spelling", ["fixed_batch", "Fixed_Batch", "fixed-batch"])
def test_sampling_underscores_or_dashes(capsys, spelling):
    setting = ["--batch-size", "10", "--dataset-size", "1000", "--noise-multiplier", "1",
               "--steps", "10", "--delta", "1e-5"]
    out = cli_json(capsys, "epsilon", "--sampling", spelling, *setting)
    # the API's answer for the same setting: a fixed batch is the Poisson-subsampled Gaussian
    # of sensitivity 2 at rate B / (n + 1) (Ganesh 2024, Thm 3.3; dpsgd/setting.py)
    ref = td.PLDAccountant().compose(
        td.PoissonSubsampled(td.Gaussian(1.0, 2.0), 10 / 1001), 10).epsilon(1e-5)
    assert out["epsilon"] == pytest.approx(ref.epsilon, rel=1e-12)
    assert out["details"]["sampling"] == "fixed_batch"


@pytest.mark.parametrize("given,unknown", [
    (["--sampling-rate", "0.01", "--steps", "10"], "noise-multiplier"),
    (["--sampling-rate", "0.01", "--noise-multiplier", "1"], "steps"),
    (["--noise-multiplier", "1", "--steps", "10"], "sampling-rate"),
    (["--batch-size", "10", "--dataset-size", "1000", "--noise-multiplier", "1"], "steps"),
])
def test_calibrate_infers_the_unknown(capsys, given, unknown):
    target = ["--delta", "1e-5", "--epsilon", "3"]
    out = cli_json(capsys, "calibrate", *given, *target)
    ref = cli_json(capsys, "calibrate", *given, *target, "--solve-for", unknown)
    assert out == {**ref, "seconds": out["seconds"]}


@pytest.mark.parametrize("given,words", [
    (["--steps", "10"], "--noise-multiplier and --sampling-rate are left out"),
    (["--sampling-rate", "0.01", "--steps", "10", "--noise-multiplier", "1"],
     "all three are given"),
])
def test_calibrate_names_what_to_give(capsys, built, given, words):
    line = cli_error(capsys, "calibrate", *given, "--delta", "1e-5", "--epsilon", "3")
    assert words in line and "--solve-for" in line
    assert not built


def test_compare_spec_runs_every_accountant_on_the_file(tmp_path, capsys):
    path = tmp_path / "run.json"
    mechs = [(td.PoissonSubsampled(td.Gaussian(1.0), 0.02), 200), (td.Laplace(20.0), 3)]
    acc = td.PLDAccountant()
    for m, k in mechs:
        acc.compose(m, k)
    td.save(acc, path)
    out = cli_json(capsys, "compare", "--spec", str(path), "--delta", "1e-5", "--n", "200000")
    rows = {r["accountant"]: r for r in out["results"]}
    assert out["steps"] == 203 and out["spec"] == str(path)
    for name in ("pld", "rdp"):  # each as the API answers the same composition
        ref = td.accountants.registry.make_accountant(name)
        for m, k in mechs:
            ref.compose(m, k)
        assert rows[name]["epsilon"] == pytest.approx(float(ref.epsilon(1e-5).epsilon),
                                                      rel=1e-12)
    assert rows["gdp"]["status"].startswith("refused")  # no mu-GDP form of Laplace
    line = cli_error(capsys, "compare", "--spec", str(path), "--steps", "10", "--delta", "1e-5")
    assert "leave out --steps" in line


def test_group_table_says_the_linear_column_is_no_bound(capsys):
    assert cli.main(["group", "--group-size", "2", *CHEAP, "--delta", "1e-5"]) == 0
    head = capsys.readouterr().out.splitlines()[1]
    assert "k*eps_1 (heuristic, not a bound)" in head


# --- spec files written by `tightdp spec`, read back by every --spec subcommand ---------------

@pytest.mark.parametrize("setting", [
    ["--sampling-rate", "0.02", "--noise-multiplier", "1.0", "--steps", "200"],
    ["--sampling", "fixed_batch", "--batch-size", "20", "--dataset-size", "1000",
     "--noise-multiplier", "1.0", "--epochs", "2"],
    ["--sampling", "without-replacement", "--sampling-rate", "0.02", "--noise-multiplier",
     "1.0", "--steps", "100"],
])
def test_spec_written_then_read_back_gives_the_same_answer(tmp_path, capsys, setting):
    assert cli.main(["spec", *setting]) == 0
    text = capsys.readouterr().out
    path = tmp_path / "run.json"
    path.write_text(text)
    # the file is the accountant the front door composes, written as tightdp.save writes it
    kwargs = {"noise_multiplier": 1.0, **{
        setting[i].lstrip("-").replace("-", "_"): setting[i + 1]
        for i in range(0, len(setting), 2) if setting[i] != "--noise-multiplier"}}
    for key, kind in (("sampling_rate", float), ("steps", int), ("batch_size", int),
                      ("dataset_size", int), ("epochs", float)):
        if key in kwargs:
            kwargs[key] = kind(kwargs[key])
    assert text == td.state.dumps(td.dpsgd_accountant(**kwargs))
    for query, x in (("epsilon", ["--delta", "1e-5"]), ("delta", ["--epsilon", "1.0"])):
        direct = cli_json(capsys, query, *setting, *x)
        back = cli_json(capsys, query, "--spec", str(path), *x)
        for key in (query, "lower", "upper", "steps", "certified"):
            assert back[key] == direct[key], (query, key)
    compared = cli_json(capsys, "compare", "--spec", str(path), "--delta", "1e-5", "--n",
                        "200000")
    assert compared["epsilon"] == cli_json(capsys, "epsilon", *setting, "--delta",
                                           "1e-5")["epsilon"]


def test_spec_read_back_by_calibrate(tmp_path, capsys):
    # the noise factor of the file, times its sigma, is the noise calibrate finds directly
    path = tmp_path / "run.json"
    assert cli.main(["spec", "--sampling-rate", "0.02", "--noise-multiplier", "1.0",
                     "--steps", "200", "--output", str(path)]) == 0
    target = ["--delta", "1e-5", "--epsilon", "2"]
    scaled = cli_json(capsys, "calibrate", "--spec", str(path), *target)
    direct = cli_json(capsys, "calibrate", "--sampling-rate", "0.02", "--steps", "200",
                      *target)
    assert scaled["scale"] * 1.0 == pytest.approx(direct["noise_multiplier"], rel=2e-3)
    line = cli_error(capsys, "spec", *CHEAP, "--output", str(tmp_path / "no" / "run.json"))
    assert line.endswith(f"cannot write {tmp_path / 'no' / 'run.json'}: No such file or "
                         "directory")


def test_risk_json_matches_api():
    p = run("risk", *BASE, "--fpr", "0.01", "0.001", "--prior", "0.5", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    r = td.dpsgd_risk(sampling_rate=0.02, noise_multiplier=1.0, steps=200, fpr=[0.01, 0.001])
    assert out["tpr_upper"] == pytest.approx(r.tpr_upper.tolist(), rel=1e-12)
    assert out["tpr_lower"] == pytest.approx(r.tpr_lower.tolist(), rel=1e-12)
    assert out["advantage_upper"] == pytest.approx(r.advantage_upper, rel=1e-12)
    lo, hi = r.posterior(0.5)
    assert out["posterior_lower"][0] <= out["posterior_upper"][0]
    assert out["posterior_upper"] == pytest.approx(hi.tolist(), rel=1e-12)
    p = run("risk", *BASE, "--fpr", "0.01", "--advantage")
    assert p.returncode == 0 and "advantage in [" in p.stdout


@pytest.mark.parametrize("args,option", [
    (["risk", *BASE, "--fpr", "1.5"], "--fpr"),
    (["risk", *BASE, "--prior", "1"], "--prior"),
    (["calibrate", "--sampling-rate", "0.01", "--steps", "100", "--tpr", "0.005", "--fpr",
      "0.01"], "--tpr"),
    (["calibrate", "--sampling-rate", "0.01", "--steps", "100", "--tpr", "0.1", "--fpr",
      "0.01", "--epsilon", "1"], "--epsilon"),
])
def test_risk_bad_options_exit_2_one_line(args, option):
    p = run(*args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and option in p.stderr, p.stderr


def test_calibrate_tpr_fpr():
    p = run("calibrate", "--sampling-rate", "0.02", "--steps", "200", "--tpr", "0.1", "--fpr",
            "0.01", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    r = td.dpsgd_risk(sampling_rate=0.02, noise_multiplier=out["noise_multiplier"], steps=200,
                      fpr=0.01)
    assert r.tpr_upper[0] <= 0.1 and out["certified"] is True


def test_calibrate_steps_and_rate_to_risk_target(capsys):
    """--solve-for steps / sampling-rate with --tpr/--fpr or --advantage: the library's
    answer, re-checked with the certified curve, and the text output names the target."""
    out = cli_json(capsys, "calibrate", "--solve-for", "steps", "--noise-multiplier", "1",
                   "--sampling-rate", "0.05", "--tpr", "0.2", "--fpr", "0.05")
    ref = td.calibrate_steps(noise_multiplier=1.0, sampling_rate=0.05, tpr=0.2, fpr=0.05)
    assert out["steps"] == ref.steps == 152 and out["certified"] is True
    assert out["upper"] == ref.details["tpr_upper"] <= 0.2
    # the unknown inferred: --steps left out
    out = cli_json(capsys, "calibrate", "--noise-multiplier", "1", "--steps", "200",
                   "--advantage", "0.3")
    r = td.dpsgd_risk(noise_multiplier=1.0, steps=200, sampling_rate=out["sampling_rate"])
    assert r.advantage_upper <= 0.3 and out["upper"] == pytest.approx(r.advantage_upper,
                                                                       rel=1e-9)
    assert cli.main(["calibrate", "--solve-for", "steps", "--noise-multiplier", "1",
                     "--sampling-rate", "0.05", "--tpr", "0.2", "--fpr", "0.05"]) == 0
    assert "steps: 152  (TPR <= 0.2 at FPR 0.05, certified)" in capsys.readouterr().out


@pytest.mark.parametrize("args,option", [
    (["--solve-for", "steps", "--noise-multiplier", "1", "--sampling-rate", "0.05", "--tpr",
      "0.01", "--fpr", "0.05"], "--tpr"),
    (["--solve-for", "sampling-rate", "--noise-multiplier", "1", "--steps", "10",
      "--advantage", "0.2", "--delta", "1e-5"], "--delta"),
    (["--solve-for", "steps", "--noise-multiplier", "1", "--sampling-rate", "0.05",
      "--advantage", "0.2", "--accountant", "rdp"], "--accountant"),
    (["--sampling-rate", "0.05", "--steps", "10", "--advantage", "0.2", "--rtol", "0.01"],
     "--rtol"),
    (["--solve-for", "steps", "--sampling-rate", "0.05", "--advantage", "0.2"],
     "--noise-multiplier"),
])
def test_calibrate_risk_solve_for_bad_options(capsys, args, option):
    assert option in cli_error(capsys, "calibrate", *args)


def test_neighboring_option_is_the_front_doors(capsys, tmp_path):
    """--neighboring reaches each front door: the numbers are the library's under that
    relation (replace-one Poisson is above add/remove: the pair of sensitivity 2 c at rate q),
    --json names the relation, aliases are the library's, shuffle says its default."""
    args = ["--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps", "20"]
    out = cli_json(capsys, "epsilon", *args, "--delta", "1e-5", "--neighboring", "replace_one")
    lib = td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=20, delta=1e-5,
                           neighboring="replace_one")
    plain = td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=20, delta=1e-5)
    assert out["epsilon"] == lib.epsilon > plain.epsilon and out["neighboring"] == "replace_one"
    out = cli_json(capsys, "delta", *args, "--epsilon", "1", "--neighboring", "replace")
    assert out["delta"] == td.dpsgd_delta(sampling_rate=0.01, noise_multiplier=1.0, steps=20,
                                          epsilon=1.0, neighboring="replace_one").delta
    out = cli_json(capsys, "compare", *args, "--delta", "1e-5", "--neighboring", "replace_one")
    assert out["neighboring"] == "replace_one" and out["epsilon"] == lib.epsilon
    cal = cli_json(capsys, "calibrate", "--sampling-rate", "0.01", "--steps", "20", "--delta",
                   "1e-5", "--epsilon", "1", "--neighboring", "replace_one")
    ref = td.calibrate_noise(sampling_rate=0.01, steps=20, delta=1e-5, epsilon=1.0,
                             neighboring="replace_one")
    assert cal["noise_multiplier"] == ref.noise_multiplier and cal["neighboring"] == "replace_one"
    shuffle = ["--sampling", "shuffle", "--steps-per-epoch", "5", "--noise-multiplier", "2",
               "--epochs", "1", "--delta", "1e-5"]
    assert cli_json(capsys, "epsilon", *shuffle)["neighboring"] == "replace_special"
    assert cli.main(["epsilon", *shuffle]) == 0
    assert "neighboring replace_special" in capsys.readouterr().out
    err = cli_error(capsys, "epsilon", *args, "--delta", "1e-5", "--neighboring",
                    "replace_special")
    assert "--neighboring" in err and "'add_or_remove_one' or 'replace_one'" in err
    err = cli_error(capsys, "epsilon", *args, "--delta", "1e-5", "--neighboring", "nope")
    assert "--neighboring must be one of" in err
    err = cli_error(capsys, "group", "--group-size", "2", *args, "--delta", "1e-5",
                    "--neighboring", "replace_one")
    assert "--neighboring" in err
    plot = pytest.importorskip("matplotlib") and tmp_path / "c.png"
    out = cli_json(capsys, "plot", *args, "--neighboring", "replace_one", "--output",
                   str(plot))
    assert out["neighboring"] == "replace_one" and out["epsilon"] == pytest.approx(
        lib.epsilon, rel=1e-12)
