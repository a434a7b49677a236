"""Benchmark: tightdp.PRVAccountant against prv_accountant 0.2.0 (Gopi, Lee, Wutschitz 2021).

Workload (issue 4): DP-SGD, Poisson-subsampled Gaussian, q = 0.01, sigma = 1, delta = 1e-5,
eps_error = 0.01, delta_error = 1e-8, 1e4 steps (and 1e5 with ``--long``). Both accountants
are built from scratch and queried once per repetition, in-process; the time is the median
over the repetitions (cold: nothing is cached between them).

Not quite like for like, in the peer's favour: prv_accountant composes only the remove pair
of Poisson subsampling, whereas tightdp composes both the remove and the add pair and reports
the maximum (add/remove adjacency), i.e. twice the work.

Tiny delta (issue 17): q = 0.3, sigma = 0.45, 2000 steps, ``eps_error = 0.1`` and the
default 0.01, ``max_memory = 1e9``, delta = 1e-5, 1e-12 and 1e-15 (target: at most 2 s and
1 GB, with the Theorem 5.5 bracket); peak memory by tracemalloc in a separate run, beside the
certified PLD accountant's bracket at rtol 1e-5 (which the PRV bracket must contain).

Run: ``python benchmarks/bench_prv.py [--long] [--reps N] [--tiny]``.
"""

from __future__ import annotations

import statistics
import sys
import time

from tightdp import Gaussian, PoissonSubsampled, PRVAccountant


def ours(q: float, sigma: float, steps: int, delta: float, eps_err: float, delta_err: float):
    acc = PRVAccountant(eps_error=eps_err, delta_error=delta_err)
    acc.compose(PoissonSubsampled(Gaussian(sigma), q), steps)
    r = acc.epsilon(delta)
    return r.lower, r.estimate, r.upper


def peer(q: float, sigma: float, steps: int, delta: float, eps_err: float, delta_err: float):
    from prv_accountant import PoissonSubsampledGaussianMechanism
    from prv_accountant import PRVAccountant as PeerAccountant

    prv = PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)
    acc = PeerAccountant(prvs=prv, max_self_compositions=steps, eps_error=eps_err,
                         delta_error=delta_err)
    return acc.compute_epsilon(delta=delta, num_self_compositions=steps)


def timed(fn, reps: int, *args, clock=time.perf_counter):
    """``(fn(*args), median time over reps)``, timed by ``clock`` (wall time by default;
    bench_pld.py passes ``time.process_time``)."""
    times, out = [], None
    for _ in range(reps):
        t0 = clock()
        out = fn(*args)
        times.append(clock() - t0)
    return out, statistics.median(times)


def tiny(reps: int) -> None:
    """The tiny-delta table of issue 17."""
    import tracemalloc

    from tightdp import PLDAccountant

    mech = PoissonSubsampled(Gaussian(0.45), 0.3)

    def run(delta: float, eps_error: float):
        acc = PRVAccountant(eps_error=eps_error, max_memory=1e9).compose(mech, 2000)
        return acc.epsilon(delta)

    print("\n### PRV at tiny delta: q=0.3, sigma=0.45, 2000 steps, max_memory=1e9 "
          f"(median of {reps} cold runs)\n")
    print("Compositions whose FFT window would exceed 2^20 points are evaluated at a few "
          "frequencies (`frequencies` > 0: tightdp.pld.spectral); `window` is the window's "
          "points.\n")
    print("| eps_error | delta | eps_low | eps_up | time [s] | peak [MB] | window | frequencies "
          "| PLD rtol 1e-5 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps_error in (0.1, 0.01):
        for delta in (1e-5, 1e-12, 1e-15):
            r, t = timed(run, reps, delta, eps_error)
            tracemalloc.start()
            run(delta, eps_error)
            peak = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()
            ref = PLDAccountant(1e-5).compose(mech, 2000).epsilon(delta)
            inside = r.lower <= ref.lower and ref.upper <= r.upper
            print(f"| {eps_error:g} | {delta:g} | {r.lower:.6f} | {r.upper:.6f} | {t:.3f} | "
                  f"{peak:.0f} | {r.details['fft_points']} | "
                  f"{r.details.get('frequencies', 0)} | [{ref.lower:.6f}, {ref.upper:.6f}]"
                  f"{'' if inside else ' (NOT inside)'} |")


def main(argv: list[str]) -> None:
    if "--tiny" in argv:
        tiny(int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 3)
        return
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 3
    steps_list = [10_000] + ([100_000] if "--long" in argv else [])
    q, sigma, delta, eps_err, delta_err = 0.01, 1.0, 1e-5, 0.01, 1e-8
    print(f"### PRV accountants: q={q}, sigma={sigma}, delta={delta}, eps_error={eps_err}, "
          f"delta_error={delta_err} (median of {reps} cold runs)\n")
    print("| steps | accountant | eps_low | estimate | eps_up | time [s] | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for steps in steps_list:
        args = (q, sigma, steps, delta, eps_err, delta_err)
        r_ours, t_ours = timed(ours, reps, *args)
        try:
            r_peer, t_peer = timed(peer, max(1, reps if steps <= 10_000 else 1), *args)
        except ImportError:
            r_peer, t_peer = None, float("nan")
        print(f"| {steps} | tightdp (both directions) | {r_ours[0]:.6f} | {r_ours[1]:.6f} | "
              f"{r_ours[2]:.6f} | {t_ours:.3f} | {t_peer / t_ours:.1f}x |")
        if r_peer is not None:
            print(f"| {steps} | prv_accountant 0.2.0 (remove only) | {r_peer[0]:.6f} | "
                  f"{r_peer[1]:.6f} | {r_peer[2]:.6f} | {t_peer:.3f} | 1.0x |")


if __name__ == "__main__":
    main(sys.argv[1:])
