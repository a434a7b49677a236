"""``tightdp individual``: per-example eps from recorded bucket counts."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from .._defaults import DEFAULT_RTOL
from .common import (
    budget_kwargs,
    down,
    fail,
    format_table,
    integer,
    number,
    up,
)
from .options import (
    budget_options,
)


def _load_counts(a):
    """Per-example bucket counts and the DP-SGD setting: a NormRecorder directory (its
    setting, unless the options give one) or a ``.npy`` file (the options give it); the
    counts memory-mapped, never read whole."""

    import numpy as np

    path = a.counts
    setting = {"sampling_rate": a.sampling_rate, "noise_multiplier": a.noise_multiplier,
               "clip_norm": a.clip_norm}
    if os.path.isdir(path):
        from ..individual import NormRecorder

        rec = NormRecorder.open(path)
        for key in setting:
            if setting[key] is None:
                setting[key] = getattr(rec, key)
            elif setting[key] != getattr(rec, key):
                fail(f"--{key.replace('_', '-')} {setting[key]:g} differs from the recording's "
                      f"{getattr(rec, key):g} ({path})")
        return rec.counts, setting
    if not os.path.exists(path):
        fail(f"--counts {path!r} does not exist")
    if not path.endswith(".npy"):
        fail(f"--counts must be a NormRecorder directory or a .npy file of per-example bucket "
              f"counts, got {path!r}")
    for key in ("sampling_rate", "noise_multiplier"):
        if setting[key] is None:
            fail(f"--{key.replace('_', '-')} is required with a .npy --counts")
    if setting["clip_norm"] is None:
        setting["clip_norm"] = 1.0
    try:
        return np.load(path, mmap_mode="r"), setting
    except (OSError, ValueError) as err:
        fail(f"--counts {path!r} is not a readable .npy file: {err}")


def run(a) -> dict:
    from ..individual import IndividualPLDAccountant, IndividualSPAAccountant

    if a.workers is not None and a.scheduler is not None:
        fail("give --workers (a local cluster) or --scheduler (a running one), not both")
    counts, setting = _load_counts(a)
    kw = {**setting, "workers": a.workers, "scheduler": a.scheduler, "store": a.out}
    cls: type[IndividualPLDAccountant] | type[IndividualSPAAccountant]
    if a.method == "pld":
        kw.update(rtol=DEFAULT_RTOL if a.rtol is None else a.rtol, **budget_kwargs(a))
        if a.block_rows is not None:
            kw["block_rows"] = a.block_rows
        cls = IndividualPLDAccountant
    else:
        if a.rtol is not None:
            fail("--rtol applies to --method pld only")
        if a.block_rows is not None:
            kw["chunk_size"] = a.block_rows
        cls = IndividualSPAAccountant
    t0 = time.perf_counter()
    try:
        r = cls.from_counts(counts, **kw).epsilon(a.delta)
    except ImportError as err:
        fail(str(err))
    sec = time.perf_counter() - t0
    s = r.details["summary"]
    lower = r.lower
    worst = [{"index": w["index"], "epsilon": w["value"],
              "lower": None if lower is None else float(lower[w["index"]])} for w in s["worst"]]
    out = {"n_examples": s["count"], "delta": a.delta, "accountant": r.accountant,
           "certified": r.certified, "seconds": sec, "max": s["max"], "min": s["min"],
           "mean": s["mean"], "quantiles_upper": s["quantiles_upper"], "worst": worst,
           "converged": "converged" not in r.details or r.details["converged"], "out": a.out,
           "note": r.note}
    if not a.json:
        kind = ("certified upper bounds" if r.certified else
                "saddle-point approximations (NOT bounds; certified upper in upper.npy)")
        print(f"{s['count']} examples: per-example epsilon at delta={a.delta:g} ({kind}; "
              f"{r.accountant}, {sec:.1f} s)")
        print(format_table([[q, up(v)] for q, v in s["quantiles_upper"].items()],
                      ["quantile", "epsilon <= (histogram bin edge)"]))
        print(format_table([[w["index"], up(w["epsilon"]), down(w["lower"])] for w in worst],
                     ["worst example", "epsilon", "lower"]))
        if a.out:
            print(f"per-example arrays written to {a.out}")
        if r.note:
            print(f"note: {r.note}")
    return out


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``individual`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("individual", "per-example eps of DP-SGD from recorded bucket counts, in process "
                          "or on Dask (--workers / --scheduler)")
    s.add_argument("--counts", required=True,
                   help="a NormRecorder directory, or a .npy file: examples x (n_buckets + 1) "
                        "integer counts (column 0: steps without loss, column j: norm ratio "
                        "rounded up to j/n_buckets)")
    s.add_argument("--sampling-rate", type=number,
                   help="q in (0, 1] (default: the recording's)")
    s.add_argument("--noise-multiplier", type=number,
                   help="sigma > 0 (default: the recording's)")
    s.add_argument("--clip-norm", type=number,
                   help="C > 0 (the counts already hold ratios; default: the recording's, or 1)")
    s.add_argument("--delta", type=number, required=True, help="delta in [1e-9, 1)")
    s.add_argument("--method", default="pld", choices=["pld", "spa"],
                   help="pld: certified brackets (default); spa: saddle-point approximation")
    s.add_argument("--rtol", type=number,
                   help=f"relative bracket width per example (pld; default {DEFAULT_RTOL:g})")
    g = s.add_argument_group("where it runs")
    g.add_argument("--workers", type=integer, help="start a Dask LocalCluster of N worker "
                   "processes (needs tightdp[dask])")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="the address of a running Dask scheduler, e.g. tcp://host:8786")
    g.add_argument("--block-rows", type=integer, help="examples per block (task)")
    g.add_argument("--out", metavar="DIR",
                   help="write the per-example arrays there (epsilon.npy, lower.npy, ...)")
    budget_options(s)
    return {"individual": run}
