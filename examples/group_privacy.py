"""Group-level privacy of DP-SGD: Ganesh, Section 4 (Figs. 1 and 2).

CIFAR-10-like setting: T = 2000 rounds, Poisson sampling with q = 0.01, or fixed batches of
B = 500 from n = 50000 examples with the noise multiplier doubled; delta = 1e-6; groups of
k = 1..32 examples. For each k it prints and plots

* "ours": the certified eps of the mixture-of-Gaussians dominating pair (Thm 3.1 / 3.3), with
  its certified lower bound;
* "conversion": example-level certified curve turned into a group guarantee by Lemma 1.1
  (inf where no example-level delta1 >= 1e-300 satisfies the lemma's condition);
* "linear reference": k * eps_1, the paper's "lower bound" line (a reference, not certified).

Run ``python examples/group_privacy.py --output group_privacy.png``; ``--sigmas 1 2 4`` adds
the other noise multipliers (slower), ``--ks 1 2 4 8 16 32`` a subset of group sizes,
``--sampling poisson`` or ``fixed_batch`` one of the two settings.
"""

from __future__ import annotations

import argparse
import json
import math
import time

from tightdp import group_epsilons

T, Q, B, N, DELTA = 2000, 0.01, 500, 50000, 1e-6


def run(sigma: float, sampling: str, ks: list[int], rtol: float, refine: bool) -> list[dict]:
    """One row per group size; one call for all of them, so that the example-level
    accountant of the baselines is built once."""
    common = dict(steps=T, delta=DELTA, rtol=rtol, conversion=True, refine_conversion=refine)
    if sampling == "poisson":
        rs = group_epsilons(group_sizes=ks, noise_multiplier=sigma, sampling="poisson",
                            sampling_rate=Q, **common)
    else:
        rs = group_epsilons(group_sizes=ks, noise_multiplier=2 * sigma, sampling="fixed_batch",
                            batch_size=B, dataset_size=N, **common)
    return [{"sigma": sigma, "sampling": sampling, "k": r.group_size, "epsilon": r.epsilon,
             "lower": r.lower, "conversion": r.conversion,
             "linear_reference": r.linear_reference, "seconds": r.seconds, "note": r.note}
            for r in rs]


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4f}"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigmas", type=float, nargs="+", default=[1.0],
                    help="noise multipliers (Poisson; doubled for fixed batch); paper: 1 2 4")
    ap.add_argument("--ks", type=int, nargs="+", default=list(range(1, 33)))
    ap.add_argument("--sampling", choices=["both", "poisson", "fixed_batch"], default="both")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--fast-conversion", action="store_true",
                    help="conversion baseline from the moment bound only (no PLD refinement)")
    ap.add_argument("--output", default=None, help="PNG path for the plot")
    ap.add_argument("--json", default=None, help="write the rows as JSON to this path")
    a = ap.parse_args(argv)
    samplings = ["poisson", "fixed_batch"] if a.sampling == "both" else [a.sampling]
    rows = []
    t0 = time.perf_counter()
    print("| sampling | sigma | k | ours (certified) | ours lower | conversion (Lemma 1.1) "
          "| k * eps_1 (reference) | s |")
    print("|---|---|---|---|---|---|---|---|")
    for sampling in samplings:
        for sigma in a.sigmas:
            for row in run(sigma, sampling, a.ks, a.rtol, not a.fast_conversion):
                rows.append(row)
                k = row["k"]
                sig = sigma if sampling == "poisson" else 2 * sigma
                print(f"| {sampling} | {sig:g} | {k} | {_fmt(row['epsilon'])} "
                      f"| {_fmt(row['lower'])} | {_fmt(row['conversion'])} "
                      f"| {_fmt(row['linear_reference'])} | {row['seconds']:.1f} |", flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.output:
        plot(rows, a.output)
    return rows


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["sampling"], r["sigma"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (sampling, sigma) in zip(axes[0], panels, strict=True):
        rs = sorted((r for r in rows if (r["sampling"], r["sigma"]) == (sampling, sigma)),
                    key=lambda r: r["k"])
        ks = [r["k"] for r in rs]
        ax.plot(ks, [r["epsilon"] for r in rs], "o-", label="our analysis (MoG PLD, certified)")
        conv = [(r["k"], r["conversion"]) for r in rs if math.isfinite(r["conversion"])]
        if conv:
            ax.plot(*zip(*conv, strict=True), "s--", label="conversion (Lemma 1.1)")
        ax.plot(ks, [r["linear_reference"] for r in rs], ":", color="gray",
                label="k * eps_1 (linear reference)")
        infs = [r["k"] for r in rs if math.isinf(r["conversion"])]
        title = (f"Poisson q={Q}, sigma={sigma:g}" if sampling == "poisson"
                 else f"fixed batch B={B}, n={N}, sigma={2 * sigma:g}")
        if infs:
            shown = ", ".join(map(str, infs[:6])) + (", ..." if len(infs) > 6 else "")
            title += f"\nconversion infinite (no delta1 >= 1e-300) at k = {shown}"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("group size k")
        ax.set_ylabel(f"epsilon at delta={DELTA:g}, T={T}")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
