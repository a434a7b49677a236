"""Benchmark: jax-privacy's training accountant with ``TightdpAccountantConfig`` against its
own PLD accountant config (dp_accounting's PLD), in one process (issue 34, item 5).

DP-SGD with 60000 examples, batch 600 (q = 0.01), noise multiplier 1, delta = 1e-5:
``compute_epsilon`` after 10^4 updates and ``calibrate_num_updates`` to eps = 3; and the
user-level accountant (4 examples per user, 2000 updates, delta = 1e-6).

Run: ``python benchmarks/bench_jax_privacy.py`` (needs the ``[jax]`` extra; ``--quick``:
without the user-level row, whose dp_accounting side takes about a minute).
"""

from __future__ import annotations

import argparse
import time


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    from jax_privacy.accounting import (
        DpParams,
        DpsgdTrainingAccountant,
        DpsgdTrainingUserLevelAccountant,
        PldAccountantConfig,
        calibrate_num_updates,
    )

    from tightdp.integrations.jax_privacy import TightdpAccountantConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    configs = [("tightdp TightdpAccountantConfig", TightdpAccountantConfig),
               ("jax-privacy PldAccountantConfig", PldAccountantConfig)]
    p = DpParams(noise_multipliers=1.0, num_samples=60_000, batch_size=600, delta=1e-5)
    pu = DpParams(noise_multipliers=1.0, num_samples=60_000, batch_size=600, delta=1e-6,
                  examples_per_user=4)
    print("| config | compute_epsilon | s | calibrate_num_updates (eps 3) | s | user-level "
          "epsilon | s |")
    print("|---|---|---|---|---|---|---|")
    for name, cfg in configs:
        acc = DpsgdTrainingAccountant(dp_accountant_config=cfg())
        e, te = _timed(lambda acc=acc: acc.compute_epsilon(10_000, p))
        n, tn = _timed(lambda acc=acc: calibrate_num_updates(
            target_epsilon=3.0, accountant=acc, noise_multipliers=1.0, batch_sizes=600,
            num_samples=60_000, target_delta=1e-5))
        if a.quick:
            u, tu = float("nan"), float("nan")
        else:
            user = DpsgdTrainingUserLevelAccountant(dp_accountant_config=cfg())
            u, tu = _timed(lambda user=user: user.compute_epsilon(2000, pu))
        print(f"| {name} | {e:.6f} | {te:.3f} | {n} | {tn:.2f} | {u:.6f} | {tu:.2f} |")


if __name__ == "__main__":
    main()
