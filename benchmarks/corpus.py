"""The recorded corpus: answers that a change of structure must leave bit-identical.

A refactoring (a module split, one engine instead of two, keyword-only flags) changes no
number. This script records every answer of a fixed set of queries to a JSON file, every
float as its exact ``float.hex``, and compares a later run with it:

- ``spa``: 240 saddle-point queries (eps(delta), with lower/upper/estimate), a grid over
  sampling rate, noise, steps and delta;
- ``reference``: every accountant (pld, prv, rdp, fft, spa, gdp) on every vendored
  reference case of ``tests/data/reference_cases.json`` (an answer or the refusal's text);
- ``individual``: per-example PLD and SPA brackets on two generated workloads (the bits of
  every example's lower, upper and estimate, as a SHA-256 of the arrays);
- ``edges``: the quick edge battery of ``benchmarks/bench_edges.py`` and the far-edge
  reproducers (delta at the floor, vanishing noise, astronomic step counts).

Run::

    PYTHONPATH=src python benchmarks/corpus.py record corpus.json [--only spa,edges]
    PYTHONPATH=src python benchmarks/corpus.py compare corpus.json

``compare`` prints each query whose answer moved (old and new) and exits 1 if any did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import tightdp as td  # noqa: E402

ACCOUNTANTS = ("pld", "prv", "rdp", "fft", "spa", "gdp")


def _bits(x) -> object:
    """A value as exact, comparable JSON: floats as hex, arrays as a SHA-256 of their bytes
    (with shape), None and strings as themselves."""
    if x is None or isinstance(x, str | bool):
        return x
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 0:
        return float(arr).hex()
    return f"{arr.shape}:{hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()}"


def _answer(fn) -> dict:
    """Run ``fn`` (a query); its result's numbers as bits, or the refusal's (or the
    error's) text."""
    try:
        r = fn()
    except ValueError as e:
        return {"refused": str(e)}
    except Exception as e:  # noqa: BLE001 -- a defect, but recorded: it must not move either
        return {"error": f"{type(e).__name__}: {e}"}
    out = {}
    for f in ("epsilon", "delta", "lower", "upper", "estimate"):
        if hasattr(r, f):
            out[f] = _bits(getattr(r, f))
    out["certified"] = bool(getattr(r, "certified", False))
    return out


def spa_sweep() -> dict:
    """240 saddle-point eps(delta) queries."""
    out = {}
    for q in (1e-5, 1e-3, 1e-2, 0.1):
        for sigma in (0.5, 1.0, 2.0):
            for steps in (10, 1000, 10**5, 10**7):
                for delta in (1e-3, 1e-5, 1e-8, 1e-12, 1e-20):
                    key = f"q={q} s={sigma} T={steps} d={delta}"
                    acc = td.SaddlePointAccountant().compose(
                        td.PoissonSubsampled(td.Gaussian(sigma), q), steps)
                    out[key] = _answer(lambda acc=acc, delta=delta: acc.epsilon(delta))
    return out


def _make_accountant(name: str, relation: str):
    """A fresh accountant for a reference case's neighbouring relation."""
    cls = {"pld": td.PLDAccountant, "prv": td.PRVAccountant, "rdp": td.RDPAccountant,
           "fft": td.FFTAccountant, "spa": td.SaddlePointAccountant,
           "gdp": td.GDPAccountant}[name]
    if relation in ("any", "add_remove") or "neighboring" not in \
            cls.__init__.__code__.co_varnames:
        return cls()
    return cls(neighboring=relation)


def reference() -> dict:
    """Every accountant on every vendored reference case."""
    from conftest import load_cases, mechanism_of

    out = {}
    for case in load_cases():
        terms, relation = mechanism_of(case["mechanism"])
        query = case["query"]
        for name in ACCOUNTANTS:
            def run(name=name, terms=terms, relation=relation, query=query):
                acc = _make_accountant(name, relation)
                for m, k in terms:
                    acc.compose(m, k)
                if query["type"] == "eps_at_delta":
                    return acc.epsilon(query["delta"])
                return acc.delta(query["eps"])
            out[f"{case['id']} {name}"] = _answer(run)
    return out


def _counts(seed: int, n: int, buckets: int, steps: int) -> np.ndarray:
    """A generated per-example bucket-count table: column 0 the steps without loss."""
    rng = np.random.default_rng(seed)
    lossy = rng.integers(0, steps + 1, n)
    probs = rng.dirichlet(np.ones(buckets), n)
    counts = np.zeros((n, buckets + 1), dtype=np.int64)
    for i in range(n):
        counts[i, 1:] = rng.multinomial(lossy[i], probs[i])
    counts[:, 0] = steps - counts[:, 1:].sum(axis=1)
    return counts


def individual() -> dict:
    """Per-example PLD and SPA brackets on two generated workloads."""
    from tightdp.individual import IndividualPLDAccountant, IndividualSPAAccountant

    out = {}
    work = [("w1", 0, 2000, 32, 1000, 0.01, 1.0, 1e-5), ("w2", 1, 1000, 64, 3000, 0.05, 2.0,
                                                          1e-6)]
    for name, seed, n, buckets, steps, q, sigma, delta in work:
        counts = _counts(seed, n, buckets, steps)
        for label, cls in (("pld", IndividualPLDAccountant), ("spa", IndividualSPAAccountant)):
            acc = cls.from_counts(counts, sampling_rate=q, noise_multiplier=sigma,
                                  clip_norm=1.0)
            out[f"{name} {label}"] = _answer(lambda acc=acc, delta=delta: acc.epsilon(delta))
    return out


def edges() -> dict:
    """The quick edge battery and the far-edge reproducers, in process."""
    from bench_edges import QUICK

    out = {}
    mechs = {"gauss": lambda a: td.Gaussian(a[1]),
             "sub": lambda a: td.PoissonSubsampled(td.Gaussian(a[2]), a[1]),
             "laplace": lambda a: td.Laplace(a[1])}
    far = [("F gauss s=1 d=1e-300", ("gauss", 1.0), 1, "epsilon", 1e-300, {}),
           ("F sub q=.01 s=1 d=1e-300", ("sub", 0.01, 1.0), 1, "epsilon", 1e-300, {}),
           ("F sub q=.01 s=1e-100 T=10", ("sub", 0.01, 1e-100), 10, "epsilon", 1e-5, {}),
           ("F gauss s=1 T=1e30", ("gauss", 1.0), 10**30, "epsilon", 1e-5, {}),
           ("F gauss s=1 delta(1e6)", ("gauss", 1.0), 1, "delta", 1e6, {})]
    for name, mech, steps, kind, arg, _opts in QUICK + far:
        for acc_name in ACCOUNTANTS:
            def run(acc_name=acc_name, mech=mech, steps=steps, kind=kind, arg=arg):
                acc = _make_accountant(acc_name, "add_remove")
                acc.compose(mechs[mech[0]](mech), steps)
                return acc.epsilon(arg) if kind == "epsilon" else acc.delta(arg)
            out[f"{name} {acc_name}"] = _answer(run)
    return out


PARTS = {"spa": spa_sweep, "reference": reference, "individual": individual, "edges": edges}


def record(parts: list[str]) -> dict:
    data = {}
    for p in parts:
        t0 = time.perf_counter()
        data[p] = PARTS[p]()
        print(f"{p}: {len(data[p])} queries in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    return data


def compare(old: dict, new: dict) -> int:
    moved = 0
    for part, answers in old.items():
        for key, was in answers.items():
            now = new.get(part, {}).get(key)
            if now != was:
                moved += 1
                print(f"{part} | {key}\n  was {was}\n  now {now}")
    total = sum(len(a) for a in old.values())
    print(f"{moved} of {total} answers moved")
    return 1 if moved else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("record", "compare"))
    ap.add_argument("path")
    ap.add_argument("--only", help="comma-separated parts: " + ",".join(PARTS))
    a = ap.parse_args(argv)
    td.set_progress(False)
    if a.mode == "record":
        parts = a.only.split(",") if a.only else list(PARTS)
        Path(a.path).write_text(json.dumps(record(parts), indent=0, sort_keys=True))
        return 0
    old = json.loads(Path(a.path).read_text())
    parts = a.only.split(",") if a.only else list(old)
    return compare({p: old[p] for p in parts}, record(parts))


if __name__ == "__main__":
    raise SystemExit(main())
