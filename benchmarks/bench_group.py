"""Benchmark: group-level DP-SGD eps (Ganesh, Sec. 4 setting) -- tightdp vs dp_accounting.

eps at delta = 1e-6 for T = 2000 rounds of Poisson-sampled DP-SGD (q = 0.01, sigma = 1) for a
group of k examples, i.e. 2000 compositions of the mixture of Gaussians with sensitivity
Binomial(k, q). tightdp: ``group_epsilon(..., rtol=1e-3, baselines=False)`` (certified
bracket). dp_accounting: ``from_mixture_gaussian_mechanism`` (connect-the-dots, pessimistic),
``self_compose(T)``, ``get_epsilon_for_delta``, at two discretization intervals. Prints a
markdown table. Single runs (the CPU is shared): times are indicative.

``python benchmarks/bench_group.py [--ks 16] [--skip-peer]``
"""

from __future__ import annotations

import argparse
import time

from tightdp import group_epsilon
from tightdp.dpsgd.group import sensitivity_distribution

T, Q, SIGMA, DELTA = 2000, 0.01, 1.0, 1e-6


def ours(k: int, rtol: float) -> tuple[str, float, float, float]:
    t = time.perf_counter()
    r = group_epsilon(group_size=k, noise_multiplier=SIGMA, steps=T, delta=DELTA,
                      sampling_rate=Q, rtol=rtol, baselines=False)
    return f"tightdp PLD (rtol={rtol:g})", r.lower, r.upper, time.perf_counter() - t


def peer(k: int, interval: float) -> tuple[str, float, float, float]:
    from dp_accounting.pld import privacy_loss_distribution as pldlib
    c, p = sensitivity_distribution(k, sampling="poisson", sampling_rate=Q)
    t = time.perf_counter()
    pld = pldlib.from_mixture_gaussian_mechanism(SIGMA, c.tolist(), p.tolist(),
                                                 value_discretization_interval=interval)
    e = pld.self_compose(T).get_epsilon_for_delta(DELTA)
    return f"dp_accounting MoG PLD (interval={interval:g})", float("nan"), e, \
        time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", type=int, nargs="+", default=[16])
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--skip-peer", action="store_true")
    a = ap.parse_args(argv)
    print(f"T={T}, q={Q}, sigma={SIGMA}, delta={DELTA:g}\n")
    print("| k | method | eps lower | eps (upper) | seconds |")
    print("|---|---|---|---|---|")
    for k in a.ks:
        runs = [ours(k, a.rtol)]
        if not a.skip_peer:
            try:
                import dp_accounting  # noqa: F401
                runs += [peer(k, 1e-2), peer(k, 1e-3)]
            except ImportError:
                pass
        for name, lo, up, s in runs:
            lo_s = "-" if lo != lo else f"{lo:.5f}"
            print(f"| {k} | {name} | {lo_s} | {up:.5f} | {s:.2f} |", flush=True)


if __name__ == "__main__":
    main()
