"""Benchmark: privacy-loss evaluation of the mixture-of-Gaussians pair (Ganesh, Def. 2.8).

``bin_masses`` on 5e4 evenly spaced loss values for the k = 16, q = 0.01, sigma = 1 group
mechanism of DP-SGD (both directions), over the loss range whose tails hold P-mass 1e-300
and the (narrower) range the PLD accountant uses for T = 2000. Prints best-of-``--repeat``
seconds. Single machine, shared CPU: times are indicative.

``python benchmarks/bench_mixture_loss.py [--k 16] [--n 50000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from tightdp.dpsgd.group import group_mechanism
from tightdp.pld.discretize import loss_range


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    mech = group_mechanism(a.k, noise_multiplier=a.sigma, sampling_rate=a.q)
    print(f"k={a.k}, q={a.q}, sigma={a.sigma}, {a.n} edges\n")
    print("| direction | tail | range | inverse s | bin_masses s |")
    print("|---|---|---|---|---|")
    for name, loss in zip(("remove", "add"), mech.privacy_losses(), strict=True):
        for tail_name, log_tail in (("1e-300", math.log(1e-300)),
                                    ("1e-40/2000", math.log(1e-40 / 2000))):
            lo, hi = loss_range(loss, log_tail)
            edges = np.linspace(lo, hi, a.n)
            t_inv = t_bin = math.inf
            for _ in range(a.repeat):
                loss.__dict__.pop("_last_inverse", None)
                t = time.perf_counter()
                loss.inverse(edges)
                t_inv = min(t_inv, time.perf_counter() - t)
                loss.__dict__.pop("_last_inverse", None)
                t = time.perf_counter()
                loss.bin_masses(edges)
                t_bin = min(t_bin, time.perf_counter() - t)
            print(f"| {name} | {tail_name} | [{lo:.4g}, {hi:.4g}] | {t_inv:.3f} | "
                  f"{t_bin:.3f} |", flush=True)


if __name__ == "__main__":
    main()
