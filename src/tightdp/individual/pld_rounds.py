"""The rounds of the per-example PLD accountant's evaluation
(:class:`~tightdp.individual.pld_individual.IndividualPLDAccountant`): the four transforms of a
grid level named by direction and discretization (:class:`Side`, :class:`Pair`), the state
the rounds of one query share (:class:`RoundState`), a built level (:class:`Level`), and the
grouping of the examples still to do by level."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import pld_blocks as pb

__all__ = ["Side", "Pair", "SLOTS", "slot", "RoundState", "Level", "todo_levels"]


class Side(enum.IntEnum):
    """The direction of the pair a transform is of, in the order they are evaluated."""

    REMOVE = 0
    ADD = 1


class Pair(enum.IntEnum):
    """The two discretizations of a direction's bucket laws: connect-the-dots (dominating:
    the upper bound) and lowered chords (dominated: the lower bound)."""

    UPPER = 0
    LOWER = 1


#: the four transforms of a level, in the order of its laws and windows
SLOTS = tuple((side, pair) for side in Side for pair in Pair)


def slot(side: Side, pair: Pair) -> int:
    """Position of the transform ``(side, pair)`` in :data:`SLOTS` (the lists of laws and
    windows of a level, :func:`~tightdp.individual.pld_blocks.extents`)."""
    return 2 * int(side) + int(pair)


@dataclass
class RoundState:
    """What the rounds of one query share: the buckets used, the coarsest grid step, the
    target delta, the time budget, the details being filled, the progress bar, the tails
    the laws and windows leave out, the transforms' share of the memory budget, the cache of
    the accountant's budget checks (per bucket: loss ranges and moments), and what the rounds
    count."""

    used: np.ndarray
    d0: float
    delta: float
    deadline: Any
    info: dict
    bar: Any
    log_tail: float
    win_tail: float
    share: float
    cache: dict = field(default_factory=dict)
    steps_used: set = field(default_factory=set)
    refinements: int = 0
    frequencies: dict = field(default_factory=lambda: {Side.REMOVE: 0, Side.ADD: 0})
    settled: int = 0


@dataclass
class Level:
    """A level's transforms: the columns of ``used`` its examples use, the four transforms
    by ``(side, pair)`` (trimmed), and ``make(side, pair)`` building one again whole."""

    cols: np.ndarray
    dirs: dict
    make: Callable


def todo_levels(ex, states: list, used: np.ndarray) -> tuple[list, dict]:
    """The levels with examples still to do: ``lv -> (columns mask, examples)``."""
    states, outs = ex.run(pb.groups, states, used, keep_state=True)
    todo: dict = {}
    for o in outs:
        for lv, (mask, n) in o.items():
            m0, n0 = todo.get(lv, (False, 0))
            todo[lv] = (np.logical_or(m0, mask), n0 + n)
    return states, todo
