"""``tightdp group``: group-level eps of DP-SGD."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .._defaults import DEFAULT_RTOL
from .common import (
    budget_kwargs,
    down,
    format_table,
    format_value,
    integer,
    number,
    up,
)
from .options import (
    budget_options,
    mechanism_options,
    setting_args,
)


def run(a) -> dict:
    from ..dpsgd import group_epsilon

    r = group_epsilon(group_size=a.group_size, **setting_args(a), delta=a.delta,
                      rtol=DEFAULT_RTOL if a.rtol is None else a.rtol,
                      conversion=a.conversion, **budget_kwargs(a))
    out = r.as_dict()
    if not a.json:
        print(f"group of {r.group_size}: epsilon = {format_value(up(r.epsilon))} (certified upper "
              "bound)")
        row = [down(r.lower), up(r.epsilon), r.linear_reference, up(r.example_epsilon),
               r.seconds]
        head = ["lower", "epsilon", "k*eps_1 (heuristic, not a bound)", "eps_1", "seconds"]
        if a.conversion:
            row.insert(2, up(r.conversion))
            head.insert(2, "conversion (Lemma 1.1)")
        print(format_table([row], head))
        if r.note:
            print(f"note: {r.note}")
    return out


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``group`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("group", "group-level eps of DP-SGD (Ganesh): groups of up to k examples")
    mechanism_options(s, neighboring=False)
    s.add_argument("--group-size", type=integer, required=True, help="k >= 1")
    s.add_argument("--delta", type=number, required=True, help="delta in [1e-300, 1)")
    s.add_argument("--rtol", type=number, help=f"relative bracket width (default {DEFAULT_RTOL:g})")
    s.add_argument("--conversion", action="store_true",
                   help="also compute the Lemma 1.1 conversion baseline (costly: it needs "
                        "the example-level curve at very small delta)")
    budget_options(s)
    return {"group": run}
