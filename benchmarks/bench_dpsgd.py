"""DP-SGD workloads: tightdp's certified PLD accountant against the peers, in one process.

Prints a markdown table: value, bracket, wall time, and each peer's time divided by ours.
Peers (optional): dp_accounting (PLD at two discretization intervals, RDP) and
prv_accountant. Run:  python benchmarks/bench_dpsgd.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from functools import partial

import tightdp as td

WORKLOADS = [
    # (q, sigma, steps, delta, note)
    (0.01, 1.0, 10_000, 1e-5, "true eps ~ 6.1877"),
    (0.001, 3.0, 1_000_000, 1e-5, "long run"),
]


def timed(fn, repeat: int = 3):
    """Best wall time of ``repeat`` calls, after one untimed call (imports, caches)."""
    out = fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def ours(q, s, k, delta, rtol):
    acc = td.PLDAccountant(rtol=rtol).compose(td.PoissonSubsampled(td.Gaussian(s), q), k)
    r = acc.epsilon(delta)
    return r.upper, (r.lower, r.upper)


def dp_accounting_pld(q, s, k, delta, interval):
    from dp_accounting import dp_event, pld

    acc = pld.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), k)
    return acc.get_epsilon(delta), None


def dp_accounting_rdp(q, s, k, delta):
    from dp_accounting import dp_event, rdp

    acc = rdp.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), k)
    return acc.get_epsilon(delta), None


def prv(q, s, k, delta, eps_error=0.01, delta_error=1e-8):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    mech = PoissonSubsampledGaussianMechanism(noise_multiplier=s, sampling_probability=q)
    acc = PRVAccountant(prvs=[mech], max_self_compositions=[k], eps_error=eps_error,
                        delta_error=delta_error)
    lo, est, up = acc.compute_epsilon(delta=delta, num_self_compositions=[k])
    return up, (lo, up)


def command_time() -> float:
    t0 = time.perf_counter()
    subprocess.run(["tightdp", "epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1.0",
                    "--steps", "10000", "--delta", "1e-5", "--json"], check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="first workload only, fewer peers")
    a = ap.parse_args()
    rows = []
    for q, s, k, delta, _note in WORKLOADS[: 1 if a.quick else None]:
        ref = None
        for rtol in (1e-3, 1e-4):
            (val, br), t = timed(partial(ours, q, s, k, delta, rtol))
            rows.append((f"q={q} s={s} T={k}", f"tightdp pld rtol={rtol:g}", val, br, t, None))
            if ref is None:
                ref = t
        args = (q, s, k, delta)
        peers = [("dp_accounting PLD 1e-3", partial(dp_accounting_pld, *args, 1e-3)),
                 ("dp_accounting PLD 1e-4", partial(dp_accounting_pld, *args, 1e-4)),
                 ("dp_accounting RDP", partial(dp_accounting_rdp, *args)),
                 ("prv_accountant 0.2.0", partial(prv, *args))]
        if a.quick:
            peers = peers[:1]
        for name, fn in peers:
            try:
                (val, br), t = timed(fn, repeat=1 if "prv" in name or k > 10**5 else 3)
            except Exception as err:  # a missing or failing peer is reported, not fatal
                rows.append((f"q={q} s={s} T={k}", name, None, None, None, str(err)[:40]))
                continue
            rows.append((f"q={q} s={s} T={k}", name, val, br, t, t / ref))
    print("| workload | accountant | eps | bracket | seconds | peer time / ours (rtol 1e-3) |")
    print("|---|---|---|---|---|---|")
    for w, name, val, br, t, ratio in rows:
        brs = "-" if br is None else f"[{br[0]:.6f}, {br[1]:.6f}]"
        vs = "-" if val is None else f"{val:.6f}"
        ts = "-" if t is None else f"{t:.3f}"
        rs = ratio if isinstance(ratio, str) else ("-" if ratio is None else f"{ratio:.2f}")
        print(f"| {w} | {name} | {vs} | {brs} | {ts} | {rs} |")
    print(f"\nwhole command `tightdp epsilon ... --json` (process start included): "
          f"{command_time():.2f} s", file=sys.stdout)


if __name__ == "__main__":
    main()
