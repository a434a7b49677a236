"""Benchmark: the certified PLD accountant against dp_accounting's PLD (issue 17).

Workloads, each queried cold (a fresh mechanism and accountant per repetition; the time is
the median over the repetitions, CPU time of this process, which the other jobs of a shared
machine disturb less than wall time):

* **W1**: DP-SGD, Poisson-subsampled Gaussian, q = 0.01, sigma = 1, 10^4 steps,
  ``epsilon(1e-5)``. Ours at rtol 1e-3 and 1e-4 (certified brackets) against
  ``dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)`` (its pessimistic
  connect-the-dots estimate: an upper bound only) composing
  ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), 10^4)``.
  Targets: rtol 1e-3 at least 3x faster than dp_accounting; rtol 1e-4 faster than it.
* **tiny q**: q = 1e-5, sigma = 0.5, 10^6 steps: ``epsilon(1e-5)`` and ``delta(1.0)``, against
  dp_accounting at its default interval 1e-4. Target: at most 2 s and 500 MB.

Columns: lower / upper bound (dp_accounting reports one number, its pessimistic estimate),
time, the speed-up against dp_accounting on the same workload, the peak memory of one query
(tracemalloc, a separate untimed run), the length of the final composed grid and the "FFT
ratio": the query's time divided by that of one real FFT and its inverse
(``scipy.fft.rfft``/``irfft``) at that length, the distance to the physical limit (aim: 3).

Run: ``python benchmarks/bench_pld.py [--reps N] [--no-tiny]``.
"""

from __future__ import annotations

import sys
import time
import tracemalloc

import numpy as np
from bench_prv import timed  # the one timing helper of the benchmarks
from scipy import fft as sfft

from tightdp import Gaussian, PLDAccountant, PoissonSubsampled


def ours(q: float, sigma: float, steps: int, kind: str, x: float, rtol: float):
    acc = PLDAccountant(rtol).compose(PoissonSubsampled(Gaussian(sigma), q), steps)
    r = acc.epsilon(x) if kind == "epsilon" else acc.delta(x)
    return r.lower, r.upper, r.details.get("fft_points")


def peer(q: float, sigma: float, steps: int, kind: str, x: float, interval: float):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(event, steps))
    val = acc.get_epsilon(x) if kind == "epsilon" else acc.get_delta(x)
    return None, val, None


def cpu_median(fn, reps: int, *args):
    """``(fn(*args), median CPU time over reps)``."""
    return timed(fn, reps, *args, clock=time.process_time)


def peak_mb(fn, *args) -> float:
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def fft_seconds(n: int, reps: int = 20) -> float:
    """Median time of one rfft and its inverse at ``scipy.fft.next_fast_len(n)``."""
    n = sfft.next_fast_len(n, real=True)
    x = np.random.default_rng(0).random(n)
    return cpu_median(lambda: sfft.irfft(sfft.rfft(x), n=n), reps)[1]


def fmt(x) -> str:
    return "-" if x is None else f"{x:.8g}"


def main(argv: list[str]) -> None:
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 7
    rows = [("W1 eps(1e-5)", (0.01, 1.0, 10_000, "epsilon", 1e-5), 1e-3, reps)]
    if "--no-tiny" not in argv:
        rows += [("tiny q eps(1e-5)", (1e-5, 0.5, 1_000_000, "epsilon", 1e-5), 1e-4, 1),
                 ("tiny q delta(1)", (1e-5, 0.5, 1_000_000, "delta", 1.0), 1e-4, 1)]
    print(f"### Certified PLD accountant vs dp_accounting (CPU time, median of {reps} cold "
          "runs; tiny q: 1 run)\n")
    print("| workload | accountant | lower | upper | time [ms] | vs dp_accounting | "
          "peak [MB] | FFT points | FFT ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, args, interval, n in rows:
        theirs = measure_peer(args, interval, n)
        t_peer = theirs[1] if theirs else float("nan")
        for rtol in (1e-3, 1e-4):
            (low, up, pts), t = cpu_median(ours, n, *args, rtol)
            ratio = f"{t / fft_seconds(pts):.1f}" if pts else "-"
            cells = [name, f"tightdp rtol={rtol:g}", fmt(low), fmt(up), f"{t * 1e3:.1f}",
                     f"{t_peer / t:.2f}x", f"{peak_mb(ours, *args, rtol):.0f}", str(pts or "-"),
                     ratio]
            print("| " + " | ".join(cells) + " |")
        if theirs:
            cells = [name, f"dp_accounting {interval:g} (pessimistic)", "-", fmt(theirs[0]),
                     f"{theirs[1] * 1e3:.1f}", "1.00x", f"{theirs[2]:.0f}", "-", "-"]
            print("| " + " | ".join(cells) + " |")


def measure_peer(args: tuple, interval: float, n: int) -> tuple | None:
    """dp_accounting's (value, CPU time, peak MB), or None if it is not installed."""
    try:
        (_, val, _), t = cpu_median(peer, n, *args, interval)
    except ImportError:
        return None
    return val, t, peak_mb(peer, *args, interval)

if __name__ == "__main__":
    main(sys.argv[1:])
