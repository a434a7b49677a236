"""State and composition files (issue 16, part 3): ``tightdp.save``/``tightdp.load``,
``to_dict``/``from_dict``, and ``tightdp epsilon|delta|calibrate --spec FILE``.

A saved accountant answers bit for bit as the original (a hypothesis round trip over random
compositions of every mechanism and every accountant); every malformed file gives one line
naming the field (Python ValueError, CLI exit status 2); ``--spec`` answers as the Python API.
"""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

import tightdp as td
from conftest import same as _same
from tightdp import cli, state
from tightdp.accountants.fft import FFTAccountant

# --- random compositions ----------------------------------------------------------------------
_f = st.floats


def _gaussian():
    return st.builds(td.Gaussian, _f(0.6, 4.0), _f(0.5, 2.0))


def _laplace():
    return st.builds(td.Laplace, _f(0.6, 4.0), _f(0.5, 2.0))


def _mixture():
    def make(data):
        k, sigma = data
        sens = st.one_of(st.just(0.0), _f(0.05, 2.0))
        return st.tuples(st.lists(sens, min_size=k, max_size=k),
                         st.lists(_f(0.05, 1.0), min_size=k, max_size=k)).map(
            lambda cp: td.MixtureOfGaussians(cp[0], np.array(cp[1]) / sum(cp[1]), sigma))
    return st.tuples(st.integers(1, 3), _f(0.8, 3.0)).flatmap(make)


MECHANISM = st.one_of(
    _gaussian(), _laplace(),
    st.builds(td.RandomizedResponse, _f(0.05, 1.0), st.integers(2, 5)),
    st.builds(td.DiscreteLaplace, _f(0.05, 3.0), st.integers(1, 4)),
    st.builds(td.PureDP, _f(0.0, 2.0)),
    st.builds(td.ApproxDP, _f(0.0, 2.0), _f(0.0, 1e-3)),
    st.builds(td.PoissonSubsampled, st.one_of(_gaussian(), _laplace()), _f(1e-3, 1.0)),
    st.builds(td.SampledWithoutReplacement, st.one_of(_gaussian(), _laplace()), _f(1e-3, 0.5),
              st.sampled_from(["worst_case", "koskela2020"])),
    st.tuples(_gaussian(), st.integers(1, 4), st.integers(4, 200),
              st.sampled_from(["worst_case", "koskela2020"])).map(
        lambda t: td.SampledWithReplacement(t[0], t[1], t[2], t[3])),
    _mixture(),
)

#: every accountant, with settings other than the defaults where it has any
ACCOUNTANTS = {
    "pld": lambda: td.PLDAccountant(rtol=1e-2),
    # the replace-one mechanisms (sampling without / with replacement, randomized response)
    "pld-replace-one": lambda: td.PLDAccountant(rtol=1e-2, neighboring="replace_one"),
    "prv": lambda: td.PRVAccountant(eps_error=0.05, delta_error=1e-8, max_seconds=30.0),
    "fft": lambda: FFTAccountant(12.0, 20_000, error_estimate=False, method="mass"),
    "fft-auto-L": lambda: FFTAccountant(None, 20_000),
    "rdp": lambda: td.RDPAccountant(extra_orders=[1.7, 33.5]),
    "gdp": lambda: td.GDPAccountant(max_memory="500MB"),
    "spa": lambda: td.SaddlePointAccountant("msd0", bounds=True),
}


def _answers(acc) -> list:
    """eps(1e-3) and delta at two eps: each a result, or the refusal's message."""
    out = []
    for q in (lambda: acc.epsilon(1e-3), lambda: acc.delta(np.array([0.5, 2.0]))):
        try:
            out.append(q())
        except ValueError as err:
            out.append(str(err))
    return out


def _assert_same_answers(a1: list, a2: list) -> None:
    for r1, r2 in zip(a1, a2, strict=True):
        if isinstance(r1, str):
            assert r1 == r2
            continue
        assert type(r1) is type(r2)
        for f in ("epsilon", "delta", "lower", "upper", "estimate", "certified", "note"):
            assert _same(getattr(r1, f), getattr(r2, f)), f


def _assert_same_state(a, b) -> None:
    """The whole state of two accountants equal (a setting that to_dict forgot fails here)."""
    assert type(a) is type(b)
    va, vb = dict(vars(a)), dict(vars(b))
    va.pop("_cache"), vb.pop("_cache")
    assert va.keys() == vb.keys()
    for k in va:
        if isinstance(va[k], np.ndarray):
            assert np.array_equal(va[k], vb[k]), k
        else:
            assert va[k] == vb[k], k
    assert [k for _, k in a.terms] == [k for _, k in b.terms]
    for (m1, _), (m2, _) in zip(a.terms, b.terms, strict=True):
        assert repr(m1) == repr(m2) and m1 == m2


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
@settings(derandomize=True, max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mechs=st.lists(st.tuples(MECHANISM, st.integers(1, 4)), min_size=1, max_size=3))
def test_round_trip_same_bracket_bit_for_bit(tmp_path, name, mechs):
    acc = ACCOUNTANTS[name]()
    for m, k in mechs:
        try:
            acc.compose(m, k)
        except ValueError:  # this accountant does not support the mechanism
            continue
    path = tmp_path / "state.json"
    td.save(acc, path)
    loaded = td.load(path)
    _assert_same_state(acc, loaded)
    # the document is strict JSON and a second round trip writes the same text
    text = path.read_text()
    assert state.dumps(loaded) == text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    _assert_same_answers(_answers(acc), _answers(loaded))
    # and a fresh load answers the same after the original was queried (caches are not state)
    _assert_same_answers(_answers(acc), _answers(state.loads(text)))


def test_mixture_probabilities_kept_bit_for_bit():
    # normalized probabilities whose renormalization moves the last bits: the file keeps them
    m = td.MixtureOfGaussians(0.3 * np.arange(7), np.full(7, 1 / 7), 1.5)
    p = m.probabilities
    assert not np.array_equal(p, p / p.sum())  # the case this test is about
    acc = td.PLDAccountant(rtol=1e-2).compose(m, 3)
    back = state.loads(state.dumps(acc))
    _assert_same_state(acc, back)
    assert np.array_equal(back.terms[0][0].probabilities, p)
    _assert_same_answers(_answers(acc), _answers(back))
    # probabilities off by more than rounding are normalized by the constructor, as given
    d = state.to_dict(acc)
    d["composition"][0]["params"]["probabilities"] = [0.142857142857] * 7
    q = state.from_dict(d).terms[0][0].probabilities
    assert q.sum() == pytest.approx(1.0, abs=1e-15) and q[0] != 0.142857142857


def test_document_layout_and_run_length_counts():
    acc = td.PLDAccountant(rtol=2e-3, max_seconds=30)
    mech = td.PoissonSubsampled(td.Gaussian(1.1), 0.01)
    for _ in range(5):
        acc.compose(mech, 2000)
    acc.compose(td.Laplace(3.0), 7)
    d = state.to_dict(acc)
    assert d["format"] == "tightdp-composition" and d["schema_version"] == 1
    assert d["tightdp_version"] == td.__version__
    assert d["accountant"] == {"name": "pld", "options": {
        "rtol": 2e-3, "max_points": acc.max_points, "neighboring": "add_or_remove_one",
        "max_memory": 2 * 10**9, "max_seconds": 30.0}}
    assert d["composition"] == [
        {"mechanism": "PoissonSubsampled", "params": {
            "base": {"mechanism": "Gaussian", "params": {"sigma": 1.1, "sensitivity": 1.0}},
            "q": 0.01}, "count": 10000},
        {"mechanism": "Laplace", "params": {"scale": 3.0, "sensitivity": 1.0}, "count": 7}]
    back = state.from_dict(d, kind=td.PLDAccountant)
    assert back.terms == acc.terms and back.total_count == 10007
    with pytest.raises(ValueError, match="holds a 'pld' accountant, not a RDPAccountant"):
        state.from_dict(d, kind=td.RDPAccountant)


def test_save_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "run.json"
    acc = td.RDPAccountant().compose(td.Gaussian(2.0), 3)
    td.save(acc, path)
    acc.compose(td.Gaussian(2.0), 4)
    td.save(acc, str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    assert td.load(path).total_count == 7


def test_what_cannot_be_written_is_refused():
    from tightdp.individual import IndividualPLDAccountant

    with pytest.raises(ValueError, match="cannot write IndividualPLDAccountant"):
        state.to_dict(IndividualPLDAccountant(sampling_rate=0.05, noise_multiplier=1.0,
                                              clip_norm=1.0, n_examples=3, n_buckets=10))

    class MyGaussian(td.Gaussian):  # a user's subclass may carry state the file cannot hold
        pass

    with pytest.raises(ValueError, match="cannot write MyGaussian"):
        state.to_dict(td.PLDAccountant().compose(MyGaussian(1.0), 2))


# --- malformed files ----------------------------------------------------------------------------
def _valid() -> dict:
    acc = td.PLDAccountant(rtol=1e-2)
    acc.compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.05), 20)
    acc.compose(td.MixtureOfGaussians([0.5, 1.0], [0.25, 0.75], 2.0), 3)
    acc.compose(td.Laplace(2.0), 2)
    return state.to_dict(acc)


def _swr_entry(**params) -> dict:
    """A SampledWithReplacement entry (replace-one: its fields are checked before the
    composition is composed, so a bad one is named whatever the accountant's relation)."""
    return {"mechanism": "SampledWithReplacement", "count": 2, "params": {
        "base": {"mechanism": "Gaussian", "params": {"sigma": 2.0, "sensitivity": 1.0}},
        "batch_size": 2, "dataset_size": 50, "pair": "worst_case", **params}}


def _set(path: str, value):
    """A mutation of the document: set (or with value ``...``, delete) the field at path."""
    def mutate(d):
        keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
        obj = d
        for k in keys[:-1]:
            obj = obj[k]
        if value is ...:
            del obj[keys[-1]]
        elif isinstance(obj, list) and keys[-1] == len(obj):
            obj.append(value)
        else:
            obj[keys[-1]] = value
        return d
    return mutate


def _text(transform):
    """A file's text from a transform of the valid document's text."""
    return lambda d: ("TEXT", transform(json.dumps(d, indent=1)))


SIG = "composition[0].params.base.params.sigma"
BAD = {
    # case: (mutation, the field named, the accepted range / what is said)
    "negative sigma": (_set(SIG, -1.0), SIG, "must be in (0, inf), got -1.0"),
    "zero sigma": (_set(SIG, 0), SIG, "must be in (0, inf)"),
    "sigma a string": (_set(SIG, "1.0"), SIG, "must be a real number, got '1.0'"),
    "sigma a boolean": (_set(SIG, True), SIG, "must be a real number"),
    "sigma missing": (_set(SIG, ...), SIG, "is missing (required"),
    "discrete Laplace sensitivity 0": (
        _set("composition[3]", {"mechanism": "DiscreteLaplace", "params": {
            "noise_parameter": 0.5, "sensitivity": 0}, "count": 1}),
        "composition[3].params.sensitivity", "must be an integer >= 1, got 0"),
    "q = 2": (_set("composition[0].params.q", 2), "composition[0].params.q",
              "must be in (0, 1], got 2"),
    "q = 0": (_set("composition[0].params.q", 0.0), "composition[0].params.q",
              "must be in (0, 1]"),
    "unknown mechanism": (_set("composition[1].mechanism", "Foo"), "composition[1].mechanism",
                          "must be one of 'Gaussian', 'Laplace'"),
    "unknown base": (_set("composition[0].params.base.mechanism", "PureDP"),
                     "composition[0].params.base.mechanism",
                     "must be 'Gaussian' or 'Laplace' for PoissonSubsampled"),
    "unknown parameter": (_set("composition[0].params.sigam", 1.0),
                          "composition[0].params.sigam", "is not a field"),
    "negative count": (_set("composition[1].count", -3), "composition[1].count",
                       "must be an integer >= 0, got -3"),
    "fractional count": (_set("composition[1].count", 2.5), "composition[1].count",
                         "must be an integer >= 0"),
    "count a string": (_set("composition[1].count", "10"), "composition[1].count",
                       "must be an integer >= 0"),
    "count missing": (_set("composition[2].count", ...), "composition[2].count",
                      "is missing"),
    "probabilities do not sum to 1": (
        _set("composition[1].params.probabilities", [0.25, 0.7]),
        "composition[1].params.probabilities", "must sum to 1"),
    "negative sensitivity": (_set("composition[1].params.sensitivities", [0.5, -1.0]),
                             "composition[1].params.sensitivities[1]", "must be in [0, inf)"),
    "mixture lengths": (_set("composition[1].params.sensitivities", [0.5]),
                        "composition[1].params.probabilities", "one entry per sensitivity"),
    "batch above dataset": (_set("composition[2]", _swr_entry(batch_size=51)),
                            "composition[2].params.batch_size", "must be <= dataset_size (50)"),
    "bad pair": (_set("composition[2]", _swr_entry(pair="worst")), "composition[2].params.pair",
                 "must be one of 'worst_case', 'koskela2020'"),
    "unknown relation": (_set("accountant.options.neighboring", "add_one"),
                         "accountant.options.neighboring",
                         "must be one of add_or_remove_one, replace_one, replace_special"),
    "relation of another composition": (
        _set("accountant.options.neighboring", "replace_one"), "composition[1]",
        "MixtureOfGaussians is defined under neighboring=add_or_remove_one or replace_special, "
        "not under this pld accountant's neighboring=replace_one"),
    "schema version 2": (_set("schema_version", 2), "schema_version", "must be 1"),
    "schema version a string": (_set("schema_version", "1"), "schema_version", "must be 1"),
    "wrong format": (_set("format", "opacus"), "format", "must be 'tightdp-composition'"),
    "version missing": (_set("tightdp_version", ...), "tightdp_version", "is missing"),
    "composition not a list": (_set("composition", {}), "composition", "must be a list"),
    "entry not an object": (_set("composition[0]", 3), "composition[0]",
                            "must be a JSON object"),
    "unknown accountant": (_set("accountant.name", "moments"), "accountant.name",
                           "must be one of 'pld', 'prv'"),
    "negative rtol": (_set("accountant.options.rtol", -0.1), "accountant.options.rtol",
                      "must be in (0, inf)"),
    "rtol missing": (_set("accountant.options.rtol", ...), "accountant.options.rtol",
                     "is missing"),
    "tiny max_memory": (_set("accountant.options.max_memory", 10), "accountant.options."
                        "max_memory", "must be at least 1MB"),
    "max_seconds a string": (_set("accountant.options.max_seconds", "60"),
                             "accountant.options.max_seconds", "must be a number"),
    "option of another accountant": (_set("accountant.options.eps_error", 0.1),
                                     "accountant.options.eps_error", "is not a field"),
    "truncated JSON": (_text(lambda t: t[: len(t) // 2]), "", "not valid JSON (truncated"),
    "empty file": (_text(lambda t: ""), "", "not valid JSON"),
    "NaN": (_text(lambda t: t.replace('"sigma": 1.0', '"sigma": NaN', 1)), "",
            "NaN is not a JSON number"),
    "repeated field": (_text(lambda t: t.replace('"q": 0.05', '"q": 0.05, "q": 0.5', 1)), "",
                       "field 'q' appears twice"),
    "not an object": (_text(lambda t: "[1, 2]"), "the document", "must be a JSON object"),
    "not UTF-8": (lambda d: ("BYTES", b"\xff\xfe{"), "", "not UTF-8"),
    "a huge string": (_set(SIG, "x" * 100_000), SIG, "must be a real number"),
}


def _write(tmp_path, case: str):
    mutate = BAD[case][0]
    out = mutate(_valid())
    path = tmp_path / "bad.json"
    if isinstance(out, tuple) and out[0] == "TEXT":
        path.write_text(out[1])
    elif isinstance(out, tuple) and out[0] == "BYTES":
        path.write_bytes(out[1])
    else:
        path.write_text(json.dumps(out))
    return path


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_file_one_line_naming_the_field(tmp_path, capsys, case):
    _, field, said = BAD[case]
    path = _write(tmp_path, case)
    with pytest.raises(ValueError) as e:
        td.load(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and len(msg) < 500 + len(str(path))
    assert f"{path}: {field}" in msg and said in msg, msg
    # the command line: exit status 2, one line on stderr naming the file and the field
    with pytest.raises(SystemExit) as ex:
        cli.main(["epsilon", "--spec", str(path), "--delta", "1e-5"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tightdp: error: --spec {path}: {field}")
    assert said in err


def test_valid_document_passes_and_missing_fields_are_never_filled_in():
    assert state.from_dict(_valid()).total_count == 25
    # every single field of the document, removed, is an error naming it
    doc = _valid()

    def paths(obj, prefix=""):
        if isinstance(obj, dict):
            for k, x in obj.items():
                p = f"{prefix}.{k}" if prefix else k
                yield p
                yield from paths(x, p)
        elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
            for i, x in enumerate(obj):
                yield from paths(x, f"{prefix}[{i}]")

    n = 0
    for p in paths(doc):
        if p == "accountant.options.neighboring":  # absent in older files: see the legacy test
            continue
        d = _set(p, ...)(copy.deepcopy(doc))
        with pytest.raises(ValueError, match=re.escape(f"{p} is missing")):
            state.from_dict(d)
        n += 1
    assert n > 30


def test_unsupported_mechanism_for_the_accountant_names_the_entry():
    d = _valid()
    d["accountant"] = {"name": "rdp", "options": {"orders": [2.0, 4.0], "max_memory": 10**9,
                                                  "max_seconds": 10.0}}
    with pytest.raises(ValueError, match=r"^composition\[1\]: RDPAccountant"):
        state.from_dict(d)
    d["accountant"] = {"name": "fft", "options": {
        "L": 12.0, "n": 20_001, "error_estimate": True, "method": "auto",
        "allow_truncation": False, "max_memory": 10**9, "max_seconds": 10.0}}
    with pytest.raises(ValueError, match=r"^accountant\.options\.n must be an even integer"):
        state.from_dict(d)
    d["accountant"]["options"].update(n=20_000, method="fast")
    with pytest.raises(ValueError, match=r"^accountant\.options\.method must be one of"):
        state.from_dict(d)


def test_relation_round_trip_and_files_written_before_it():
    swor = td.SampledWithoutReplacement(td.Gaussian(1.0), 0.01)
    acc = td.PLDAccountant(rtol=1e-2, neighboring="substitute").compose(swor, 100)
    d = state.to_dict(acc)
    assert d["accountant"]["options"]["neighboring"] == "replace_one"  # the canonical name
    back = state.from_dict(d)
    assert back.neighboring == "replace_one" and back.epsilon(1e-5).upper == acc.epsilon(
        1e-5).upper
    # a file without the field (written before it existed): replace-one mechanisms -> replace_one
    del d["accountant"]["options"]["neighboring"]
    old = state.from_dict(d)
    assert old.neighboring == "replace_one"
    _assert_same_state(acc, old)
    # ... and otherwise add/remove, the default it was accounted under
    old = state.from_dict(_set("accountant.options.neighboring", ...)(_valid()))
    assert old.neighboring == "add_or_remove_one" and old.total_count == 25
    # a file mixing both kinds defines no relation: refused, naming the entry and both
    d["composition"].append(state.to_dict(td.PLDAccountant().compose(
        td.MixtureOfGaussians([0.0, 1.0], [0.9, 0.1], 1.0), 100))["composition"][0])
    with pytest.raises(ValueError, match=r"^composition\[1\]: MixtureOfGaussians is defined "
                                         r"under .* not under this pld accountant's "
                                         r"neighboring=replace_one"):
        state.from_dict(d)


# --- the command line ---------------------------------------------------------------------------
def _spec(tmp_path, acc) -> str:
    path = tmp_path / "spec.json"
    td.save(acc, path)
    return str(path)


def _mixed(acc):
    acc.compose(td.SampledWithoutReplacement(td.Gaussian(1.0), 0.02), 200)
    acc.compose(td.Laplace(10.0), 3)
    acc.compose(td.RandomizedResponse(0.95, 3), 2)
    acc.compose(td.SampledWithoutReplacement(td.Gaussian(3.0), 0.1), 5)
    return acc


def _cli_json(capsys, *args) -> dict:
    assert cli.main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_spec_epsilon_and_delta_match_python(tmp_path, capsys):
    path = _spec(tmp_path, _mixed(td.PLDAccountant(rtol=5e-3, neighboring="replace_one")))
    out = _cli_json(capsys, "epsilon", "--spec", path, "--delta", "1e-6")
    r = td.load(path).epsilon(1e-6)
    assert (out["epsilon"], out["lower"], out["upper"]) == (r.epsilon, r.lower, r.upper)
    assert out["accountant"] == "pld" and out["certified"] is True
    assert out["steps"] == 210 and out["spec"] == path and out["sampling_rate"] is None
    out = _cli_json(capsys, "delta", "--spec", path, "--epsilon", "1.5")
    r = td.load(path).delta(1.5)
    assert (out["delta"], out["lower"], out["upper"]) == (r.delta, r.lower, r.upper)
    # an option given on the command line replaces the file's
    out = _cli_json(capsys, "epsilon", "--spec", path, "--delta", "1e-6", "--rtol", "1e-3")
    r = _mixed(td.PLDAccountant(rtol=1e-3, neighboring="replace_one")).epsilon(1e-6)
    assert (out["lower"], out["upper"]) == (r.lower, r.upper)
    # --accountant: that accountant (its options from the command line), the file's composition
    out = _cli_json(capsys, "epsilon", "--spec", path, "--delta", "1e-6", "--accountant", "rdp")
    r = _mixed(td.RDPAccountant(neighboring="replace_one")).epsilon(1e-6)
    assert out["accountant"] == "rdp" and out["upper"] == r.upper and out["lower"] is None
    # the file's relation goes along to the accountant of --accountant, and is shown
    assert out["details"]["neighboring"] == "replace_one"


def test_spec_with_the_dp_sgd_options_is_an_error_naming_them(tmp_path, capsys):
    path = _spec(tmp_path, _mixed(td.PLDAccountant(neighboring="replace_one")))
    for extra, named in ((["--sampling-rate", "0.1"], "--sampling-rate"),
                         (["--noise-multiplier", "1"], "--noise-multiplier"),
                         (["--steps", "10"], "--steps"), (["--epochs", "2"], "--epochs"),
                         (["--batch-size", "10", "--dataset-size", "100"],
                          "--batch-size, --dataset-size"),
                         (["--sampling", "poisson"], "--sampling")):
        with pytest.raises(SystemExit) as e:
            cli.main(["epsilon", "--spec", path, "--delta", "1e-5", *extra])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err == f"tightdp: error: --spec gives the whole composition; leave out {named}\n"
    with pytest.raises(SystemExit):
        cli.main(["epsilon", "--spec", path, "--delta", "1e-5", "--eps-error", "0.1"])
    assert "--eps-error applies only to the prv accountant" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--spec", path, "--delta", "1e-5", "--epsilon", "2",
                  "--solve-for", "steps"])
    assert "leave out --solve-for" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["epsilon", "--spec", str(tmp_path / "none.json"), "--delta", "1e-5"])
    assert "cannot read the file" in capsys.readouterr().err
    # without --spec the DP-SGD options are still required
    with pytest.raises(SystemExit):
        cli.main(["epsilon", "--sampling-rate", "0.1", "--steps", "3", "--delta", "1e-5"])
    assert "required: --noise-multiplier" in capsys.readouterr().err


def _gdp_eps(mu: float, delta: float) -> float:
    """eps(delta) of mu-GDP (Dong, Roth, Su 2022, Cor. 2.13), solved with scipy."""
    def f(e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(f, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


def test_calibrate_spec_scales_every_noise_to_the_target(tmp_path, capsys):
    # Gaussians only: mu-GDP with mu = sqrt(sum k / sigma^2) / scale exactly, so the smallest
    # scale meeting eps at delta is mu0 / mu*, mu* solved from the closed form with scipy
    acc = td.PLDAccountant(rtol=1e-3)
    acc.compose(td.Gaussian(2.0), 3).compose(td.Gaussian(4.0, 2.0), 2).compose(
        td.Gaussian(3.0), 1)
    path = _spec(tmp_path, acc)
    target, delta = 2.0, 1e-5
    mu_star = brentq(lambda m: _gdp_eps(m, delta) - target, 0.05, 10.0, xtol=1e-14)
    mu0 = math.sqrt(3 / 4 + 2 * (2.0 / 4.0) ** 2 + 1 / 9)
    s_star = mu0 / mu_star
    out = _cli_json(capsys, "calibrate", "--spec", path, "--delta", str(delta), "--epsilon",
                    str(target))
    s = out["scale"]
    assert s >= s_star * (1 - 1e-12)  # a certified bound meeting the target: never below
    assert s <= s_star * (1 + 3e-3)   # bisection to 2.5e-4 and a bracket of 1e-3
    assert out["epsilon"] <= target and out["certified"] is True and out["steps"] == 6
    assert out["state"]["accountant"] == state.to_dict(acc)["accountant"]
    calibrated = state.from_dict(out["state"])
    assert [m.sigma for m, _ in calibrated.terms] == [2.0 * s, 4.0 * s, 3.0 * s]
    assert calibrated.epsilon(delta).upper == out["epsilon"]
    # the same through Python
    r = state.calibrate_scale(td.load(path), epsilon=target, delta=delta)
    assert r.scale == s and r.epsilon == out["epsilon"]


def test_calibrate_spec_mixed_and_refusals(tmp_path, capsys):
    acc = td.PLDAccountant(rtol=1e-2)
    acc.compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.05), 50).compose(td.PureDP(0.2), 1)
    path = _spec(tmp_path, acc)
    out = _cli_json(capsys, "calibrate", "--spec", path, "--delta", "1e-5", "--epsilon", "1.5")
    s = out["scale"]
    assert out["epsilon"] <= 1.5
    # minimal to the search's precision: 0.1% less noise no longer meets the target
    smaller = td.PLDAccountant(rtol=1e-2).compose(
        td.PoissonSubsampled(td.Gaussian(s * 0.999), 0.05), 50).compose(td.PureDP(0.2), 1)
    assert smaller.epsilon(1e-5).upper > 1.5
    # the pure-DP part alone exceeds the target: no noise scale helps
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--spec", path, "--delta", "1e-5", "--epsilon", "0.1"])
    assert "no common noise scale factor up to" in capsys.readouterr().err
    # an accountant that does not certify
    path2 = _spec(tmp_path, td.GDPAccountant().compose(td.Gaussian(1.0), 2))
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--spec", path2, "--delta", "1e-5", "--epsilon", "1"])
    assert "does not certify an upper bound; give --accountant" in capsys.readouterr().err
    out = _cli_json(capsys, "calibrate", "--spec", path2, "--delta", "1e-5", "--epsilon", "1",
                    "--accountant", "rdp")
    assert out["accountant"] == "rdp" and out["epsilon"] <= 1.0
    path3 = _spec(tmp_path, td.PLDAccountant().compose(td.PureDP(0.2), 2))
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--spec", path3, "--delta", "1e-5", "--epsilon", "1"])
    assert "no mechanism with a noise scale" in capsys.readouterr().err


def test_readme_state_snippet_runs(tmp_path, monkeypatch):
    from conftest import ROOT

    text = (ROOT / "README.md").read_text()
    block = re.search(r"## State and composition files\n.*?```python\n(.*?)```", text, re.S)
    assert block, "README has no state-file snippet"
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})
    assert (tmp_path / "run.json").exists()


def test_several_missing_fields_named_in_one_error(tmp_path, capsys):
    # a hand-written file missing four fields at four places: one error names them all
    # (before: one per attempt, the next one showing only once the first was fixed)
    d = _valid()
    gone = ["accountant.options.max_points", SIG, "composition[2].params.sensitivity",
            "composition[1].count"]
    for p in gone:
        d = _set(p, ...)(d)
    with pytest.raises(ValueError) as e:
        state.from_dict(d)
    msg = str(e.value)
    assert msg.startswith(f"{gone[0]} is missing, and so are ") and "\n" not in msg
    assert all(p in msg for p in gone) and "required" in msg
    path = tmp_path / "run.json"
    path.write_text(json.dumps(d))
    with pytest.raises(SystemExit):
        cli.main(["epsilon", "--spec", str(path), "--delta", "1e-5"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(p in err for p in gone)


def test_failed_save_names_the_target_not_the_temporary_file(tmp_path):
    acc = td.RDPAccountant().compose(td.Gaussian(2.0), 3)
    for target in (tmp_path / "no-such-folder" / "run.json", tmp_path):  # a folder: replace
        with pytest.raises(OSError) as e:
            td.save(acc, target)
        assert e.value.filename == str(target) and ".tightdp-" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_json_error_says_where_once():
    # json's "Unterminated string starting at" is followed by the place, not by a second "at"
    with pytest.raises(ValueError) as e:
        state.loads('{"format": "tightdp-comp')
    assert str(e.value) == ("not valid JSON (truncated or corrupt?): Unterminated string "
                            "starting at line 1 column 12")
    with pytest.raises(ValueError, match="Expecting value at line 1 column 1$"):
        state.loads("")
