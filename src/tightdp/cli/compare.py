"""``tightdp compare``: every accountant on one DP-SGD setting (or a --spec FILE's
composition)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import cast

from ..results import EpsilonResult
from .common import (
    down,
    fail,
    format_table,
    number,
    result_row,
    short,
    status_of,
    up,
)
from .options import (
    accountant_kwargs,
    accountant_options,
    dpsgd_setting_of,
    load_spec,
    mechanism_options,
    relation_kwargs,
    setting_args,
)


def _queries(a, delta: float
             ) -> tuple[Callable[[str], EpsilonResult], float | None, int, str]:
    """(eps at ``delta`` by accountant name, sampling rate, steps, neighbouring relation):
    of the DP-SGD setting of the options (under --neighboring where given), or of the
    composition of ``--spec FILE`` (each accountant with the options of the command line,
    under the file's neighbouring relation)."""
    from ..accountants.registry import make_accountant
    from ..dpsgd import dpsgd_epsilon

    if a.spec is not None:
        _, file_acc = load_spec(a)

        def of_file(name: str) -> EpsilonResult:
            acc = make_accountant(name, **accountant_kwargs(a),
                                  neighboring=file_acc.neighboring)
            for mech, k in file_acc.terms:
                acc.compose(mech, k)  # an accountant refusing a mechanism: a refused row
            return cast(EpsilonResult, acc.epsilon(delta))

        return of_file, None, file_acc.total_count, file_acc.neighboring
    if a.noise_multiplier is None:
        fail("the following arguments are required: --noise-multiplier (or give --spec FILE)")
    a.sampling = a.sampling or "poisson"
    setting = dpsgd_setting_of(a)  # a bad setting is an error, not a refusing row
    relation = setting.sampling.relation(getattr(a, "neighboring", None))  # and a bad relation

    def of_setting(name: str) -> EpsilonResult:
        return cast(EpsilonResult, dpsgd_epsilon(**setting_args(a), delta=delta,
                                                 accountant=name, **accountant_kwargs(a),
                                                 **relation_kwargs(a)))

    return of_setting, setting.sampling.sampling_rate, setting.steps, relation


def run(a) -> dict:
    from .. import _validate as v
    from ..accountants.registry import ACCOUNTANTS, make_accountant

    head = a.accountant or "pld"
    delta = v.delta_value("delta", a.delta)
    query, q, steps, relation = _queries(a, delta)
    # every accountant built first: a bad option is an error, not one refusing row
    for name in ACCOUNTANTS:
        make_accountant(name, **accountant_kwargs(a))
    t_all = time.perf_counter()
    rows, results = [], []
    for name in ACCOUNTANTS:
        t0 = time.perf_counter()
        try:
            r = query(name)
        except ValueError as err:  # the accountant refuses this setting (or its budget)
            sec = time.perf_counter() - t0
            status = "refused: " + short(str(err), 60)
            results.append({"accountant": name, "epsilon": None, "delta": delta,
                            "lower": None, "upper": None, "certified": False,
                            "seconds": sec, "note": str(err), "status": status,
                            "error": str(err)})
            rows.append([name, None, None, None, "no", sec, status])
            continue
        sec = time.perf_counter() - t0
        status = status_of(r)
        results.append({"accountant": name, "epsilon": float(r.epsilon), "delta": delta,
                        **result_row(r, sec), "status": status})
        eps = cast(float, r.epsilon)  # a scalar delta: a scalar epsilon
        rows.append([name, up(eps) if r.certified else eps, down(r.lower),
                     up(r.upper), "yes" if r.certified else "no", sec, status])
    if not a.json:
        what = (f"the composition of {a.spec}" if a.spec is not None else
                f"q={q}, sigma={a.noise_multiplier}")
        print(f"eps at delta={delta:g}: {what}, steps={steps}")
        print(format_table(rows, ["accountant", "epsilon", "lower", "upper", "certified",
                            "seconds", "notes"]))
    headline = next(row for row in results if row["accountant"] == head)
    out = {**headline, "steps": steps, "sampling_rate": q,
           "noise_multiplier": a.noise_multiplier, "sampling": a.sampling,
           "neighboring": relation, "total_seconds": time.perf_counter() - t_all,
           "results": results}
    return out if a.spec is None else {**out, "spec": a.spec}


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``compare`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("compare", "every accountant on one setting (or a --spec FILE's composition): "
                       "value, bracket, certified, time")
    mechanism_options(s, spec=True)
    s.add_argument("--delta", type=number, required=True, help="delta in [1e-300, 1)")
    accountant_options(s, "the headline row of the JSON output (default pld); every "
                           "accountant runs, each with its own options")
    return {"compare": run}
