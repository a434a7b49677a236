"""``tightdp spec``: the spec file of one DP-SGD setting (the state file of its accountant),
which ``tightdp epsilon|delta|compare|calibrate --spec FILE`` read back."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .common import fail
from .options import (
    accountant_kwargs,
    accountant_options,
    check_accountant_flags,
    mechanism_options,
    setting_args,
)


def run(a) -> dict:
    from .. import dpsgd_accountant
    from ..state import dumps, save

    name = a.accountant or "pld"
    check_accountant_flags(a, [name], f"--accountant {name}")
    acc = dpsgd_accountant(**setting_args(a), accountant=name, **accountant_kwargs(a))
    if a.output is None:
        sys.stdout.write(dumps(acc))
    else:
        try:
            save(acc, a.output)  # atomic: a failure leaves any previous file as it was
        except OSError as err:
            fail(f"--output: cannot write {a.output}: {err.strerror or err}")
    return {}


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``spec`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("spec", "write the spec file (JSON) of a DP-SGD setting, for --spec FILE: "
                    "tightdp spec --sampling-rate 0.01 --noise-multiplier 1 --steps 10000 "
                    "> run.json")
    mechanism_options(s)
    s.add_argument("--output", metavar="FILE",
                   help="write the file there (atomically) instead of to standard output")
    accountant_options(s, "the accountant the file holds, with its options (default pld)")
    return {"spec": run}
