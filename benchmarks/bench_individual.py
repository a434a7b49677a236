"""Benchmark: individual eps of DP-SGD (Koskela, Tobaben, Honkela, Sec. 5 / App. D).

N examples x T steps, q = 0.01, sigma = 1, C = 1, delta = 1e-5 (the issue's workload: N = 1e5,
T = 1000, target <= 30 s with the certified PLD method; N = 1e6 in <= 30 s with the
saddle-point variant). Gradient norms are synthetic: per example a log-normal scale times an
exponential per step, so that some examples are clipped at most steps and others rarely.

Run::

    python benchmarks/bench_individual.py [N] [T] [--method pld|spa|both] [--q Q] [--sigma S]

``pld`` times :meth:`IndividualPLDAccountant.epsilon` (grid-step choice, discretizations, FFTs
per group of examples and the per-example Plancherel evaluation; a certified bracket per
example, whose relative widths are printed); ``spa`` times
:meth:`IndividualSPAAccountant.epsilons` (bucket CGF tables, per-example saddle points and
refined-moments bounds; an approximation, flagged per example where unreliable); ``both`` runs
both on the same recorded history and compares them. Recording the norms is timed separately.

Where the saddle-point variant is meaningful: at the default workload an example sees about
``q T = 10`` sampled steps, too few for a saddle-point approximation -- the worst-case
composition itself is flagged unreliable by :class:`~tightdp.SaddlePointAccountant` (SP-MSD1
terms 0.58) -- so expect (nearly) every example to be flagged there; e.g. ``--q 0.1 --sigma 2``
(about 100 sampled steps) is a regime where it is reliable.

On a machine where another process keeps a core busy, OpenBLAS's threads spin-wait in the many
medium-sized matrix products of the saddle-point variant; ``OPENBLAS_NUM_THREADS=1`` then
roughly halves its wall time (N = 1e6: 23 s -> 13 s measured under such load).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tightdp import Gaussian, PLDAccountant, PoissonSubsampled
from tightdp.individual import IndividualPLDAccountant, IndividualSPAAccountant


def _pct(x: np.ndarray) -> str:
    return " ".join(f"{v:.4f}" for v in np.percentile(x, [0, 10, 50, 90, 100]))


def main(n: int = 100_000, t: int = 1000, method: str = "pld", q: float = 0.01,
         sigma: float = 1.0) -> None:
    clip, delta = 1.0, 1e-5
    rng = np.random.default_rng(0)
    pld = IndividualPLDAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=clip,
                                  n_examples=n, progress=True)
    scale = rng.lognormal(-0.5, 0.6, n)
    t0 = time.perf_counter()
    for _ in range(t):
        pld.step(scale * rng.exponential(1.0, n))
    _ = pld.counts  # flush the step buffer: part of recording
    t_rec = time.perf_counter() - t0
    worst = PLDAccountant().compose(PoissonSubsampled(Gaussian(sigma), q), t).epsilon(delta)
    print(f"N={n} T={t} q={q} sigma={sigma} delta={delta}")
    print(f"recording norms: {t_rec:.1f} s")
    eps_pld = eps_spa = None
    if method in ("pld", "both"):
        t0, c0 = time.perf_counter(), time.process_time()
        res_pld = pld.epsilon(delta)
        eps_pld = res_pld.epsilon
        t_eps, c_eps = time.perf_counter() - t0, time.process_time() - c0
        print(f"[pld] individual eps (certified brackets): {t_eps:.1f} s wall, "
              f"{c_eps:.1f} s CPU (all threads of this process)")
        print(f"[pld] details: {res_pld.details}")
        print(f"[pld] eps percentiles 0/10/50/90/100: {_pct(eps_pld)}")
        pos = eps_pld > 0
        width = (res_pld.upper[pos] - res_pld.lower[pos]) / res_pld.upper[pos]
        print(f"[pld] bracket width (upper - lower) / upper, percentiles 0/10/50/90/100: "
              f"{' '.join(f'{x:.2e}' for x in np.percentile(width, [0, 10, 50, 90, 100]))}")
        assert eps_pld.max() <= worst.upper * (1 + 5e-3)
    if method in ("spa", "both"):
        spa = IndividualSPAAccountant.from_history(pld, progress=True)
        t0, c0 = time.perf_counter(), time.process_time()
        res = spa.epsilon(delta)
        t_eps, c_eps = time.perf_counter() - t0, time.process_time() - c0
        eps_spa = res.epsilon
        det = {k: x for k, x in res.details.items() if k not in ("msd1_terms", "reliable")}
        print(f"[spa] individual eps (saddle-point APPROXIMATION, {spa.method}): {t_eps:.1f} s "
              f"wall, {c_eps:.1f} s CPU (all threads of this process)")
        print(f"[spa] details: {det}")
        print(f"[spa] eps percentiles 0/10/50/90/100: {_pct(eps_spa)}")
        print(f"[spa] certified refined-moments upper, percentiles: {_pct(res.upper)}")
        print(f"[spa] flagged reliable: {res.details['reliable'].mean():.1%} of the examples")
    print(f"worst-case eps (certified bracket): [{worst.lower:.4f}, {worst.upper:.4f}]")
    if eps_pld is not None and eps_spa is not None:
        pos = eps_pld > 0
        rel = eps_spa[pos] / eps_pld[pos] - 1.0
        print(f"spa / pld - 1, all examples, percentiles 0/10/50/90/100: {_pct(rel)}")
        ok = res.details["reliable"][pos]
        if ok.any():
            print(f"spa / pld - 1, reliable examples: {_pct(rel[ok])}")
        print(f"certified upper / pld, min: {(res.upper[pos] / eps_pld[pos]).min():.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", nargs="?", type=float, default=100_000)
    ap.add_argument("t", nargs="?", type=float, default=1000)
    ap.add_argument("--method", choices=("pld", "spa", "both"), default="pld")
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--sigma", type=float, default=1.0)
    a = ap.parse_args()
    main(int(a.n), int(a.t), a.method, a.q, a.sigma)
