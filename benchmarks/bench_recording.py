"""Benchmark: recording per-example gradient norms (issue 18, item 1).

Per-step cost and peak memory of

* ``history-old``: the in-memory flush before issue 18 (bincounts of 8 steps over the whole
  ``N x (B + 1)`` array, reproduced here as the baseline), on a buffer of 64 steps;
* ``history``: :class:`~tightdp.individual.NormHistory` (bucketing + the O(N) flush of
  :func:`~tightdp.individual.history.add_steps`), where its ``N x (B + 1)`` int64 counts fit;
* ``recorder``: :class:`~tightdp.individual.recording.NormRecorder` on disk (a directory
  under ``--dir``, removed afterwards): ``step ms`` is the median step (bucketing, appending
  to the step log, fsync, committing the metadata), ``flush ms`` the flushes of the log into
  the counts, per step (the steps that flush, less the median step), ``total ms`` all of it.

Each case runs in its own process; ``peak MB`` is tracemalloc's peak (numpy reports its
buffers) while recording, ``RSS MB`` the process's peak resident size less its size before
(memory-mapped file pages that were touched count there). B = 100 buckets, uint32 counts for
the recorder, ``buffer_steps = 64``. Run::

    python benchmarks/bench_recording.py [--sizes 1e6 1e7] [--steps 128] [--chunk 1e6]
                                         [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np

from tightdp.individual import NormHistory
from tightdp.individual.history import add_steps, bucket_index, sensitivity_grid
from tightdp.individual.recording import NormRecorder

B = 100
SETTING = {"sampling_rate": 0.01, "noise_multiplier": 1.0, "clip_norm": 1.0}


def _norms(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).exponential(0.5, size=n)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def _old_flush(counts: np.ndarray, buf: np.ndarray) -> None:
    """The flush before issue 18: per 8 steps one bincount of length N x (B + 1)."""
    n, nb = counts.shape
    base = np.arange(n) * nb
    for s in range(0, buf.shape[0], 8):
        flat = (base[None, :] + buf[s:s + 8]).ravel()
        counts += np.bincount(flat, minlength=n * nb).reshape(n, nb)


def case_flush(n: int, new: bool) -> dict:
    """Flush-only cost of 64 buffered steps, old bincount vs add_steps (int64 counts)."""
    grid = sensitivity_grid(B)
    buf = np.stack([bucket_index(_norms(n, s), grid).astype(np.uint8) for s in range(64)])
    counts = np.zeros((n, B + 1), dtype=np.int64)
    counts.fill(0)  # touch the pages: time the counting, not the kernel's zeroing
    rss0 = _rss_mb()
    tracemalloc.start()
    t = time.perf_counter()
    (add_steps if new else _old_flush)(counts, buf)
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"flush_ms": dt / 64 * 1e3, "peak_mb": peak / 1e6, "rss_mb": _rss_mb() - rss0}


def case_history(n: int, steps: int) -> dict:
    """NormHistory end to end (the counts are N x 101 int64)."""
    g = _norms(n, 0)
    rss0 = _rss_mb()
    tracemalloc.start()
    h = NormHistory(**SETTING, n_examples=n, n_buckets=B)
    t = time.perf_counter()
    for _ in range(steps):
        h.step(g)
    h.counts  # noqa: B018 - flushes the rest
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"step_ms": dt / steps * 1e3, "peak_mb": peak / 1e6, "rss_mb": _rss_mb() - rss0}


def case_recorder(n: int, steps: int, chunk: int, where: str) -> dict:
    """NormRecorder on disk. The flush runs inside the step that fills the buffer: its cost
    is that step's time less the median time of the other steps."""
    g = _norms(n, 0)
    d = tempfile.mkdtemp(dir=where)
    try:
        rss0 = _rss_mb()
        tracemalloc.start()
        rec = NormRecorder.create(os.path.join(d, "rec"), **SETTING, n_examples=n, n_buckets=B,
                                  chunk_size=chunk)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            rec.step(g)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        rec.counts  # noqa: B018 - flushes the rest
        last = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss = _rss_mb() - rss0
        size = sum(os.path.getsize(os.path.join(d, "rec", f))
                   for f in os.listdir(os.path.join(d, "rec")))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    times = np.array(times)
    flushing = np.arange(1, steps + 1) % rec.buffer_steps == 0
    step = float(np.median(times[~flushing]))
    flush = float(np.sum(times[flushing] - step)) + last
    return {"step_ms": step * 1e3, "flush_ms": flush / steps * 1e3,
            "total_ms": (times.sum() + last) / steps * 1e3, "peak_mb": peak / 1e6,
            "rss_mb": rss, "disk_gb": size / 1e9}


def _run(case: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", *case], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--chunk", type=float, default=1e6)
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--history-max", type=float, default=2e6,
                   help="largest N run in memory (its counts are N x 101 x 8 bytes)")
    p.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.case:
        kind, n = a.case[0], int(float(a.case[1]))
        if kind in ("flush-old", "flush-new"):
            res = case_flush(n, kind == "flush-new")
        elif kind == "history":
            res = case_history(n, a.steps)
        else:
            res = case_recorder(n, a.steps, int(a.chunk), a.dir)
        print(json.dumps(res))
        return
    print(f"B = {B}, {a.steps} steps, buffer 64, recorder chunk {int(a.chunk)}, dir {a.dir}")
    print(f"{'case':<13}{'N':>8}{'step ms':>10}{'flush ms':>10}{'total ms':>10}"
          f"{'peak MB':>10}{'RSS MB':>9}{'disk GB':>9}")
    for n in a.sizes:
        rows = []
        if n <= a.history_max:
            for kind in ("flush-old", "flush-new"):
                r = _run([kind, str(n)])
                rows.append((kind, None, r["flush_ms"], None, r))
            r = _run(["history", str(n), "--steps", str(a.steps)])
            rows.append(("history", None, None, r["step_ms"], r))
        r = _run(["recorder", str(n), "--steps", str(a.steps), "--chunk", str(a.chunk),
                  "--dir", a.dir])
        rows.append(("recorder", r["step_ms"], r["flush_ms"], r["total_ms"], r))
        for kind, step, flush, total, r in rows:
            def f(x):
                return f"{x:10.1f}" if x is not None else f"{'':>10}"
            disk = f"{r['disk_gb']:9.2f}" if "disk_gb" in r else f"{'':>9}"
            print(f"{kind:<13}{int(n):>8.0e}{f(step)}{f(flush)}{f(total)}"
                  f"{r['peak_mb']:10.1f}{r['rss_mb']:9.0f}{disk}", flush=True)


if __name__ == "__main__":
    main()
