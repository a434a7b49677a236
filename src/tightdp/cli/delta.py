"""``tightdp delta``: delta at --epsilon, with its certified bracket (also of a --spec FILE)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .common import (
    number,
)
from .epsilon import query
from .options import (
    accountant_options,
    mechanism_options,
)


def run(a) -> dict:
    return query(a, "delta")


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``delta`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("delta", "delta at a given eps for DP-SGD (or any composition: --spec FILE), "
                     "with its certified bracket")
    mechanism_options(s, spec=True)
    s.add_argument("--epsilon", type=number, required=True, help="eps >= 0")
    accountant_options(s)
    return {"delta": run}
