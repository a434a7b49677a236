"""Benchmark: individual eps of DP-SGD (Koskela, Tobaben, Honkela, Sec. 5 / App. D).

N examples x T steps, q = 0.01, sigma = 1, C = 1, delta = 1e-5 (the issue's workload: N = 1e5,
T = 1000, target <= 30 s). Gradient norms are synthetic: per example a log-normal scale times
an exponential per step, so that some examples are clipped at most steps and others rarely.

Run: ``python benchmarks/bench_individual.py [N] [T]``. The time reported is that of
``IndividualPLDAccountant.epsilons`` (grid-step choice, discretizations, FFTs and the
per-example Plancherel evaluation); recording the norms is timed separately.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from tightdp import Gaussian, PLDAccountant, PoissonSubsampled
from tightdp.individual import IndividualPLDAccountant


def main(n: int = 100_000, t: int = 1000) -> None:
    q, sigma, clip, delta = 0.01, 1.0, 1.0, 1e-5
    rng = np.random.default_rng(0)
    acc = IndividualPLDAccountant(q, sigma, clip, n, progress=True)
    scale = rng.lognormal(-0.5, 0.6, n)
    t0 = time.perf_counter()
    for _ in range(t):
        acc.step(scale * rng.exponential(1.0, n))
    t_rec = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    eps = acc.epsilons(delta)
    t_eps, c_eps = time.perf_counter() - t0, time.process_time() - c0
    worst = PLDAccountant().compose(PoissonSubsampled(Gaussian(sigma), q), t).epsilon(delta)
    print(f"N={n} T={t} q={q} sigma={sigma} delta={delta}")
    print(f"recording norms: {t_rec:.1f} s; individual eps: {t_eps:.1f} s wall, "
          f"{c_eps:.1f} s CPU (all threads of this process)")
    print(f"details: {acc.details}")
    pct = np.percentile(eps, [0, 10, 50, 90, 100])
    print("eps percentiles 0/10/50/90/100: " + " ".join(f"{x:.4f}" for x in pct))
    print(f"worst-case eps (certified bracket): [{worst.lower:.4f}, {worst.upper:.4f}]")
    assert eps.max() <= worst.upper * (1 + 5e-3)


if __name__ == "__main__":
    args = [int(float(a)) for a in sys.argv[1:3]]
    main(*args)
