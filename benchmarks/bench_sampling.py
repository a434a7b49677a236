"""Benchmark: sampling schemes known by a bracket -- tightdp vs their peers, one row group
per scheme.

Random allocation (``RandomAllocation``, k of t steps per epoch, E epochs): eps at delta by a
fresh ``PLDAccountant`` (default rtol 1e-3; every setting is a new mechanism, so nothing is
cached) against pld-accounting's ``gaussian_allocation_epsilon_range`` (its default adaptive
accuracy), side by side in one process. Prints a markdown table with the widths and the time
ratio. Single runs (the CPU is shared): times are indicative.

``python benchmarks/bench_sampling.py [--skip-peer] [--quick]``
"""

from __future__ import annotations

import argparse
import math
import time

import tightdp as td

#: (sigma, steps t, selected k, epochs E, delta)
ALLOCATION = [(1.0, 1000, 1, 1, 1e-6), (1.0, 1000, 1, 10, 1e-6), (2.0, 10000, 1, 10, 1e-6),
              (1.0, 1000, 2, 5, 1e-6), (1.0, 10000, 10, 10, 1e-6), (0.8, 1000, 1, 10, 1e-8)]


def _ours_allocation(s: tuple) -> tuple[float, float, float]:
    sigma, t, k, e, d = s
    start = time.perf_counter()
    r = td.PLDAccountant().compose(td.RandomAllocation(td.Gaussian(sigma), t, k), e).epsilon(d)
    return r.lower, r.upper, time.perf_counter() - start


def _peer_allocation(s: tuple) -> tuple[float, float, float]:
    from PLD_accounting import gaussian_allocation_epsilon_range
    sigma, t, k, e, d = s
    start = time.perf_counter()
    up, lo = gaussian_allocation_epsilon_range(delta=d, sigma=sigma, num_steps=t,
                                               num_selected=k, num_epochs=e)
    return lo, up, time.perf_counter() - start


def random_allocation_rows(settings: list[tuple], peer: bool) -> list[str]:
    """One row per setting: our bracket, width and time; the peer's; the time ratio."""
    rows = []
    for s in settings:
        lo, up, sec = _ours_allocation(s)
        plo = pup = psec = math.nan
        if peer:
            try:
                plo, pup, psec = _peer_allocation(s)
            except ImportError:
                peer = False
        sigma, t, k, e, d = s
        rows.append(f"| allocation | {sigma:g} | {t} | {k} | {e} | {d:g} | [{lo:.5f}, {up:.5f}] "
                    f"| {(up - lo) / up:.1e} | {sec:.2f} | [{plo:.5f}, {pup:.5f}] "
                    f"| {(pup - plo) / pup:.1e} | {psec:.1f} | {psec / sec:.0f}x |")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the first two settings only")
    a = ap.parse_args(argv)
    print("| scheme | sigma | t | k | E | delta | tightdp [lower, upper] | rel. width | s "
          "| peer [lower, upper] | rel. width | peer s | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in random_allocation_rows(ALLOCATION[:2] if a.quick else ALLOCATION,
                                      not a.skip_peer):
        print(row, flush=True)


if __name__ == "__main__":
    main()
