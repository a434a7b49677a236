"""Every accountant and every result pickles and deep-copies at any time (issue 14).

Before any query, after a query and after a refused query, ``pickle`` round trips and
``copy.deepcopy`` give an object whose next query returns the same bracket, bit for bit, as
the original's. The losses of the mechanisms are built lazily and hold their inverses as
module-level callables (no closures), so nothing in an accountant's state is unpicklable.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

from conftest import same as _same
from tightdp import (
    DeltaResult,
    EpsilonResult,
    GDPAccountant,
    PLDAccountant,
    PRVAccountant,
    RDPAccountant,
    SaddlePointAccountant,
)
from tightdp.accountants.fft import FFTAccountant
from tightdp.individual import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    IndividualPLDAccountant,
    IndividualSPAAccountant,
    RDPFilter,
)
from tightdp.mechanisms import (
    ApproxDP,
    Gaussian,
    Laplace,
    MixtureOfGaussians,
    PoissonSubsampled,
    PureDP,
    RandomizedResponse,
    SampledWithoutReplacement,
    SampledWithReplacement,
)

MECHANISMS = {
    "Gaussian": lambda: Gaussian(1.0),
    "Laplace": lambda: Laplace(1.0),
    "RandomizedResponse": lambda: RandomizedResponse(1.0),
    "PureDP": lambda: PureDP(1.0),
    "ApproxDP": lambda: ApproxDP(1.0, 1e-6),
    "PoissonSubsampled-Gaussian": lambda: PoissonSubsampled(Gaussian(1.0), 0.1),
    "PoissonSubsampled-Laplace": lambda: PoissonSubsampled(Laplace(1.0), 0.1),
    "SampledWithoutReplacement": lambda: SampledWithoutReplacement(Gaussian(1.0), 0.1),
    "SampledWithReplacement": lambda: SampledWithReplacement(Gaussian(2.0), 3, 100),
    "MixtureOfGaussians": lambda: MixtureOfGaussians([0.5, 1.0], [0.5, 0.5], 1.0),
}

ACCOUNTANTS = {
    "pld": PLDAccountant,
    "prv": PRVAccountant,
    "fft": lambda **kw: FFTAccountant(12.0, 20_000, **kw),
    "rdp": RDPAccountant,
    "gdp": GDPAccountant,
    "spa": SaddlePointAccountant,
}

_FIELDS = ("epsilon", "delta", "lower", "upper", "estimate", "certified", "note")


def _assert_same_result(r1, r2) -> None:
    assert type(r1) is type(r2)
    for f in _FIELDS:
        assert _same(getattr(r1, f), getattr(r2, f)), f


def _query(acc, kind: str):
    """The query's result, or the refusal's message."""
    try:
        return acc.epsilon(1e-5) if kind == "eps" else acc.delta(np.array([0.5, 2.0]))
    except ValueError as e:
        return str(e)


def _check_same(out1, out2) -> None:
    if isinstance(out1, str):
        assert out1 == out2
    else:
        _assert_same_result(out1, out2)


def _copies(obj) -> list:
    return [pickle.loads(pickle.dumps(obj)), copy.deepcopy(obj)]


@pytest.mark.parametrize("mech", sorted(MECHANISMS))
@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
def test_accountant_pickles_before_and_after_queries(name, mech):
    m = MECHANISMS[mech]()
    # a replace-one mechanism (sampling without / with replacement, RR) in a replace-one one
    acc = ACCOUNTANTS[name](neighboring="replace_one" if "add_or_remove_one" not in m.relations
                            else "add_or_remove_one")
    try:
        acc.compose(m, 3)
    except ValueError:
        pytest.skip(f"{name} does not support {mech}")
    fresh = _copies(acc)  # before any query
    first = _query(acc, "eps")
    after = _copies(acc)  # after a query (caches filled, or a refusal)
    for c in fresh + after:
        _check_same(first, _query(c, "eps"))
    second = _query(acc, "delta")
    for c in _copies(acc):
        _check_same(second, _query(c, "delta"))
    for res in (first, second):
        if not isinstance(res, str):
            for c in _copies(res):
                _assert_same_result(res, c)


def test_results_pickle():
    from tightdp import group_epsilon
    from tightdp.dpsgd.calibrate import calibrate_noise

    er = EpsilonResult(1.0, 1e-5, 0.9, 1.1, "x", True, estimate=1.0, note="n",
                       details={"a": np.arange(3.0)})
    dr = DeltaResult(np.array([1e-3, 1e-4]), np.array([1.0, 2.0]), None, None, "x", False)
    for r in (er, dr):
        for c in _copies(r):
            _assert_same_result(r, c)
            assert c.details.keys() == r.details.keys()
    g = group_epsilon(group_size=2, noise_multiplier=2.0, steps=10, delta=1e-5,
                      sampling_rate=0.01, baselines=False)
    cal = calibrate_noise(epsilon=2.0, delta=1e-5, sampling_rate=0.01, steps=100, rtol=1e-2)
    for r in (g, cal):
        for c in _copies(r):
            assert type(c) is type(r)
            assert _same_dict(r.__dict__, c.__dict__)


def _same_dict(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, dict):
            if not _same_dict(x, y):
                return False
        elif isinstance(x, int | float | np.ndarray) and not isinstance(x, bool):
            if not _same(x, y):
                return False
        elif isinstance(x, list | tuple):
            if len(x) != len(y) or not all(
                    (_same_dict(p, r) if isinstance(p, dict) else
                     _same(p, r) if isinstance(p, int | float) else p == r)
                    for p, r in zip(x, y, strict=True)):
                return False
        elif x != y:
            return False
    return True


# --- the individual accountants and filters -----------------------------------------------
def _norms(steps: int = 4) -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.uniform(0.2, 2.0, (steps, 3))


def test_individual_pld_accountant_pickles():
    acc = IndividualPLDAccountant(sampling_rate=0.05, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=3, n_buckets=10)
    for c in _copies(acc):  # before any step
        c.step(_norms()[0])
    for g in _norms():
        acc.step(g)
    first = acc.epsilon(1e-5).epsilon
    for c in _copies(acc):
        assert _same(first, c.epsilon(1e-5).epsilon)
        c.step(_norms()[0])  # still usable after the round trip
    acc.step(_norms()[1])
    second = acc.epsilon(1e-5).epsilon
    for c in _copies(acc):
        assert _same(second, c.epsilon(1e-5).epsilon)


def test_individual_spa_accountant_and_result_pickle():
    acc = IndividualSPAAccountant(sampling_rate=0.05, noise_multiplier=1.0, clip_norm=1.0,
                                  n_examples=3)
    _copies(acc)
    acc.step_many(_norms().T)
    first = acc.epsilon(1e-5)
    for c in _copies(acc):
        r = c.epsilon(1e-5)
        for f in ("epsilon", "upper"):
            assert _same(np.asarray(getattr(first, f), dtype=float),
                         np.asarray(getattr(r, f), dtype=float)), f
        assert _same(np.asarray(first.details["reliable"], dtype=float),
                     np.asarray(r.details["reliable"], dtype=float))
    for c in _copies(first):
        assert type(c) is type(first)
        assert _same(first.epsilon, c.epsilon) and _same(first.upper, c.upper)


@pytest.mark.parametrize("make, use", [
    (lambda: GDPFilter(1.0), lambda f: f.request(0.3)),
    (lambda: GDPOdometer(0.5), lambda f: f.record(0.3)),
    (lambda: RDPFilter(2.0, 8.0), lambda f: f.request(0.3)),
    (lambda: IndividualGDPFilter(1.0, 1.0, 1.0, 3), lambda f: f.step(np.array([0.5, 1.2, 0.1]))),
], ids=["GDPFilter", "GDPOdometer", "RDPFilter", "IndividualGDPFilter"])
def test_filters_pickle(make, use):
    f = make()
    _copies(f)
    for _ in range(3):
        use(f)
    want = f.epsilon(1e-5).epsilon
    for c in _copies(f):
        assert _same(want, c.epsilon(1e-5).epsilon)
        out_c, out_f = use(c), use(copy.deepcopy(f))
        assert _same(np.asarray(out_c, dtype=float), np.asarray(out_f, dtype=float))
    assert math.isfinite(float(np.max(want)))
