"""Benchmark: what ``tightdp plot`` waits for (issue 34, item 4b).

The privacy curve of 1000 steps of DP-SGD (q = 0.01, sigma = 1): the default 200 eps of
``plotting.plot_privacy_curve`` (0 to twice eps(1e-6), delta down to ~1e-13) in one certified
array query, beside one eps query, and the whole ``tightdp plot`` command in a subprocess.
The table gives the seconds, the grid step and FFT points of the curve, and its widest
relative bracket.

Run: ``python benchmarks/bench_plot.py`` (``--quick``: without the subprocess).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import tightdp as td


def _acc() -> td.PLDAccountant:
    return td.PLDAccountant().compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    e = float(_acc().epsilon(1e-6).epsilon)
    t_eps = time.perf_counter() - t0
    eps = np.linspace(0.0, max(2.0 * e, 1.0), 200)
    t0 = time.perf_counter()
    r = _acc().delta(eps)
    t_curve = time.perf_counter() - t0
    up, lo = np.asarray(r.upper), np.asarray(r.lower)
    width = float(np.max((up - lo) / up))
    print("q=0.01, sigma=1, 1000 steps")
    print("| query | seconds | grid step | fft points | widest relative bracket |")
    print("|---|---|---|---|---|")
    print(f"| epsilon at 1e-6 | {t_eps:.3f} | - | - | - |")
    print(f"| delta at 200 eps (0 to {eps[-1]:.2f}) | {t_curve:.3f} | "
          f"{r.details['grid_step']:.3g} | {r.details.get('fft_points')} | {width:.2e} |")
    if not a.quick:
        out = os.path.join(tempfile.mkdtemp(), "curve.png")
        cmd = [sys.executable, "-m", "tightdp.cli", "plot", "--sampling-rate", "0.01",
               "--noise-multiplier", "1", "--steps", "1000", "--output", out]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        print(f"| tightdp plot (whole command, with start-up) | {time.perf_counter() - t0:.3f} "
              "| - | - | - |")


if __name__ == "__main__":
    main()
