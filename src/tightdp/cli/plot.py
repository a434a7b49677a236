"""``tightdp plot``: the privacy curve, the trade-off curve or eps against steps, as a PNG."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from .common import (
    fail,
    format_value,
    number,
    result_row,
    up,
)
from .options import (
    accountant_kwargs,
    accountant_options,
    check_accountant_flags,
    dpsgd_setting_of,
    mechanism_options,
)


def _check_output(path: str) -> None:
    """--output must be a .png file that can be written: checked before any work."""

    if not path.lower().endswith(".png"):
        fail(f"--output must be a .png file, got {path!r}")
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        fail(f"--output {path!r} is a directory")
    if not os.path.isdir(parent):
        fail(f"--output {path!r}: directory {parent!r} does not exist")
    if os.path.exists(full) and not os.access(full, os.W_OK):
        fail(f"--output {path!r} exists and is not writable")
    if not os.access(parent, os.W_OK | os.X_OK):
        fail(f"--output {path!r}: directory {parent!r} is not writable")


def run(a) -> dict:
    import numpy as np

    from .. import _validate as v
    from ..accountants.registry import make_accountant

    _check_output(a.output)
    if a.kind == "steps":
        if a.accountant is not None:
            fail("--accountant does not apply to --kind steps: use --accountants")
        names = [x.strip() for x in (a.accountants or "pld,rdp").split(",") if x.strip()]
        from ..accountants.registry import ACCOUNTANTS

        bad = [x for x in names if x not in ACCOUNTANTS]
        if bad or not names:
            fail(f"--accountants must be a comma list of {', '.join(ACCOUNTANTS)}, got "
                  f"{a.accountants!r}")
        check_accountant_flags(a, names, f"--accountants {','.join(names)}")
    else:
        if a.accountants is not None:
            fail(f"--accountants applies only to --kind steps, not --kind {a.kind}: use "
                  "--accountant")
        names = [a.accountant or "pld"]
        check_accountant_flags(a, names, f"--accountant {names[0]}")
    delta = v.delta_value("delta", a.delta if a.delta is not None else 1e-5)
    setting = dpsgd_setting_of(a)
    relation = setting.sampling.relation(a.neighboring)
    q, steps, mech = setting.sampling.sampling_rate, setting.steps, setting.mechanism(relation)
    count = setting.count  # compositions of mech: steps, or epochs (random-allocation, shuffle)
    opts = {**accountant_kwargs(a), "neighboring": relation}
    for name in names:  # the options are checked before the plotting starts
        make_accountant(name, **opts)
    try:
        from ..plotting import plot_epsilon_vs_steps, plot_privacy_curve, plot_tradeoff, pyplot

        plt = pyplot()
    except ImportError as err:
        fail(str(err))
    t0 = time.perf_counter()
    if a.kind == "steps":
        grid = sorted({max(1, int(round(count * f))) for f in np.linspace(0.05, 1, 12)})
        ax = plot_epsilon_vs_steps(lambda: mech, grid, delta, accountants=names, **opts)
        if setting.sampling.per_epoch:
            ax.set_xlabel("epochs")
        acc = make_accountant(names[0], **opts).compose(mech, count)
    else:
        acc = make_accountant(names[0], **opts).compose(mech, count)
        ax = plot_privacy_curve(acc) if a.kind == "curve" else plot_tradeoff(acc)
    ax.set_title(f"q={q}, sigma={a.noise_multiplier}, steps={steps}")
    ax.figure.tight_layout()
    ax.figure.savefig(a.output, dpi=120)
    plt.close(ax.figure)
    r = acc.epsilon(delta)
    sec = time.perf_counter() - t0
    if not a.json:
        print(f"wrote {a.output}")
        kind = "certified upper bound" if r.certified else "approximation (not a bound)"
        shown = up(r.epsilon) if r.certified else r.epsilon
        print(f"epsilon = {format_value(shown)} at delta={delta:g}  ({kind}; accountant "
              f"{r.accountant})")
    return {"epsilon": float(r.epsilon), "delta": delta, **result_row(r, sec),
            "steps": steps, "sampling_rate": q, "noise_multiplier": a.noise_multiplier,
            "sampling": a.sampling, "neighboring": relation, "output": a.output,
            "kind": a.kind}


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``plot`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("plot", "draw the privacy curve, the trade-off curve or eps against steps (PNG)")
    mechanism_options(s)
    s.add_argument("--kind", default="curve", choices=["curve", "tradeoff", "steps"])
    s.add_argument("--delta", type=number,
                   help="delta of the eps reported (and of --kind steps), default 1e-5")
    s.add_argument("--accountants",
                   help="--kind steps only: comma list of accountants (default pld,rdp)")
    s.add_argument("--output", required=True, help="PNG file to write")
    accountant_options(s, "--kind curve/tradeoff: the accountant (default pld)")
    return {"plot": run}
