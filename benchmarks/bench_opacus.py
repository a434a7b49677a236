"""Benchmark: accounting inside an Opacus training run (issue 16).

A 100-epoch DP-SGD run (q = 0.01, sigma = 1, 10^4 steps in all) asks its accountant for
epsilon at delta = 1e-5 once per epoch, as a training loop that logs epsilon does. The same
history is fed to tightdp's ``TightAccountant`` and to Opacus' own RDP and PRV accountants in
one process; the table gives the total accounting time, the final epsilon, and the issue's
limit for ours (5% of the peer's time plus 2 s).

A second table: a per-step noise schedule (1000 steps, sigma falling linearly from 1.5 to
0.8, q = 0.01: 1000 distinct mechanisms), one ``get_epsilon`` at delta = 1e-5 after
``step(noise_multiplier=...)`` as Opacus' noise schedulers call it; Opacus' PRV (minutes)
with ``--with-prv``.

Run: ``python benchmarks/bench_opacus.py`` (needs the ``[opacus]`` extra: torch 2.13.0 first).
"""

from __future__ import annotations

import sys
import time

Q, SIGMA, STEPS, EPOCHS, DELTA = 0.01, 1.0, 10_000, 100, 1e-5


def run(make) -> tuple[float, float]:
    """Total seconds of the per-epoch epsilon queries, and the final epsilon."""
    acc = make()
    per_epoch = STEPS // EPOCHS
    seconds, eps = 0.0, float("nan")
    for _ in range(EPOCHS):
        for _ in range(per_epoch):
            acc.step(noise_multiplier=SIGMA, sample_rate=Q)
        t0 = time.perf_counter()
        eps = float(acc.get_epsilon(DELTA))
        seconds += time.perf_counter() - t0
    return seconds, eps


def schedule(make) -> tuple[float, float]:
    """Seconds of one epsilon query after the noise schedule, and the epsilon."""
    acc = make()
    for i in range(1000):
        acc.step(noise_multiplier=1.5 - 0.7 * i / 999, sample_rate=Q)
    t0 = time.perf_counter()
    eps = float(acc.get_epsilon(DELTA))
    return time.perf_counter() - t0, eps


def main() -> None:
    from opacus.accountants import PRVAccountant, RDPAccountant

    from tightdp.integrations.opacus import TightAccountant

    rows = [("tightdp TightAccountant", TightAccountant), ("opacus RDP", RDPAccountant),
            ("opacus PRV", PRVAccountant)]
    out = {name: run(make) for name, make in rows}
    ours = out["tightdp TightAccountant"][0]
    print(f"{EPOCHS} epochs, q={Q}, sigma={SIGMA}, {STEPS} steps, epsilon at delta={DELTA} "
          "after every epoch")
    print("| accountant | total accounting s | final epsilon | our limit (5% + 2 s) | ours ok |")
    print("|---|---|---|---|---|")
    for name, (sec, eps) in out.items():
        if name.startswith("tightdp"):
            print(f"| {name} | {sec:.2f} | {eps:.6f} | - | - |")
        else:
            limit = 0.05 * sec + 2.0
            print(f"| {name} | {sec:.2f} | {eps:.6f} | {limit:.2f} | "
                  f"{'yes' if ours <= limit else 'NO'} |")
    print()
    print("noise schedule: 1000 steps, sigma 1.5 -> 0.8 linearly, q=0.01, one epsilon at "
          f"delta={DELTA}")
    print("| accountant | seconds | epsilon | time / ours |")
    print("|---|---|---|---|")
    if "--with-prv" not in sys.argv:
        rows = rows[:2]
    sched = {name: schedule(make) for name, make in rows}
    base = sched["tightdp TightAccountant"][0]
    for name, (sec, eps) in sched.items():
        print(f"| {name} | {sec:.2f} | {eps:.6f} | {sec / base:.1f} |")


if __name__ == "__main__":
    main()
