"""The edge suite (issue 14, "Certified everywhere").

Every accountant, at the edges of its input range (delta 1e-300 .. 0.999, sigma 0.01 ..
1e4, sampling rate 1e-9 .. 1, steps 1 .. 1e12, eps 0 .. 1e4), must give certified bounds
that bracket the exact value -- ``upper >= exact`` and ``lower <= exact`` wherever they are
not None (the contract of EpsilonResult/DeltaResult) -- or refuse with a clean one-line
ValueError; and every call must stay under 2 GB (tracemalloc peak) and 60 s.

The exact values come from ``tests/oracle.py`` (mpmath, independent of tightdp): the mu-GDP
closed form for k Gaussian steps, and the one-crossing formula for ONE Poisson-subsampled
Gaussian step. For 2..10 subsampled steps no closed form exists; there the truth is bounded
on both sides -- below by the exact one-step curve (composition can only increase delta),
above by the curve of k unsubsampled Gaussian steps (subsampling is a mixture with the null
pair, and the hockey-stick divergence is jointly convex) -- and upper bounds are checked
against the former, lower bounds against the latter.

Every call runs in a guarded worker process (``tests/_guard.py``): a hard address-space
limit and a timeout, so that a call that would take 10+ GB or hang fails its test instead
of the machine. The default run is reduced (few hypothesis examples, the reproducers);
``TIGHTDP_SLOW=1`` runs the full form (the ``slow`` tests).
"""

from __future__ import annotations

import functools
import json
import math

import mpmath as mp
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import oracle
import tightdp as td
from _guard import MAX_BYTES, MAX_SECONDS, Guard, run_cli
from conftest import case_by_id

ACCOUNTANTS = ("pld", "prv", "rdp", "fft", "spa", "gdp")

#: relative slack for float rounding only
RTOL = 1e-9
#: absolute slack: eps values are O(1) floats; deltas may be subnormal near 1e-300
ABS_EPS = 1e-12
ABS_DELTA = 1e-305


@pytest.fixture(scope="module")
def guard():
    g = Guard()
    yield g
    g.close()


# --------------------------------------------------------------------------------------
# checks shared by every test
# --------------------------------------------------------------------------------------

def _describe(out: dict) -> str:
    keep = {k: out.get(k) for k in ("status", "seconds", "peak_bytes", "error")}
    if "result" in out:
        r = out["result"]
        keep["result"] = {k: r.get(k) for k in ("epsilon", "delta", "lower", "upper",
                                                "certified", "note") if k in r}
    if "traceback" in out:
        keep["traceback"] = out["traceback"][-600:]
    return repr(keep)


def check_cost(out: dict) -> None:
    """The call finished, within 60 s and 2 GB, with an answer or a clean refusal."""
    assert out["status"] in ("ok", "refused"), f"not an answer nor a clean refusal: " \
                                               f"{_describe(out)}"
    assert out["seconds"] < MAX_SECONDS, f"took {out['seconds']:.1f} s: {_describe(out)}"
    assert out["peak_bytes"] < MAX_BYTES, \
        f"peak {out['peak_bytes'] / 1e6:.0f} MB: {_describe(out)}"
    if out["status"] == "refused":
        msg = out["error"]
        assert msg.strip() and "\n" not in msg.strip(), f"refusal not one line: {msg!r}"


def _slack(x: float, abs_tol: float) -> float:
    """Float rounding allowed around the truth ``x`` (none around an infinite truth: only
    inf is at least inf)."""
    return RTOL * abs(x) + abs_tol if math.isfinite(x) else 0.0


def check_bracket(res: dict, key: str, truth_low: float, truth_high: float,
                  abs_tol: float, what: str) -> None:
    """``upper >= truth_low`` and ``lower <= truth_high`` (the truth lies in
    [truth_low, truth_high]; both equal the exact value where it is known), and a
    certified headline ``res[key]`` is >= truth_low; no inconsistency lower > upper."""
    up, lo = res.get("upper"), res.get("lower")
    val = res.get(key)
    assert val is not None and not (isinstance(val, float) and math.isnan(val)), \
        f"{what}: no answer {res}"
    if up is not None:
        assert up >= truth_low - _slack(truth_low, abs_tol), \
            f"{what}: upper {up!r} < exact {truth_low!r} (under-reports)"
    if lo is not None:
        assert lo <= truth_high + _slack(truth_high, abs_tol), \
            f"{what}: lower {lo!r} > exact {truth_high!r}"
    if up is not None and lo is not None:
        assert lo <= up, f"{what}: inconsistent bracket lower {lo!r} > upper {up!r}"
    if res.get("certified"):
        assert val >= truth_low - _slack(truth_low, abs_tol), \
            f"{what}: certified {key} {val!r} < exact {truth_low!r}"


def run_checked(guard: Guard, spec: dict, truth_low, truth_high, what: str) -> dict:
    """Run one accountant query, check its cost and (if it answered) its bracket."""
    out = guard.run(spec)
    check_cost(out)
    if out["status"] == "ok":
        key = spec["kind"]
        check_bracket(out["result"], key, float(truth_low), float(truth_high),
                      ABS_EPS if key == "epsilon" else ABS_DELTA, what)
    return out


def eps_bounds_subsampled(q: float, sigma: float, steps: int, delta: float):
    """[low, high] containing the true eps(delta) of ``steps`` subsampled Gaussian steps."""
    low = oracle.subsampled_epsilon(q, sigma, delta)
    high = low if steps == 1 else oracle.gaussian_epsilon(sigma, steps, delta)
    return low, high


def delta_bounds_subsampled(q: float, sigma: float, steps: int, eps: float):
    low = oracle.subsampled_delta(q, sigma, eps)
    high = low if steps == 1 else oracle.gaussian_delta(sigma, steps, eps)
    return low, high


# --------------------------------------------------------------------------------------
# the oracle against itself, the published reference brackets, and dp_accounting
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("sigma,delta", [(1.0, 1e-5), (0.3, 1e-12), (20.0, 1e-300),
                                         (0.01, 0.5)])
def test_oracle_q1_is_mu_gdp(sigma, delta):
    """q = 1 is the plain Gaussian mechanism: the one-crossing formula (both directions)
    equals the mu-GDP closed form."""
    for d in ("add", "remove"):
        a = oracle.subsampled_epsilon_direction(1.0, sigma, delta, d)
        b = oracle.gaussian_epsilon(sigma, 1, delta)
        assert abs(a - b) <= mp.mpf("1e-25") * max(b, 1), (d, a, b)
    assert abs(oracle.subsampled_delta(1.0, sigma, 0.7) - oracle.gaussian_delta(sigma, 1, 0.7)) \
        <= mp.mpf("1e-40")


def test_oracle_inverse_consistent():
    """eps(delta) solves delta(eps) = delta, per direction, down to 1e-300: delta just below
    the returned eps is >= delta and just above it is <= delta (near the add direction's
    largest loss -log(1-q) delta(eps) is too steep for a plain round trip)."""
    for q, sigma, delta in [(0.01, 1.0, 1e-20), (1e-9, 1e4, 1e-300), (0.5, 0.01, 1e-300),
                            (0.3, 0.7, 0.2)]:
        for d in ("add", "remove"):
            e = oracle.subsampled_epsilon_direction(q, sigma, delta, d)
            if e > 0:
                with mp.workdps(oracle.DPS):
                    e_lo, e_hi = e * (1 - mp.mpf("1e-28")), e * (1 + mp.mpf("1e-28"))
                below = oracle.subsampled_delta_direction(q, sigma, e_lo, d)
                above = oracle.subsampled_delta_direction(q, sigma, e_hi, d)
                assert below >= delta >= above, (q, sigma, delta, d, e, below, above)
    back = oracle.subsampled_delta_direction(0.01, 1.0, oracle.subsampled_epsilon_direction(
        0.01, 1.0, 1e-20, "remove"), "remove")
    assert abs(back / mp.mpf(1e-20) - 1) < 1e-20
    for sigma, steps, delta in [(0.01, 10**12, 1e-300), (1e4, 1, 1e-6), (1.0, 1, 1e-30)]:
        e = oracle.gaussian_epsilon(sigma, steps, delta)
        assert abs(oracle.gaussian_delta(sigma, steps, e) / mp.mpf(delta) - 1) < 1e-20


#: closed-form cases of tests/data/reference_cases.json (public reference brackets), copied
#: so that the oracle check runs without the shared directory: id -> (mechanism, query,
#: lower, upper)
REFERENCE = {
    "A21": ({"q": 1.0, "sigma": 20.0, "steps": 100}, {"type": "eps_at_delta", "delta": 1e-05},
            1.9930914044151193, 1.9930914044151198),
    "A22": ({"q": 0.01, "sigma": 1.0, "steps": 1}, {"type": "delta_at_eps", "eps": 0.5},
            2.2145190131530614e-07, 2.214519013153062e-07),
    "B01": ({"sigma": 1.0, "steps": 1}, {"type": "eps_at_delta", "delta": 1e-05},
            4.377178095681224, 4.377178095681225),
    "B02": ({"sigma": 5.0, "steps": 100}, {"type": "delta_at_eps", "eps": 1.0},
            0.50986166005467, 0.5098616600546703),
    "B03": ({"sigma": 5.0, "steps": 100}, {"type": "eps_at_delta", "delta": 1e-06},
            10.997151214220649, 10.997151214220652),
}


@pytest.mark.parametrize("cid", sorted(REFERENCE))
def test_oracle_reference_cases(cid):
    """The oracle falls inside the public reference brackets (closed-form cases)."""
    m, qy, lower, upper = REFERENCE[cid]
    q = m.get("q", 1.0)
    if qy["type"] == "eps_at_delta":
        if q == 1.0:
            x = oracle.gaussian_epsilon(m["sigma"], m["steps"], qy["delta"])
        else:
            assert m["steps"] == 1
            x = oracle.subsampled_epsilon(q, m["sigma"], qy["delta"])
    else:
        if q == 1.0:
            x = oracle.gaussian_delta(m["sigma"], m["steps"], qy["eps"])
        else:
            assert m["steps"] == 1
            x = oracle.subsampled_delta(q, m["sigma"], qy["eps"])
    x = float(x)
    assert lower * (1 - 1e-15) <= x <= upper * (1 + 1e-15), (cid, x, lower, upper)


def test_vendored_reference_matches_shared():
    """The brackets above are those of the vendored reference cases
    (tests/data/reference_cases.json)."""
    for cid, (_, qy, lower, upper) in REFERENCE.items():
        c = case_by_id(cid)
        assert (c["query"], c["lower"], c["upper"]) == (qy, lower, upper), cid


@pytest.mark.parametrize("q,sigma,delta", [(0.01, 1.0, 1e-5), (0.1, 0.7, 1e-8),
                                           (0.2, 3.0, 1e-3)])
def test_oracle_against_dp_accounting(q, sigma, delta):
    """dp_accounting's PLD at a fine grid (1e-4): its optimistic eps <= oracle <= its
    pessimistic eps, within two grid steps; delta(0.5) agrees to 1e-9."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    pess = pld_mod.from_gaussian_mechanism(sigma, sampling_prob=q,
                                           value_discretization_interval=1e-4)
    opt = pld_mod.from_gaussian_mechanism(sigma, sampling_prob=q,
                                          value_discretization_interval=1e-4,
                                          pessimistic_estimate=False, use_connect_dots=False)
    e = float(oracle.subsampled_epsilon(q, sigma, delta))
    ep, eo = pess.get_epsilon_for_delta(delta), opt.get_epsilon_for_delta(delta)
    assert eo * (1 - 1e-12) <= e <= ep * (1 + 1e-12), (eo, e, ep)
    assert ep - eo <= 2e-4
    d = float(oracle.subsampled_delta(q, sigma, 0.5))
    dp = pess.get_delta_for_epsilon(0.5)
    assert dp >= d * (1 - 1e-12) and abs(dp / d - 1) < 1e-9, (d, dp)


# --------------------------------------------------------------------------------------
# regression tests: the reproducers of issue 14, each with its exact value
# --------------------------------------------------------------------------------------

#: (id, accountant, mechanism spec, query kind, argument, exact value from the oracle)
REPRODUCERS = [
    ("gauss-s1-d1e-30", "pld", ("gauss", 1.0), "epsilon", 1e-30, 11.743883025231737),
    ("gauss-s100-d1e-300", "pld", ("gauss", 100.0), "epsilon", 1e-300, 0.36829899001380903),
    ("sub-q0.1-s0.7-d1e-20", "pld", ("sub", 0.1, 0.7), "epsilon", 1e-20, 11.278879466591244),
    ("sub-q0.01-s1-d1e-20", "prv", ("sub", 0.01, 1.0), "epsilon", 1e-20, 4.4041891503144595),
    ("gauss-s0.01-d0.1", "pld", ("gauss", 0.01), "epsilon", 0.1, 5127.161542315224),
    ("gauss-s0.01-d0.1", "prv", ("gauss", 0.01), "epsilon", 0.1, 5127.161542315224),
]


@pytest.mark.parametrize("cid,acc,mech,kind,arg,exact", REPRODUCERS,
                         ids=[f"{r[0]}-{r[1]}" for r in REPRODUCERS])
def test_reproducer_exact(guard, cid, acc, mech, kind, arg, exact):
    # the hard-coded exact value is the oracle's (checked here, so neither can drift)
    if mech[0] == "gauss":
        o = oracle.gaussian_epsilon(mech[1], 1, arg)
    else:
        o = oracle.subsampled_epsilon(mech[1], mech[2], arg)
    assert abs(float(o) - exact) <= 1e-14 * exact
    spec = {"kind": kind, "accountant": acc, "mech": mech, "steps": 1, "arg": arg}
    out = run_checked(guard, spec, exact, exact, f"{cid} {acc}")
    assert out["status"] == "ok", f"{cid} {acc}: refused {out.get('error')}"


#: found by the sweep of benchmarks/bench_edges.py (not in the issue's list): certified
#: upper bounds below the exact value
SWEEP_FINDINGS = [
    # PRV's upper bound stops at ~709.8 (= log of the largest double) on one subsampled step
    # whose true eps is in the thousands
    ("sub-q1e-3-s0.01-d1e-10", "prv", ("sub", 1e-3, 0.01), 1, "epsilon", 1e-10,
     5512.051161423397),
    ("sub-q1e-9-s0.01-d1e-300", "prv", ("sub", 1e-9, 0.01), 1, "epsilon", 1e-300,
     8626.809350704742),
    # the saddle-point accountant's certified moments bound is 0 at delta = 0.999
    ("gauss-s0.01-T1e6-d0.999", "spa", ("gauss", 0.01), 10**6, "epsilon", 0.999,
     4999690975.769367),
    # PLD's certified upper eps 2.94e-6, 20% below the exact 3.658e-6 (huge sigma, tiny delta)
    ("sub-q1e-3-s1e4-d1e-300", "pld", ("sub", 1e-3, 1e4), 1, "epsilon", 1e-300,
     3.6578113995746942e-06),
    # PLD's certified upper delta(0) 3.8292488e-10 below the exact q (2 Phi(1/2) - 1)
    ("sub-q1e-9-s1-delta0", "pld", ("sub", 1e-9, 1.0), 1, "delta", 0.0,
     3.8292492254802623e-10),
]


@pytest.mark.parametrize("cid,acc,mech,steps,kind,arg,exact", SWEEP_FINDINGS,
                         ids=[f"{r[0]}-{r[1]}" for r in SWEEP_FINDINGS])
def test_sweep_finding_exact(guard, cid, acc, mech, steps, kind, arg, exact):
    if mech[0] == "gauss":
        fn = oracle.gaussian_epsilon if kind == "epsilon" else oracle.gaussian_delta
        o = fn(mech[1], steps, arg)
    else:
        fn = oracle.subsampled_epsilon if kind == "epsilon" else oracle.subsampled_delta
        o = fn(mech[1], mech[2], arg)
    assert abs(float(o) - exact) <= 1e-14 * exact
    run_checked(guard, {"kind": kind, "accountant": acc, "mech": mech, "steps": steps,
                        "arg": arg}, exact, exact, f"{cid} {acc}")


# one step at delta 1e-25 and 1e-30 (sigma = 1; Gaussian and q = 0.01), every accountant
_SMALL_DELTA = [(mech, d) for mech in (("gauss", 1.0), ("sub", 0.01, 1.0))
                for d in (1e-25, 1e-30)]


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@pytest.mark.parametrize("mech,delta", _SMALL_DELTA, ids=[f"{m[0]}-{d:g}" for m, d in
                                                          _SMALL_DELTA])
def test_one_step_small_delta(guard, acc, mech, delta):
    if mech[0] == "gauss":
        exact = oracle.gaussian_epsilon(mech[1], 1, delta)
    else:
        exact = oracle.subsampled_epsilon(mech[1], mech[2], delta)
    spec = {"kind": "epsilon", "accountant": acc, "mech": mech, "steps": 1, "arg": delta}
    run_checked(guard, spec, exact, exact, f"{mech} delta={delta} {acc}")


def test_fft_one_gaussian_step_sigma_0_05(guard):
    """FFT on one Gaussian step sigma = 0.05 at delta = 1e-5 (exact 284.39...): a refusal or
    a positive value within its own (finite) stated error estimate of the truth -- never
    11.98 or 0 (today: 0 with error estimate inf)."""
    exact = float(oracle.gaussian_epsilon(0.05, 1, 1e-5))
    assert abs(exact - 284.39184949774245) < 1e-9
    out = guard.run({"kind": "epsilon", "accountant": "fft", "mech": ("gauss", 0.05),
                     "steps": 1, "arg": 1e-5})
    check_cost(out)
    if out["status"] == "ok":
        r = out["result"]
        err = r.get("details", {}).get("error_estimate")
        # an answer of 0 (or any value) with an infinite error estimate is no answer: refuse
        assert err is not None and math.isfinite(err) and r["epsilon"] > 0, \
            f"fft eps {r['epsilon']!r} with error estimate {err!r}: not an answer"
        assert abs(r["epsilon"] - exact) <= err, \
            f"fft eps {r['epsilon']!r} +- {err!r} excludes the exact {exact!r}"


# ---- DP-SGD front doors at tiny noise multipliers --------------------------------------

_TINY = [(s, k) for s in (0.05, 0.01, 1e-4) for k in (1, 10, 1000)]
_TINY_IDS = [f"s{s:g}-T{k}" for s, k in _TINY]


def _tiny_reduced(default: tuple) -> list:
    """The tiny-noise grid with only the ``default`` (sigma, steps) points in the default run
    (the command-line checks run every accountant or a search per point: 5-25 s each), the
    whole grid at full size (``slow``)."""
    return [pytest.param(s, k, id=i, marks=() if (s, k) in default else pytest.mark.slow)
            for (s, k), i in zip(_TINY, _TINY_IDS, strict=True)]


def _dpsgd_bounds(sigma, steps, delta=1e-5, q=0.01):
    return eps_bounds_subsampled(q, sigma, steps, delta)


@pytest.mark.parametrize("sigma,steps", _TINY, ids=_TINY_IDS)
def test_dpsgd_epsilon_tiny_noise(guard, sigma, steps):
    low, high = _dpsgd_bounds(sigma, steps)
    spec = {"kind": "call", "target": "tightdp.dpsgd:dpsgd_epsilon",
            "kwargs": {"sampling_rate": 0.01, "noise_multiplier": sigma, "steps": steps,
                       "delta": 1e-5}}
    out = guard.run(spec)
    check_cost(out)
    if out["status"] == "ok":
        check_bracket(out["result"], "epsilon", float(low), float(high), ABS_EPS,
                      f"dpsgd_epsilon sigma={sigma} T={steps}")


def check_cli(r: dict, what: str) -> dict | None:
    """An answer (exit 0, JSON on stdout) or a clean refusal (exit 2, one stderr line),
    within 60 s and 2 GB; returns the parsed JSON or None for a refusal."""
    assert r["status"] == "ok", f"{what}: timeout after {r['seconds']:.0f} s"
    err = r["stderr"].strip()
    last = err.splitlines()[-1] if err else ""
    assert "Traceback" not in err and "MemoryError" not in err, \
        f"{what}: exit {r['returncode']} with a traceback ending {last[:300]!r}"
    assert r["returncode"] in (0, 2), f"{what}: exit {r['returncode']}: {last[:300]!r}"
    assert r["seconds"] < MAX_SECONDS, f"{what}: took {r['seconds']:.1f} s"
    if r["max_rss_bytes"] is not None:
        assert r["max_rss_bytes"] < MAX_BYTES, \
            f"{what}: peak RSS {r['max_rss_bytes'] / 1e6:.0f} MB"
    if r["returncode"] == 2:
        assert err and "\n" not in err, f"{what}: refusal is not one line: {err!r}"
        return None
    return json.loads(r["stdout"])


def _cli(*args):
    return [str(a) for a in args]


@pytest.mark.parametrize("sigma,steps", _TINY, ids=_TINY_IDS)
def test_cli_epsilon_tiny_noise(sigma, steps):
    r = run_cli(_cli("epsilon", "--sampling-rate", 0.01, "--noise-multiplier", sigma,
                     "--steps", steps, "--delta", 1e-5, "--json"))
    res = check_cli(r, f"tightdp epsilon sigma={sigma} T={steps}")
    if res is not None:
        low, high = _dpsgd_bounds(sigma, steps)
        res.setdefault("certified", True)
        check_bracket(res, "epsilon", float(low), float(high), ABS_EPS,
                      f"tightdp epsilon sigma={sigma} T={steps}")


@pytest.mark.parametrize("sigma,steps", _tiny_reduced(((0.05, 1), (0.01, 1000), (1e-4, 10))))
def test_cli_compare_tiny_noise(sigma, steps):
    r = run_cli(_cli("compare", "--sampling-rate", 0.01, "--noise-multiplier", sigma,
                     "--steps", steps, "--delta", 1e-5, "--json"),
                timeout=max(MAX_SECONDS * 2, 120))
    res = check_cli(r, f"tightdp compare sigma={sigma} T={steps}")
    if res is not None:
        low, high = _dpsgd_bounds(sigma, steps)
        for row in res["results"]:
            if row.get("epsilon") is None and row.get("error"):
                continue                      # an accountant's clean refusal in its row
            check_bracket(row, "epsilon", float(low), float(high), ABS_EPS,
                          f"compare {row.get('accountant')} sigma={sigma} T={steps}")


@pytest.mark.parametrize("sigma,steps", _tiny_reduced(((1e-4, 10),)))
def test_cli_calibrate_sampling_rate_tiny_noise(sigma, steps):
    """The calibrated rate must meet the target: the exact one-step eps at that rate (a
    lower bound on the T-step eps) is <= 3."""
    r = run_cli(_cli("calibrate", "--solve-for", "sampling-rate", "--noise-multiplier", sigma,
                     "--steps", steps, "--delta", 1e-5, "--epsilon", 3, "--json"))
    res = check_cli(r, f"tightdp calibrate sigma={sigma} T={steps}")
    if res is not None:
        q = res["sampling_rate"]
        one = float(oracle.subsampled_epsilon(q, sigma, 1e-5))
        assert one <= 3.0 * (1 + RTOL), f"rate {q!r} gives exact one-step eps {one!r} > 3"
        assert res["epsilon"] >= one * (1 - RTOL), (res["epsilon"], one)


def test_cli_calibrate_epsilon_1e6():
    r = run_cli(_cli("calibrate", "--sampling-rate", 0.01, "--steps", 10, "--delta", 1e-5,
                     "--epsilon", 1e6, "--json"))
    res = check_cli(r, "tightdp calibrate --epsilon 1e6")
    if res is not None:
        one = float(oracle.subsampled_epsilon(0.01, res["noise_multiplier"], 1e-5))
        assert one <= 1e6 * (1 + RTOL)


def test_calibrate_noise_delta_1e_30_one_step(guard):
    """calibrate_noise at delta = 1e-30, one step (q = 0.01, target eps 3): the returned
    noise must meet the target exactly (oracle), within 60 s / 2 GB."""
    out = guard.run({"kind": "call", "target": "tightdp.dpsgd.calibrate:calibrate_noise",
                     "kwargs": {"epsilon": 3.0, "delta": 1e-30, "sampling_rate": 0.01,
                                "steps": 1}})
    check_cost(out)
    if out["status"] == "ok":
        sigma = out["result"]["noise_multiplier"]
        exact = float(oracle.subsampled_epsilon(0.01, sigma, 1e-30))
        assert exact <= 3.0 * (1 + RTOL), f"sigma {sigma!r}: exact eps {exact!r} > 3"
        assert out["result"]["epsilon"] >= exact * (1 - RTOL)


# ---- cost reproducers --------------------------------------------------------------------

def test_sigma_0_07_1000_steps(guard):
    """q = 0.01, sigma = 0.07, 1000 steps, delta = 1e-5: under 60 s and 2 GB."""
    low, high = eps_bounds_subsampled(0.01, 0.07, 1000, 1e-5)
    run_checked(guard, {"kind": "epsilon", "accountant": "pld", "mech": ("sub", 0.01, 0.07),
                        "steps": 1000, "arg": 1e-5}, low, high, "sigma=0.07 T=1000 pld")


def test_sigma_0_07_1000_steps_rtol_1e_12(guard):
    """The same at rtol = 1e-12: under 2 GB; a coarser certified answer saying
    converged=False, or a refusal."""
    low, high = eps_bounds_subsampled(0.01, 0.07, 1000, 1e-5)
    out = run_checked(guard, {"kind": "epsilon", "accountant": "pld",
                              "mech": ("sub", 0.01, 0.07), "steps": 1000, "arg": 1e-5,
                              "opts": {"rtol": 1e-12}}, low, high, "rtol=1e-12 pld")
    if out["status"] == "ok":
        r = out["result"]
        converged = r.get("details", {}).get("converged")
        width = (r["upper"] - r["lower"]) / r["upper"]
        assert converged is False or width <= 1e-12, (converged, width)


def test_tiny_rate_million_steps_delta(guard):
    """q = 1e-5, sigma = 0.5, 1e6 steps, delta(eps = 1): under 60 s / 2 GB; the upper bound
    is at least the exact one-step delta."""
    low = oracle.subsampled_delta(1e-5, 0.5, 1.0)
    high = oracle.gaussian_delta(0.5, 10**6, 1.0)
    run_checked(guard, {"kind": "delta", "accountant": "pld", "mech": ("sub", 1e-5, 0.5),
                        "steps": 10**6, "arg": 1.0}, low, high, "q=1e-5 T=1e6 pld")


def test_spa_laplace_0_01(guard):
    """SaddlePointAccountant on one Laplace(0.01) step at delta = 1e-5: under 2 GB; exact
    eps(delta) = 1/b + 2 log(1 - delta) (add/remove, sensitivity 1)."""
    exact = 100.0 + 2 * math.log1p(-1e-5)
    run_checked(guard, {"kind": "epsilon", "accountant": "spa", "mech": ("laplace", 0.01),
                        "steps": 1, "arg": 1e-5}, exact, exact, "spa Laplace(0.01)")


def test_group_epsilon_quick_start_no_conversion_by_default(guard):
    """The README's quick-start group_epsilon call does not compute the RDP-conversion
    baseline unless asked (``conversion=``): ``conversion is None``; within 60 s / 2 GB."""
    out = guard.run({"kind": "call", "target": "tightdp.dpsgd.group:group_epsilon",
                     "kwargs": {"group_size": 8, "noise_multiplier": 1.0, "steps": 2000,
                                "delta": 1e-6, "sampling_rate": 0.01}})
    check_cost(out)
    assert out["status"] == "ok", out.get("error")
    assert out["result"]["conversion"] is None, out["result"]["conversion"]


# --------------------------------------------------------------------------------------
# property tests (hypothesis, derandomized; no shrinking: each call can take seconds)
# --------------------------------------------------------------------------------------

def _loguniform(lo_exp: float, hi_exp: float):
    return st.floats(lo_exp, hi_exp).map(lambda u: 10.0 ** u)


SIGMA = _loguniform(-2, 4)
RATE = st.one_of(st.just(1.0), _loguniform(-9, 0))
#: delta log-uniform over the whole range, and (as often) over the practical [1e-20, 0.999]
DELTA = st.one_of(_loguniform(-300, math.log10(0.999)), _loguniform(-20, math.log10(0.999)))
EPS = st.one_of(st.just(0.0), _loguniform(-6, 4))
KFOLD = st.floats(0, 12).map(lambda u: int(round(10.0 ** u)))
FEW = st.sampled_from([1, 2, 3, 10])


def _settings(n: int):
    return settings(derandomize=True, deadline=None, max_examples=n, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))


#: hypothesis examples per (property, accountant): the default run, TIGHTDP_SLOW=1
REDUCED, FULL = 6, 60


def _gauss_eps(guard, acc, sigma, steps, delta):
    exact = oracle.gaussian_epsilon(sigma, steps, delta)
    run_checked(guard, {"kind": "epsilon", "accountant": acc, "mech": ("gauss", sigma),
                        "steps": steps, "arg": delta}, exact, exact,
                f"{acc} Gaussian sigma={sigma!r} T={steps} eps(delta={delta!r})")


def _gauss_delta(guard, acc, sigma, steps, eps):
    exact = oracle.gaussian_delta(sigma, steps, eps)
    run_checked(guard, {"kind": "delta", "accountant": acc, "mech": ("gauss", sigma),
                        "steps": steps, "arg": eps}, exact, exact,
                f"{acc} Gaussian sigma={sigma!r} T={steps} delta(eps={eps!r})")


def _sub_eps(guard, acc, q, sigma, steps, delta):
    low, high = eps_bounds_subsampled(q, sigma, steps, delta)
    run_checked(guard, {"kind": "epsilon", "accountant": acc, "mech": ("sub", q, sigma),
                        "steps": steps, "arg": delta}, low, high,
                f"{acc} subsampled q={q!r} sigma={sigma!r} T={steps} eps(delta={delta!r})")


def _sub_delta(guard, acc, q, sigma, steps, eps):
    low, high = delta_bounds_subsampled(q, sigma, steps, eps)
    run_checked(guard, {"kind": "delta", "accountant": acc, "mech": ("sub", q, sigma),
                        "steps": steps, "arg": eps}, low, high,
                f"{acc} subsampled q={q!r} sigma={sigma!r} T={steps} delta(eps={eps!r})")


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(REDUCED)
@given(sigma=SIGMA, steps=KFOLD, delta=DELTA)
def test_property_gaussian_epsilon(guard, acc, sigma, steps, delta):
    _gauss_eps(guard, acc, sigma, steps, delta)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(REDUCED)
@given(sigma=SIGMA, steps=KFOLD, eps=EPS)
def test_property_gaussian_delta(guard, acc, sigma, steps, eps):
    _gauss_delta(guard, acc, sigma, steps, eps)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(REDUCED)
@given(q=RATE, sigma=SIGMA, steps=FEW, delta=DELTA)
def test_property_subsampled_epsilon(guard, acc, q, sigma, steps, delta):
    _sub_eps(guard, acc, q, sigma, steps, delta)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(REDUCED)
@given(q=RATE, sigma=SIGMA, steps=FEW, eps=EPS)
def test_property_subsampled_delta(guard, acc, q, sigma, steps, eps):
    _sub_delta(guard, acc, q, sigma, steps, eps)


# the full form (TIGHTDP_SLOW=1)

@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FULL)
@given(sigma=SIGMA, steps=KFOLD, delta=DELTA)
def test_property_gaussian_epsilon_full(guard, acc, sigma, steps, delta):
    _gauss_eps(guard, acc, sigma, steps, delta)


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FULL)
@given(sigma=SIGMA, steps=KFOLD, eps=EPS)
def test_property_gaussian_delta_full(guard, acc, sigma, steps, eps):
    _gauss_delta(guard, acc, sigma, steps, eps)


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FULL)
@given(q=RATE, sigma=SIGMA, steps=FEW, delta=DELTA)
def test_property_subsampled_epsilon_full(guard, acc, q, sigma, steps, delta):
    _sub_eps(guard, acc, q, sigma, steps, delta)


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FULL)
@given(q=RATE, sigma=SIGMA, steps=FEW, eps=EPS)
def test_property_subsampled_delta_full(guard, acc, q, sigma, steps, eps):
    _sub_delta(guard, acc, q, sigma, steps, eps)


# --------------------------------------------------------------------------------------
# certified and tight: the default accountant's bracket at the one-step edges is usable
# --------------------------------------------------------------------------------------

#: (q, sigma, delta): one step; the pld bracket must hold the exact value and be within
#: 1% of it (a bracket of [0, inf] is sound but useless: the rounding allowance once charged
#: the window's top atom and turned q=0.01 at 1e-25 into [0, inf])
TIGHT_ONE_STEP = [(1.0, 1.0, 1e-30), (1.0, 100.0, 1e-300), (0.1, 0.7, 1e-20),
                  (0.01, 1.0, 1e-25), (0.01, 1.0, 1e-30), (1.0, 0.01, 0.1), (0.01, 0.05, 1e-5),
                  (0.01, 1e-4, 1e-5), (5.451380292467541e-05, 0.5574656454510795, 1e-12)]


@pytest.mark.parametrize("q,sigma,delta", TIGHT_ONE_STEP)
def test_pld_one_step_bracket_is_tight(q, sigma, delta):
    import tightdp as td

    exact = float(oracle.subsampled_epsilon(q, sigma, delta) if q < 1
                  else oracle.gaussian_epsilon(sigma, 1, delta))
    mech = td.PoissonSubsampled(td.Gaussian(sigma), q) if q < 1 else td.Gaussian(sigma)
    r = td.PLDAccountant().compose(mech, 1).epsilon(delta)
    assert r.lower <= exact * (1 + 1e-9) and r.upper >= exact * (1 - 1e-9), (r, exact)
    assert r.upper <= exact * 1.01 and r.lower >= exact * 0.99, (r, exact)


# --------------------------------------------------------------------------------------
# the far edges: delta down to the smallest positive double, noise down to 1e-300, step
# counts up to 1e30, eps up to 1e6 -- a certified value at least the exact one, or one line
# --------------------------------------------------------------------------------------

#: deltas below tightdp.DELTA_MIN = 1e-300, each refused by every query (subnormal deltas
#: once gave PLD upper bounds below the exact eps: 38.8221 against 38.8718 at 5e-324)
BELOW_FLOOR = (5e-324, 1e-323, 1e-310, 2.2250738585072014e-308, 9.9e-301)


def _refused_naming_delta(out: dict, what: str) -> None:
    check_cost(out)
    assert out["status"] == "refused", f"{what}: answered below the floor: {_describe(out)}"
    assert "delta" in out["error"] and "1e-300" in out["error"], out["error"]


def _refused_below_floor(out: dict, what: str) -> None:
    """Refused in one line: for delta (named), or earlier, for the mechanism or the steps
    (an accountant that cannot take the composition refuses it before any query)."""
    check_cost(out)
    assert out["status"] == "refused", f"{what}: answered below the floor: {_describe(out)}"


@pytest.mark.parametrize("acc", ACCOUNTANTS)
def test_delta_below_floor_refused(guard, acc):
    for d in BELOW_FLOOR:
        for mech in (("gauss", 1.0), ("sub", 0.01, 1.0)):
            out = guard.run({"kind": "epsilon", "accountant": acc, "mech": mech, "steps": 1,
                             "arg": d})
            _refused_naming_delta(out, f"{acc} {mech} delta={d!r}")


@pytest.mark.parametrize("target,kwargs", [
    ("tightdp.dpsgd:dpsgd_epsilon", {"sampling_rate": 0.01, "noise_multiplier": 1.0,
                                     "steps": 10}),
    ("tightdp.dpsgd.calibrate:calibrate_noise", {"epsilon": 3.0, "sampling_rate": 0.01,
                                                 "steps": 10}),
    ("tightdp.dpsgd.group:group_epsilon", {"group_size": 2, "noise_multiplier": 1.0,
                                           "steps": 10, "sampling_rate": 0.01}),
])
def test_front_doors_refuse_delta_below_floor(guard, target, kwargs):
    for d in (5e-324, 1e-310):
        out = guard.run({"kind": "call", "target": target, "kwargs": {**kwargs, "delta": d}})
        _refused_naming_delta(out, f"{target} delta={d!r}")


def test_cli_refuses_delta_below_floor():
    r = run_cli(_cli("epsilon", "--sampling-rate", 0.01, "--noise-multiplier", 1.0,
                     "--steps", 10, "--delta", 5e-324))
    assert check_cli(r, "tightdp epsilon --delta 5e-324") is None
    assert "--delta" in r["stderr"] and "1e-300" in r["stderr"]


#: the issue's subnormal reproducers, asked at the floor itself: (mechanism, exact eps at
#: delta = 1e-300 from the oracle)
AT_FLOOR = [(("gauss", 1.0), 37.44884791213911), (("sub", 0.01, 1.0), 32.71901118550907),
            (("sub", 0.5, 0.5), 75.20314561642536)]


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@pytest.mark.parametrize("mech,exact", AT_FLOOR, ids=[str(m) for m, _ in AT_FLOOR])
def test_one_step_at_delta_floor(guard, acc, mech, exact):
    fn = (oracle.gaussian_epsilon(mech[1], 1, 1e-300) if mech[0] == "gauss"
          else oracle.subsampled_epsilon(mech[1], mech[2], 1e-300))
    assert abs(float(fn) - exact) <= 1e-14 * exact
    run_checked(guard, {"kind": "epsilon", "accountant": acc, "mech": mech, "steps": 1,
                        "arg": 1e-300}, exact, exact, f"{acc} {mech} at delta=1e-300")


FAR_SIGMA = st.one_of(_loguniform(-300, -2), _loguniform(-2, 4))
FAR_DELTA = st.one_of(_loguniform(math.log10(5e-324), -300), _loguniform(-300, -0.001))
FAR_STEPS = st.floats(0, 30).map(lambda u: int(round(10.0 ** u)))
FAR_EPS = st.one_of(st.just(0.0), _loguniform(-6, 6))
FAR_RATE = st.one_of(st.just(1.0), _loguniform(-9, 0))
#: hypothesis examples per (property, accountant) at the far edges: default run, slow run
FAR_REDUCED, FAR_FULL = 4, 40


def _far_eps(guard, acc, q, sigma, steps, delta):
    """eps(delta) of ``steps`` Gaussian steps (q = 1, exact mu-GDP) or of one subsampled
    step (exact one-crossing formula): below the floor a refusal, else run_checked."""
    if q < 1:
        steps = 1
    spec = {"kind": "epsilon", "accountant": acc, "steps": steps, "arg": delta,
            "mech": ("gauss", sigma) if q == 1 else ("sub", q, sigma)}
    what = f"{acc} q={q!r} sigma={sigma!r} T={steps} eps(delta={delta!r})"
    if delta < 1e-300:
        _refused_below_floor(guard.run(spec), what)
        return
    exact = (oracle.gaussian_epsilon(sigma, steps, delta) if q == 1
             else oracle.subsampled_epsilon(q, sigma, delta))
    run_checked(guard, spec, _as_float_up(exact), _as_float_up(exact), what)


def _far_delta(guard, acc, q, sigma, steps, eps):
    if q < 1:
        steps = 1
    spec = {"kind": "delta", "accountant": acc, "steps": steps, "arg": eps,
            "mech": ("gauss", sigma) if q == 1 else ("sub", q, sigma)}
    exact = (oracle.gaussian_delta(sigma, steps, eps) if q == 1
             else oracle.subsampled_delta(q, sigma, eps))
    run_checked(guard, spec, float(exact), float(exact),
                f"{acc} q={q!r} sigma={sigma!r} T={steps} delta(eps={eps!r})")


def _as_float_up(x) -> float:
    """An exact mpmath value as a float, inf beyond the largest double (then only an upper
    bound of inf is at least the exact value)."""
    return math.inf if x > mp.mpf("1.7976931348623157e308") else float(x)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FAR_REDUCED)
@given(q=FAR_RATE, sigma=FAR_SIGMA, steps=FAR_STEPS, delta=FAR_DELTA)
def test_property_far_edges_epsilon(guard, acc, q, sigma, steps, delta):
    _far_eps(guard, acc, q, sigma, steps, delta)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FAR_REDUCED)
@given(q=FAR_RATE, sigma=FAR_SIGMA, steps=FAR_STEPS, eps=FAR_EPS)
def test_property_far_edges_delta(guard, acc, q, sigma, steps, eps):
    _far_delta(guard, acc, q, sigma, steps, eps)


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FAR_FULL)
@given(q=FAR_RATE, sigma=FAR_SIGMA, steps=FAR_STEPS, delta=FAR_DELTA)
def test_property_far_edges_epsilon_full(guard, acc, q, sigma, steps, delta):
    _far_eps(guard, acc, q, sigma, steps, delta)


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FAR_FULL)
@given(q=FAR_RATE, sigma=FAR_SIGMA, steps=FAR_STEPS, eps=FAR_EPS)
def test_property_far_edges_delta_full(guard, acc, q, sigma, steps, eps):
    _far_delta(guard, acc, q, sigma, steps, eps)


@pytest.mark.parametrize("acc", ACCOUNTANTS)
@_settings(FAR_REDUCED)
@given(sigma=FAR_SIGMA, steps=FAR_STEPS, delta=FAR_DELTA)
def test_property_far_edges_front_door(guard, acc, sigma, steps, delta):
    """dpsgd_epsilon at sampling rate 1 (exact mu-GDP): a certified value at least the
    exact one, or one line."""
    spec = {"kind": "call", "target": "tightdp.dpsgd:dpsgd_epsilon",
            "kwargs": {"sampling_rate": 1.0, "noise_multiplier": sigma, "steps": steps,
                       "delta": delta, "accountant": acc}}
    what = f"dpsgd_epsilon {acc} sigma={sigma!r} T={steps} delta={delta!r}"
    if delta < 1e-300:
        _refused_below_floor(guard.run(spec), what)
        return
    exact = _as_float_up(oracle.gaussian_epsilon(sigma, steps, delta))
    out = guard.run(spec)
    check_cost(out)
    if out["status"] == "ok":
        check_bracket(out["result"], "epsilon", exact, exact, ABS_EPS, what)


@_settings(8)
@given(q=FAR_RATE, sigma=FAR_SIGMA, steps=FAR_STEPS, delta=FAR_DELTA)
def test_property_far_edges_cli(q, sigma, steps, delta):
    """The command at the far edges: exit 0 with JSON whose certified upper bound is at
    least the exact value (q = 1: mu-GDP; else one step), or exit 2 with one line; never a
    traceback."""
    if q < 1:
        steps = 1
    r = run_cli(_cli("epsilon", "--sampling-rate", repr(q), "--noise-multiplier", repr(sigma),
                     "--steps", steps, "--delta", repr(delta), "--json"))
    res = check_cli(r, f"tightdp epsilon q={q!r} sigma={sigma!r} T={steps} delta={delta!r}")
    if delta < 1e-300:
        assert res is None
        return
    if res is not None:
        exact = _as_float_up(oracle.gaussian_epsilon(sigma, steps, delta) if q == 1
                             else oracle.subsampled_epsilon(q, sigma, delta))
        res.setdefault("certified", True)
        if res.get("epsilon") is None and res.get("epsilon_infinite"):
            return                         # eps = inf said plainly: at least anything
        check_bracket(res, "epsilon", exact, exact, ABS_EPS, f"cli q={q} sigma={sigma}")


# beyond the accountants' numerics: vanishing noise and astronomic step counts are answered
# in closed form (tightdp.accountants.limits), certified, without a RuntimeWarning
# --------------------------------------------------------------------------------------
def _no_warnings(fn):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@functools.lru_cache
def _vanishing_exact(sigma: float) -> mp.mpf:
    """eps(1e-5) of 10 Gaussian steps of noise ``sigma``: the oracle, or for sigma < 1e-40
    bisection at 250 digits (mu ~ 1e100 needs a = -eps/mu + mu/2 to absolute precision 1:
    more digits than the oracle's 80) in [mu^2/2, mu^2/2 + 20 mu], a bracket of relative
    width 40/mu already."""
    if sigma >= 1e-40:
        return oracle.gaussian_epsilon(sigma, 10, 1e-5)
    with mp.workdps(250):
        mu, delta = mp.sqrt(10) / mp.mpf(sigma), mp.mpf(1e-5)
        lo, hi = mu * mu / 2, mu * mu / 2 + 20 * mu
        for _ in range(40):
            mid = (lo + hi) / 2
            d = oracle._sf(mid / mu - mu / 2) - mp.exp(mid) * oracle._sf(mid / mu + mu / 2)
            lo, hi = (mid, hi) if d > delta else (lo, mid)
        return +hi


@pytest.mark.parametrize("acc", ACCOUNTANTS)
def test_vanishing_noise_gaussian_bracket_and_infinity(acc):
    """q = 1, 10 steps: mu = sqrt(10)/sigma. sigma = 1e-35 (oracle) and 1e-100 (mpmath at 250
    digits) lie inside the certified bracket; at 1e-200 and 1e-300 (mu^2/2 beyond the
    doubles, so is the true eps) the upper bound is inf, said in the note."""
    for sigma in (1e-35, 1e-100):
        r = _no_warnings(lambda s=sigma: td.dpsgd_epsilon(
            sampling_rate=1.0, noise_multiplier=s, steps=10, delta=1e-5, accountant=acc))
        exact = _vanishing_exact(sigma)
        assert r.certified and r.lower <= exact <= r.upper, (sigma, r)
        assert r.upper <= exact * (1 + 1e-9)
    for sigma in (1e-200, 1e-300):
        r = _no_warnings(lambda s=sigma: td.dpsgd_epsilon(
            sampling_rate=1.0, noise_multiplier=s, steps=10, delta=1e-5, accountant=acc))
        assert r.certified and r.upper == math.inf and "epsilon = inf" in r.note


@pytest.mark.parametrize("acc", ("pld", "prv", "rdp", "fft", "spa"))
def test_vanishing_noise_subsampled_and_direct_mechanisms(acc):
    """q = 0.01, 10 steps, sigma -> 0: with probability above 1e-5 (P(K >= 3) = 1.1e-4 for
    K ~ Binomial(10, 0.01)) three steps each lose about mu^2/2, so eps(1e-5) >= 3/(2 sigma^2)
    (1.5e200 at sigma 1e-100; inf at 1e-300); delta(eps) -> 1 - (1-q)^10 for every finite
    eps. Mechanisms built directly answer the same way, Laplace(1e-300) with eps ~ 1e301."""
    r = _no_warnings(lambda: td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1e-100,
                                              steps=10, delta=1e-5, accountant=acc))
    assert r.certified and r.upper >= 1.5e200
    r = _no_warnings(lambda: td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1e-300,
                                              steps=10, delta=1e-5, accountant=acc))
    assert r.upper == math.inf and "epsilon = inf" in r.note
    r = _no_warnings(lambda: td.dpsgd_delta(sampling_rate=0.01, noise_multiplier=1e-300,
                                            steps=10, epsilon=1.0, accountant=acc))
    assert r.certified and r.upper >= 1 - 0.99 ** 10
    from tightdp.accountants.registry import make_accountant as make
    for mech in (td.Gaussian(1e-300), td.PoissonSubsampled(td.Gaussian(1e-300), 0.01)):
        e = _no_warnings(lambda m=mech: make(acc).compose(m, 10).epsilon(1e-5))
        d = _no_warnings(lambda m=mech: make(acc).compose(m, 10).delta(1.0))
        assert e.upper == math.inf and d.upper >= 1 - 0.99 ** 10
    e = _no_warnings(lambda: make(acc).compose(td.Laplace(1e-300), 10).epsilon(1e-5))
    assert e.certified and e.upper >= 10 / 1e-300


@pytest.mark.parametrize("acc", ACCOUNTANTS)
def test_astronomic_counts_gaussian_bracket(acc):
    """compose(Gaussian(1), 10**30): mu = 1e15-GDP; eps(1e-5) and delta(mu^2/2) (about 1/2)
    from the oracle lie in the certified brackets."""
    from tightdp.accountants.registry import make_accountant as make
    a = make(acc).compose(td.Gaussian(1.0), 10**30)
    r = _no_warnings(lambda: a.epsilon(1e-5))
    exact = oracle.gaussian_epsilon(1.0, 10**30, 1e-5)
    assert r.certified and r.lower <= exact <= r.upper <= exact * (1 + 1e-9)
    d = _no_warnings(lambda: a.delta(5e29))
    exact = oracle.gaussian_delta(1.0, 10**30, 5e29)
    assert d.lower <= exact <= d.upper and 0.4 < exact < 0.6


@pytest.mark.parametrize("acc", ("pld", "prv", "rdp", "fft", "spa"))
def test_astronomic_counts_subsampled_answer(acc):
    """Poisson-subsampled steps beyond 1e16: the RDP upper bound, certified, said in the note,
    finite, and at least the exact eps of one step (oracle; composition never lowers eps)."""
    r = _no_warnings(lambda: td.dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0,
                                              steps=10**30, delta=1e-5, accountant=acc))
    assert r.certified and r.lower is None and "count" in r.note
    assert oracle.subsampled_epsilon(0.01, 1.0, 1e-5) <= r.upper < math.inf
    d = _no_warnings(lambda: td.dpsgd_delta(sampling_rate=0.01, noise_multiplier=1.0,
                                            steps=10**30, epsilon=1.0, accountant=acc))
    assert d.certified and d.upper == 1.0


def test_refusal_naming_a_large_mixture_is_one_line():
    mech = td.MixtureOfGaussians(list(range(17)), [1 / 17] * 17, 1.0)
    with pytest.raises(ValueError) as e:
        td.RDPAccountant().compose(mech)
    assert "\n" not in str(e.value) and "17 components" in str(e.value)

