"""tightdp.results: one result type per question, one ``as_dict``, and ``epsilon(delta)`` of an
array of deltas on every accountant (the single queries, element by element)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from conftest import same
from tightdp import (
    CalibrationResult,
    DeltaResult,
    EpsilonResult,
    FFTAccountant,
    Gaussian,
    GDPAccountant,
    GDPFilter,
    GDPOdometer,
    GroupResult,
    IndividualGDPFilter,
    IndividualPLDAccountant,
    IndividualSPAAccountant,
    PLDAccountant,
    PoissonSubsampled,
    PRVAccountant,
    RDPAccountant,
    RDPFilter,
    Result,
    SaddlePointAccountant,
    ScaleCalibration,
    as_dict,
)

DELTAS = np.array([1e-7, 1e-5, 1e-3, 0.1])
FIELDS = ("epsilon", "delta", "lower", "upper", "estimate")


def _roundtrip(d: dict) -> dict:
    """``d`` through strict JSON and back (fails on NaN or inf left in ``d``)."""
    return json.loads(json.dumps(d, allow_nan=False))


# --- epsilon(array of deltas) ---------------------------------------------------------------
def _mech():
    return PoissonSubsampled(Gaussian(1.0), 0.05)


ACCOUNTANTS = {
    "pld": lambda: PLDAccountant().compose(_mech(), 20),
    "rdp": lambda: RDPAccountant().compose(_mech(), 20),
    "gdp": lambda: GDPAccountant().compose(_mech(), 20),
    "gdp-exact": lambda: GDPAccountant().compose(Gaussian(2.0), 5),
    "prv": lambda: PRVAccountant().compose(_mech(), 20),
    "fft": lambda: FFTAccountant().compose(_mech(), 20),
    "spa": lambda: SaddlePointAccountant().compose(_mech(), 20),
    "pld-empty": lambda: PLDAccountant(),
}


def _check_stacked(r: EpsilonResult, singles: list[EpsilonResult], shape: tuple) -> None:
    assert isinstance(r, EpsilonResult)
    for f in FIELDS:
        got = getattr(r, f)
        want = [getattr(s, f) for s in singles]
        if all(w is None for w in want):
            assert got is None, f
            continue
        got = np.asarray(got, dtype=float).reshape((len(singles), -1))
        for i, w in enumerate(want):
            assert same(got[i], np.asarray(np.nan if w is None else w, dtype=float)
                        .reshape(-1)), (f, i)
    assert np.asarray(r.epsilon).shape[:len(shape)] == shape
    assert r.certified == all(s.certified for s in singles)
    assert r.accountant == singles[0].accountant
    for s in singles:
        assert s.note in r.note
    for k in {k for s in singles for k in s.details}:
        assert len(r.details[k]) == len(singles)
        if "seconds" in k:  # timings: not reproducible
            continue
        for i, s in enumerate(singles):
            if k in s.details and not isinstance(s.details[k], dict | list | np.ndarray):
                assert r.details[k][i] == s.details[k] or same(r.details[k][i], s.details[k])


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
def test_epsilon_of_array_equals_single_queries(name):
    acc = ACCOUNTANTS[name]()
    singles = [acc.epsilon(float(d)) for d in DELTAS]
    for s, d in zip(singles, DELTAS, strict=True):
        assert isinstance(s, EpsilonResult) and s.delta == d
        assert np.ndim(s.epsilon) == 0
    r = acc.epsilon(DELTAS)
    _check_stacked(r, singles, DELTAS.shape)
    assert np.all(np.diff(r.epsilon) <= 0)  # eps decreases with delta
    # a list and a 2-d array: the shape of the query is kept
    r2 = ACCOUNTANTS[name]().epsilon(DELTAS.reshape(2, 2))
    assert r2.epsilon.shape == (2, 2)
    assert same(r2.epsilon.reshape(-1), r.epsilon)
    assert same(ACCOUNTANTS[name]().epsilon(list(DELTAS)).epsilon, r.epsilon)
    # the whole result is strict JSON
    assert _roundtrip(r.as_dict()) == r.as_dict()


@pytest.mark.parametrize("name", ["pld", "rdp", "gdp"])
def test_array_queries_validated_naming_the_parameter(name):
    acc = ACCOUNTANTS[name]()
    for bad in ([1e-5, 0.0], [1e-5, 1.0], [1e-5, math.nan], np.array([]), ["x"]):
        with pytest.raises(ValueError, match="delta"):
            acc.epsilon(bad)
    for bad in ([0.5, math.inf], [math.nan], np.array([]), ["x"]):
        with pytest.raises(ValueError, match="epsilon"):
            acc.delta(bad)
    # delta(array) stays one vectorized query; float() of a many-valued result refuses
    r = acc.delta(np.array([0.5, 1.0]))
    assert isinstance(r, DeltaResult) and r.delta.shape == (2,)
    with pytest.raises(TypeError, match="epsilon"):
        float(acc.epsilon(DELTAS))
    with pytest.raises(TypeError, match="delta"):
        float(r)
    assert float(acc.epsilon(1e-5)) == acc.epsilon(1e-5).epsilon


def _filters():
    g = GDPFilter(1.0)
    for _ in range(3):
        g.request(0.4)
    od = GDPOdometer(0.5)
    for _ in range(5):
        od.record(0.3)
    r = RDPFilter.from_epsilon_delta(2.0, 1e-5)
    for _ in range(3):
        r.request(0.2)
    ind = IndividualGDPFilter(1.0, 2.0, 1.0, 3)
    for _ in range(5):
        ind.step(np.array([0.5, 3.0, 0.0]))
    return {"gdp-filter": g, "gdp-odometer": od, "rdp-filter": r,
            "individual-gdp-filter": ind}


@pytest.mark.parametrize("name", ["gdp-filter", "gdp-odometer", "rdp-filter",
                                  "individual-gdp-filter"])
def test_filters_answer_like_accountants(name):
    f = _filters()[name]
    singles = [f.epsilon(float(d)) for d in DELTAS]
    r = f.epsilon(DELTAS)
    _check_stacked(r, singles, DELTAS.shape)
    assert r.certified and r.accountant == name
    eps = np.array([0.0, 0.5, 2.0])
    dr = f.delta(eps)
    assert isinstance(dr, DeltaResult) and dr.certified
    for i, e in enumerate(eps):  # vectorized delta(epsilon) equals the single queries
        assert same(np.asarray(dr.delta)[i], f.delta(float(e)).delta)
    # delta(epsilon(delta)) <= delta: the two curves are one (eps rounded up)
    for s in singles:
        back = np.asarray(f.delta(float(np.max(s.epsilon))).delta)
        assert np.all(back <= s.delta * (1 + 1e-9))
    assert _roundtrip(r.as_dict()) == r.as_dict()


def test_individual_gdp_filter_per_example_shapes():
    f = _filters()["individual-gdp-filter"]
    r = f.epsilon(DELTAS)
    assert r.epsilon.shape == (DELTAS.size, 3)
    assert same(r.delta, DELTAS)  # the query's shape; epsilon adds one axis of examples
    assert r.epsilon[:, 2].tolist() == [0.0] * DELTAS.size  # example 2 never contributed
    dr = f.delta(np.array([0.5, 1.0]))
    assert dr.delta.shape == (2, 3)
    assert dr.delta[0, 1] == f.delta(0.5).delta[1]
    assert f.budget_epsilon(1e-5).epsilon >= r.epsilon[1].max()


@pytest.fixture(scope="module")
def norm_history():
    rng = np.random.default_rng(2)
    g = rng.uniform(0.0, 2.0, (4, 30))
    g[3] = 0.0
    acc = IndividualPLDAccountant(sampling_rate=0.05, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=4, n_buckets=10)
    acc.step_many(g)
    return acc


@pytest.mark.parametrize("kind", ["pld", "spa"])
def test_individual_accountants_array_of_deltas(norm_history, kind):
    acc = norm_history if kind == "pld" else IndividualSPAAccountant.from_history(norm_history)
    deltas = DELTAS[:3]
    singles = [acc.epsilon(float(d)) for d in deltas]
    for s in singles:
        assert s.epsilon.shape == (4,) and s.epsilon[3] == 0.0
        assert s.certified is (kind == "pld")
        assert s.upper.shape == (4,) and np.all(s.upper >= s.epsilon)
    r = acc.epsilon(deltas)
    _check_stacked(r, singles, deltas.shape)
    assert r.epsilon.shape == (3, 4)
    d = r.as_dict()
    assert _roundtrip(d) == d and len(d["epsilon"]) == 3 and len(d["epsilon"][0]) == 4
    with pytest.raises(NotImplementedError, match="epsilon"):
        acc.delta(1.0)


# --- as_dict ----------------------------------------------------------------------------------
def test_as_dict_inf_nan_arrays_and_numpy_scalars():
    r = EpsilonResult(math.inf, 1e-5, math.nan, math.inf, "x", True, estimate=-math.inf,
                      details={"a": np.array([1.0, np.inf, -np.inf, np.nan]),
                               "n": np.int64(3), "ok": np.bool_(True), "f": np.float32(0.5),
                               "nested": {"t": (1.0, math.inf)}, "obj": Gaussian(1.0)})
    d = r.as_dict()
    assert _roundtrip(d) == d
    assert d["epsilon"] is None and d["epsilon_infinite"] is True
    assert d["lower"] is None and "lower_infinite" not in d  # NaN: undefined, no flag
    assert d["upper"] is None and d["upper_infinite"] is True
    assert d["estimate"] is None and d["estimate_negative_infinite"] is True
    assert "estimate_infinite" not in d and d["delta"] == 1e-5
    det = d["details"]
    assert det["a"] == [1.0, None, None, None]
    assert det["a_infinite"] == [False, True, False, False]
    assert det["a_negative_infinite"] == [False, False, True, False]
    assert det["n"] == 3 and type(det["n"]) is int
    assert det["ok"] is True and det["f"] == 0.5
    assert det["nested"] == {"t": [1.0, None], "t_infinite": [False, True]}
    assert isinstance(det["obj"], str)
    assert as_dict(r) == d  # the method is the function
    with pytest.raises(ValueError, match="as_dict"):
        as_dict(3.0)


def _fill(cls):
    """An instance of the result dataclass ``cls`` with every field set to one of a cycle of
    awkward values (whatever its declared type: as_dict must not care)."""
    pool = [2.5, math.inf, math.nan, np.array([0.5, np.inf]), np.float64(-math.inf), 7,
            "text", None, {"k": np.array([np.nan, 1.0])}, True]
    vals = {f.name: pool[i % len(pool)] for i, f in enumerate(dataclasses.fields(cls))}
    return cls(**vals), vals


def _expected(vals: dict) -> dict:
    """What as_dict must give for ``vals``, written out by hand per value."""
    out = {}
    for k, x in vals.items():
        if isinstance(x, dict):
            out[k] = {"k": [None, 1.0]}
        elif isinstance(x, np.ndarray):
            out[k] = [0.5, None]
            out[f"{k}_infinite"] = [False, True]
        elif isinstance(x, float) and math.isinf(x):
            out[k] = None
            out[f"{k}_infinite" if x > 0 else f"{k}_negative_infinite"] = True
        elif isinstance(x, float) and math.isnan(x):
            out[k] = None
        else:
            out[k] = x
    return out


@pytest.mark.parametrize("cls", [EpsilonResult, DeltaResult, GroupResult, CalibrationResult,
                                 ScaleCalibration])
def test_as_dict_of_every_result_type(cls):
    assert issubclass(cls, Result)
    r, vals = _fill(cls)
    d = r.as_dict()
    assert d == _expected(vals)
    assert _roundtrip(d) == d
    assert json.dumps(d, allow_nan=False)


def test_as_dict_of_real_results():
    r = PLDAccountant().compose(Gaussian(1.0), 10).epsilon(1e-5)
    d = r.as_dict()
    assert _roundtrip(d) == d
    assert d["epsilon"] == r.epsilon and d["lower"] == r.lower
    dr = RDPAccountant().compose(Gaussian(1.0), 10).delta(np.array([0.0, 1.0]))
    dd = dr.as_dict()
    assert _roundtrip(dd) == dd and dd["delta"] == dr.delta.tolist() and dd["lower"] is None


def test_repr_html_shows_bracket_and_table():
    import tightdp as td

    acc = td.PLDAccountant().compose(td.Gaussian(1.0), 4)
    r = acc.epsilon(1e-5)
    h = r._repr_html_()
    assert "<table>" in h and f"{r.upper:.6g}" in h and "certified upper bound" in h
    d = acc.delta(np.linspace(0.5, 4, 30))
    h = d._repr_html_()
    assert h.count("<tr>") == 21 and "10 more rows" in h  # header + 20 rows
    pytest.importorskip("matplotlib")
    assert "<svg" in h
