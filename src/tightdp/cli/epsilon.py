"""``tightdp epsilon``: eps at --delta, with its certified bracket (also of a --spec FILE)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from .common import (
    down,
    fail,
    format_table,
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
    load_spec,
    mechanism_options,
    relation_kwargs,
    setting_args,
    spec_accountant,
)


def query(a, want: str) -> dict:
    """``tightdp epsilon`` (want="epsilon": eps at --delta) and ``tightdp delta``
    (want="delta": delta at --epsilon): one accountant, one query, its bracket."""
    from .. import _validate as v

    given = "delta" if want == "epsilon" else "epsilon"
    if a.spec is not None:
        doc, file_acc = load_spec(a)
        x = v.delta_value("delta", a.delta) if want == "epsilon" else v.nonnegative(
            "epsilon", a.epsilon)
        acc = spec_accountant(a, doc, file_acc)
        q = steps = None
        t0 = time.perf_counter()
        r = acc.epsilon(x) if want == "epsilon" else acc.delta(x)
    else:
        from ..dpsgd import dpsgd_delta, dpsgd_epsilon

        if a.noise_multiplier is None:
            fail("the following arguments are required: --noise-multiplier (or give --spec "
                  "FILE)")
        a.sampling = a.sampling or "poisson"
        name = a.accountant or "pld"
        check_accountant_flags(a, [name], f"--accountant {name}")
        setting = dpsgd_setting_of(a)
        q, steps = setting.sampling.sampling_rate, setting.steps
        t0 = time.perf_counter()
        if want == "epsilon":
            r = dpsgd_epsilon(**setting_args(a), delta=a.delta, accountant=name,
                              **accountant_kwargs(a), **relation_kwargs(a))
        else:
            r = dpsgd_delta(**setting_args(a), epsilon=a.epsilon, accountant=name,
                            **accountant_kwargs(a), **relation_kwargs(a))
        x = r.delta if want == "epsilon" else r.epsilon
    value = float(r.epsilon) if want == "epsilon" else float(r.delta)
    sec = time.perf_counter() - t0
    out = {want: value, given: x, **result_row(r, sec), "estimate": r.estimate,
           "steps": steps, "sampling_rate": q, "noise_multiplier": a.noise_multiplier,
           "sampling": a.sampling, "neighboring": r.details.get("neighboring"),
           "details": r.details}
    if a.spec is not None:  # the composition is the file's: its total count of steps
        out.update(steps=acc.total_count, spec=a.spec)
    if not a.json:
        kind = "certified upper bound" if r.certified else "approximation (not a bound)"
        shown = up(value) if r.certified else value
        rel = r.details.get("neighboring")   # said where it is not add/remove
        said = "" if rel in (None, "add_or_remove_one") else f"; neighboring {rel}"
        print(f"{want} = {format_value(shown)}  ({kind}; accountant {r.accountant}{said})")
        print(format_table([[down(r.lower), shown, up(r.upper), x, sec]],
                     ["lower", want, "upper", given, "seconds"]))
        if r.note:
            print(f"note: {r.note}")
    return out


def run(a) -> dict:
    return query(a, "epsilon")


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``epsilon`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("epsilon", "eps at a given delta for DP-SGD (or any composition: --spec FILE), "
                       "with its certified bracket")
    mechanism_options(s, spec=True)
    s.add_argument("--delta", type=number, required=True, help="delta in [1e-300, 1)")
    accountant_options(s)
    return {"epsilon": run}
