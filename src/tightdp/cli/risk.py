"""``tightdp risk``: certified attack success of DP-SGD -- the best membership attack's TPR
at each --fpr, its advantage, the Bayes success at each --prior (tightdp.dpsgd_risk)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from .common import budget_kwargs, down, fail, format_table, format_value, number, up
from .options import budget_options, mechanism_options, relation_kwargs, setting_args


def run(a) -> dict:
    from ..dpsgd import dpsgd_risk
    from ..risk import DEFAULT_TOL

    if a.noise_multiplier is None:
        fail("the following arguments are required: --noise-multiplier")
    t0 = time.perf_counter()
    r = dpsgd_risk(**setting_args(a), fpr=a.fpr, tol=DEFAULT_TOL if a.tol is None else a.tol,
                   rtol=1e-3, **budget_kwargs(a), **relation_kwargs(a))
    out = {**r.as_dict(), "seconds": time.perf_counter() - t0}
    if a.prior is not None:
        lo, hi = r.posterior(a.prior)
        out["prior"] = list(a.prior)
        out["posterior_lower"], out["posterior_upper"] = lo.tolist(), hi.tolist()
    if a.json:
        return out
    kind = "certified" if r.certified else "not certified"
    print(f"best membership attack ({kind}; accountant {r.accountant}, {r.neighboring})")
    rows = [[f, down(lo), up(hi)] for f, lo, hi in zip(r.fpr, r.tpr_lower, r.tpr_upper,
                                                          strict=True)]
    print(format_table(rows, ["fpr", "tpr lower", "tpr upper"]))
    if a.advantage or a.prior is None:
        print(f"advantage in [{format_value(down(r.advantage_lower))}, "
              f"{format_value(up(r.advantage_upper))}]  (largest TPR - FPR)")
    if a.prior is not None:
        print(format_table([[p, down(lo), up(hi)] for p, lo, hi in zip(
            a.prior, out["posterior_lower"], out["posterior_upper"], strict=True)],
            ["prior", "success lower", "success upper"]))
    if r.note:
        print(f"note: {r.note}")
    return out


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``risk`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("risk", "certified TPR of the best membership attack at given FPRs, its "
                    "advantage and Bayes success, for DP-SGD")
    mechanism_options(s)
    g = s.add_argument_group("attack")
    g.add_argument("--fpr", type=number, nargs="+", default=[1e-3, 1e-2, 1e-1],
                   help="false-positive rates in [0, 1] (default 0.001 0.01 0.1)")
    g.add_argument("--advantage", action="store_true",
                   help="print the advantage (largest TPR - FPR) also with --prior")
    g.add_argument("--prior", type=number, nargs="+",
                   help="membership priors in (0, 1): the Bayes-optimal attack's success")
    g.add_argument("--tol", type=number, help="largest TPR bracket width (default 1e-3)")
    budget_options(s)
    return {"risk": run}
