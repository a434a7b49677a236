"""Benchmark: a sweep of DP-SGD settings in-process vs on a Dask LocalCluster.

The grid: 5 sampling rates (0.001 .. 0.05) x 5 noise multipliers (0.6 .. 2) x 4 step counts
(100 .. 10^4) x 2 deltas x 5 accountants (pld, rdp, prv, spa, gdp) = 1000 settings, eps at
delta for each (``tightdp.sweep``, query "epsilon", default options).

Measured, in-process (one process) and on ``--workers`` single-threaded worker processes --
the LocalCluster of ``sweep(workers=N)`` (:func:`tightdp.sweep.local_cluster`) with the
default batching and with one row per task, and a LocalCluster with Dask's default worker
environment (``MALLOC_TRIM_THRESHOLD_=65536``, which the sweep's own cluster leaves out):
wall time and settings per second; CPU seconds used (this process in-process, the workers'
sum on Dask), whose ratio to the settings is the throughput per core even on a shared CPU;
whether the Dask table equals the in-process one (the ``seconds`` column aside); the peak
resident memory (VmHWM, Linux) of each worker (restarted before each run, so each figure is
that run's). Prints a markdown table. Single runs on a shared CPU: indicative figures.

``python benchmarks/bench_sweep.py [--n 1000] [--workers 2] [--memory-limit 1.5GB]``
"""

from __future__ import annotations

import argparse
import resource
import time

from tightdp import sweep
from tightdp.sweep import MAX_BATCH, local_cluster

GRID = {"accountant": ["pld", "rdp", "prv", "spa", "gdp"],
        "sampling_rate": [0.001, 0.004, 0.01, 0.02, 0.05],
        "noise_multiplier": [0.6, 0.8, 1.0, 1.5, 2.0], "steps": [100, 1000, 5000, 10000],
        "delta": [1e-5, 1e-6]}


def rows(n: int) -> list[dict]:
    """``n`` settings of the grid, taken at even strides over it (all of it for n = 1000)."""
    from itertools import product

    every = [dict(zip(GRID, combo, strict=True)) for combo in product(*GRID.values())]
    step = max(1, len(every) // n)
    return every[::step][:n]


def peak_mb() -> float:
    """Peak resident memory of this process (VmHWM, MB; Linux). Not ``ru_maxrss``: a worker
    started by a nanny in the client's process inherits the client's peak in it."""
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024


def cpu_seconds() -> float:
    """CPU time (user + system) this process has used."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def same(a, b) -> bool:
    strip = [[{k: x for k, x in r.items() if k != "seconds"} for r in t] for t in (a, b)]
    return strip[0] == strip[1]


def cheap_rows(n: int) -> list[dict]:
    """``n`` GDP rows at sampling rate 1 (closed form, well under a millisecond each): what
    the per-task cost of Dask weighs against."""
    return [{"accountant": "gdp", "sampling_rate": 1.0, "noise_multiplier": 0.5 + i / n,
             "steps": 100, "delta": 1e-5} for i in range(n)]


def in_process(grid) -> tuple:
    t, c = time.perf_counter(), cpu_seconds()
    ref = sweep(grid, progress=False)
    return ref, time.perf_counter() - t, cpu_seconds() - c


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1.5GB")
    a = ap.parse_args(argv)
    grids = {"mixed": rows(a.n), "cheap GDP": cheap_rows(a.n)}
    refs = {k: in_process(g) for k, g in grids.items()}
    print(f"{a.n} settings per grid; {len(refs['mixed'][0].errors)} refused rows in the mixed "
          "grid (kept with their error)\n")
    print("| grid | where | batch (rows/task) | tasks | wall s | settings/s | CPU s | settings "
          "per CPU s | equal to in-process | peak RSS per worker (MB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, (_, sec, cpu) in refs.items():
        print(f"| {k} | in-process | - | - | {sec:.1f} | {a.n / sec:.1f} | {cpu:.1f} | "
              f"{a.n / cpu:.1f} | - | {peak_mb():.0f} (this process) |")

    from distributed import Client, LocalCluster

    def on(client, name: str, key: str, batch: int | None) -> None:
        grid, ref = grids[key], refs[key][0]
        client.restart()  # fresh workers: each run's own peak memory
        size = batch or max(1, min(MAX_BATCH, a.n // (4 * a.workers)))  # sweep's default
        c0 = sum(client.run(cpu_seconds).values())  # the fresh workers' start-up
        t = time.perf_counter()
        table = sweep(grid, client=client, batch=batch, progress=False)
        sec = time.perf_counter() - t
        cpu = sum(client.run(cpu_seconds).values()) - c0
        peaks = client.run(peak_mb)
        print(f"| {key} | {name} | {size} | {-(-a.n // size)} | {sec:.1f} | {a.n / sec:.1f} | "
              f"{cpu:.1f} | {a.n / cpu:.1f} | {'yes' if same(table, ref) else 'NO'} | "
              f"{', '.join(f'{p:.0f}' for p in sorted(peaks.values()))} |")

    # sweep(workers=N)'s cluster first: a cluster with Dask's defaults writes
    # MALLOC_TRIM_THRESHOLD_ into this process's environment, and later workers inherit it
    t = time.perf_counter()
    cluster = local_cluster(a.workers, memory_limit=a.memory_limit)
    start = time.perf_counter() - t
    name = f"Dask, {a.workers} workers (sweep's LocalCluster)"
    with cluster, Client(cluster) as client:
        for key in grids:
            for batch in (None, 1):
                on(client, name, key, batch)
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", memory_limit=a.memory_limit) as cluster, \
            Client(cluster) as client:
        on(client, f"Dask, {a.workers} workers, Dask's default MALLOC_TRIM_THRESHOLD_",
           "mixed", None)
    print(f"\nLocalCluster start: {start:.1f} s (not in the times above); sum of the mixed "
          f"rows' own seconds in-process: {sum(r['seconds'] for r in refs['mixed'][0]):.1f} s")


if __name__ == "__main__":
    main()
