"""Benchmark: truncated Poisson sampling and Poisson sampling under replace-one, ours against
dp_accounting's PLD (default discretization 1e-4), in one process.

eps at delta = 1e-5 of the Poisson-subsampled Gaussian (q = 0.01, sigma = 1) under
replace-one, and of truncated Poisson (n = 1000, q = 0.01, at most 12 per batch) under
add/remove and replace-one, for 1000 and 10000 steps: our PLD accountant's certified bracket
and seconds, dp_accounting's eps and seconds, and their ratio. Single machine, shared CPU:
times are indicative.

``python benchmarks/bench_sampling_tp.py [--quick]``
"""

from __future__ import annotations

import argparse
import time

import tightdp as td

DELTA = 1e-5


def _ours(mech: td.Mechanism, steps: int, relation: str) -> tuple[float, float, float]:
    t = time.perf_counter()
    r = td.PLDAccountant(neighboring=relation).compose(mech, steps).epsilon(DELTA)
    return float(r.lower), float(r.upper), time.perf_counter() - t


def _theirs(build, steps: int) -> tuple[float, float]:
    t = time.perf_counter()
    e = build().self_compose(steps).get_epsilon_for_delta(DELTA)
    return float(e), time.perf_counter() - t


def _row(name: str, steps: int, ours, theirs) -> None:
    lo, up, t1 = ours
    e, t2 = theirs
    print(f"| {name} | {steps} | {lo:.5f} | {up:.5f} | {t1:.3f} | {e:.5f} | {t2:.3f} | "
          f"{t2 / t1:.1f} |", flush=True)


def replace_one_rows(steps_list: list[int]) -> None:
    """Poisson sampling under replace-one."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    for steps in steps_list:
        ours = _ours(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), steps, "replace_one")
        theirs = _theirs(lambda: pld.from_gaussian_mechanism(
            1.0, sampling_prob=0.01, neighboring_relation=pld.NeighborRel.REPLACE_ONE), steps)
        _row("poisson replace_one", steps, ours, theirs)


def truncated_rows(steps_list: list[int]) -> None:
    """Truncated Poisson, both relations."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    mech = td.TruncatedPoisson(td.Gaussian(1.0), 0.01, 12, 1000)
    for relation in ("add_or_remove_one", "replace_one"):
        rel = getattr(pld.NeighborRel, relation.upper())
        for steps in steps_list:
            ours = _ours(mech, steps, relation)
            theirs = _theirs(lambda rel=rel: pld.from_truncated_subsampled_gaussian_mechanism(
                1000, 0.01, 12, 1.0, neighboring_relation=rel), steps)
            _row(f"truncated {relation}", steps, ours, theirs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1000 steps only")
    a = ap.parse_args(argv)
    steps_list = [1000] if a.quick else [1000, 10000]
    print("q=0.01, sigma=1, delta=1e-5; truncated: n=1000, at most 12 per batch\n")
    print("| case | steps | our lower | our upper | our s | dp_accounting eps | their s | "
          "ratio |")
    print("|---|---|---|---|---|---|---|---|")
    replace_one_rows(steps_list)
    truncated_rows(steps_list)


if __name__ == "__main__":
    main()
