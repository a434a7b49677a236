"""Benchmark: per-example epsilon past one process (issue 18) -- N examples x T steps on a Dask
LocalCluster of W single-threaded worker processes, against the same query in process.

Workload: DP-SGD with q = 0.01, sigma = 1, C = 1, delta = 1e-5 and the gradient-norm model of
``bench_individual.py`` (per example a log-normal scale times an exponential per step). Drawing
N x T norms for N = 1e7 would take longer than the accounting, so ``P`` distinct example
profiles are recorded for real (T steps each) and every example is one of them, drawn at
random: the accountants never share work between equal rows, so the cost per example is the
same as for N distinct examples. The counts are written to a ``.npy`` file that the workers
read by path, block by block (as they would a :class:`~tightdp.individual.NormRecorder`'s).

Printed: wall time, examples per second per core (``N / (wall * cores)``), the workers' peak
memory, for the certified PLD method and the saddle-point approximation, in process (one
core) and on the cluster; the two answers are compared (max relative difference). Then the
cost of recording a step at N with :class:`~tightdp.individual.NormRecorder` (if present) or
the in-memory history.

Run::

    python benchmarks/bench_scale.py [N] [T] [--workers W] [--in-process-n M] [--method ...]

``--in-process-n`` runs the in-process comparison on the first M examples only (default: all
N); the throughput per core and those examples' answers compare.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from tightdp import IndividualPLDAccountant, IndividualSPAAccountant
from tightdp.individual import NormHistory

SETTING = {"sampling_rate": 0.01, "noise_multiplier": 1.0, "clip_norm": 1.0}
DELTA = 1e-5


def make_counts(n: int, t: int, profiles: int, path: str) -> np.ndarray:
    """``n`` examples drawn from ``profiles`` recorded examples (T steps each), saved to
    ``path`` as uint16 and returned memory-mapped."""
    rng = np.random.default_rng(0)
    h = NormHistory(**SETTING, n_examples=profiles)
    scale = rng.lognormal(-0.5, 0.6, profiles)
    for _ in range(t):
        h.step(scale * rng.exponential(1.0, profiles))
    prof = h.counts.astype(np.uint16)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16, shape=(n, prof.shape[1]))
    step = 1_000_000
    for a in range(0, n, step):
        out[a:a + step] = prof[rng.integers(0, profiles, min(step, n - a))]
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def run(cls, counts, **kw):
    t0 = time.perf_counter()
    r = cls.from_counts(counts, **SETTING, progress=False, **kw).epsilon(DELTA)
    return r, time.perf_counter() - t0


def recording_cost(n: int, steps: int = 20) -> tuple[str, float, float]:
    """Seconds per recorded step at ``n`` examples, and the process's peak memory (MB)."""
    import resource

    rng = np.random.default_rng(1)
    g = rng.exponential(1.0, n)
    try:
        from tightdp.individual import NormRecorder
    except ImportError:
        NormRecorder = None
    with tempfile.TemporaryDirectory() as d:
        if NormRecorder is not None:
            rec = NormRecorder.create(os.path.join(d, "rec"), **SETTING, n_examples=n)
            what = "NormRecorder (on disk)"
        else:
            rec = NormHistory(**SETTING, n_examples=n)
            what = "NormHistory (in memory)"
        t0 = time.perf_counter()
        for _ in range(steps):
            rec.step(g)
        _ = rec.counts
        sec = (time.perf_counter() - t0) / steps
    return what, sec, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", nargs="?", type=float, default=1e7)
    ap.add_argument("t", nargs="?", type=float, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--profiles", type=int, default=20_000)
    ap.add_argument("--block-rows", type=int, default=None)
    ap.add_argument("--in-process-n", type=float, default=None)
    ap.add_argument("--method", choices=("pld", "spa", "both"), default="both")
    ap.add_argument("--skip-recording", action="store_true")
    a = ap.parse_args()
    n, t, w = int(a.n), int(a.t), a.workers
    m = n if a.in_process_n is None else int(a.in_process_n)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        counts = make_counts(n, t, min(a.profiles, n), os.path.join(d, "counts.npy"))
        print(f"N={n:.3g} T={t} q={SETTING['sampling_rate']} sigma="
              f"{SETTING['noise_multiplier']} delta={DELTA}: counts {counts.nbytes / 1e9:.2f} "
              f"GB on disk, made in {time.perf_counter() - t0:.1f} s")
        rows = []
        methods = ("pld", "spa") if a.method == "both" else (a.method,)
        for name in methods:
            cls = IndividualPLDAccountant if name == "pld" else IndividualSPAAccountant
            extra = {}
            if a.block_rows:
                extra = ({"block_rows": a.block_rows} if name == "pld"
                         else {"chunk_size": a.block_rows})
            r_d, s_d = run(cls, counts, workers=w, **extra)
            mem = max(r_d.details["worker_peak_memory"].values()) / 1e6
            rows.append((name, f"Dask, {w} workers", n, s_d, n / (s_d * w), f"{mem:.0f}"))
            sub = counts if m == n else np.asarray(counts[:m])
            r_l, s_l = run(cls, sub, **extra)
            rows.append((name, "in process", m, s_l, m / s_l, "-"))
            # an example's numbers depend on its own counts only (the same across blocks and
            # chunks: tests/test_individual*.py), so a prefix compares as well as the whole
            a_d, a_l = np.asarray(r_d.epsilon[:m]), np.asarray(r_l.epsilon)
            diff = float(np.max(np.abs(a_d - a_l) / np.maximum(a_l, 1e-300)))
            print(f"[{name}] cluster vs in process, max relative difference: {diff:.2e}"
                  + ("" if m == n else f" (the first {m:.3g} examples)"))
            if "add_direction_settled" in r_d.details:
                print(f"[{name}] add direction settled by its refined-moments bound: "
                      f"{r_d.details['add_direction_settled']} of {n} examples")
            print(f"[{name}] summary quantiles (upper edges): "
                  f"{r_d.details['summary']['quantiles_upper']}")
        print(f"\n{'method':7s} {'where':16s} {'N':>10s} {'wall s':>8s} {'ex/s/core':>10s} "
              f"{'peak MB/worker':>15s}")
        for name, where, nn, sec, thr, mem in rows:
            print(f"{name:7s} {where:16s} {nn:10.3g} {sec:8.1f} {thr:10.3g} {mem:>15s}")
    if not a.skip_recording:
        what, sec, peak = recording_cost(n)
        print(f"\nrecording at N={n:.3g}: {what}: {sec * 1e3:.0f} ms per step, process peak "
              f"{peak:.0f} MB")


if __name__ == "__main__":
    main()
