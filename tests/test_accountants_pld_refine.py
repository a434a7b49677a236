"""Tests of the PLD accountant's refinement driver (tightdp.accountants.pld_refine).

The driver is checked on scripted ``measure`` functions whose grid steps can be followed by
hand: the shrink factors, their clamps, the coarsening before a first bracket and the stops.
"""

from __future__ import annotations

import pytest

from tightdp.accountants.base import Direction
from tightdp.accountants.pld_refine import EpsQuery, QueryStats, clamped, refine
from tightdp.budget import Budget, BudgetExceeded


def _run(measure, d: float, *, widest: float = 1.0, floor: float = 0.0):
    budget = Budget.make(max_seconds=3600)
    return refine(measure, d, widest=widest, floor=floor, budget=budget,
                  deadline=budget.deadline())


def test_refine_shrinks_by_the_measured_factor_within_its_clamps():
    """Shrinks asked of 0.5, 0.01 (clamped up to 1/16) and 0.95 (clamped down to 1/1.25),
    then content: the steps are 1, 1/2, 1/32, 1/40."""
    asks = iter([0.5, 0.01, 0.95, None])
    run = _run(lambda d: next(asks), 1.0)
    assert run.converged and run.note == ""
    assert run.steps == [1.0, 0.5, 0.5 * (1.0 / 16), 0.5 * (1.0 / 16) * (1.0 / 1.25)]


def test_refine_coarsens_until_a_first_bracket_then_stops_at_the_budget():
    """Over the budget below a step of 0.3: 0.1 and 0.2 are retried twice as coarse (no
    bracket yet), 0.4 bounds, and its refinement to 0.2 stops the query with the last
    bracket (not converged, the budget named in the note)."""
    def measure(d: float):
        if d < 0.3:
            raise BudgetExceeded("rtol: too fine")
        return 0.5

    run = _run(measure, 0.1)
    assert run.steps == [0.4]
    assert not run.converged
    assert run.note == "stopped refining at grid step 0.2: rtol: too fine"


def test_refine_refuses_nothing_coarser_than_four_widest_ranges():
    """A step already 4 times the widest loss range is not coarsened further: no bracket."""
    def measure(d: float):
        raise BudgetExceeded("rtol: never fits")

    run = _run(measure, 1.0, widest=0.25)
    assert run.steps == [] and not run.converged
    assert run.note.startswith("stopped refining at grid step 1")


def test_refine_stops_at_the_memory_floor():
    """The next step 0.5 is below the memory budget's floor 0.6: one bracket, and the note
    says what to raise."""
    run = _run(lambda d: 0.5, 1.0, floor=0.6)
    assert run.steps == [1.0] and not run.converged
    assert "max_memory" in run.note and "allows no finer grid" in run.note


@pytest.mark.parametrize("d, factor, floor, want", [
    (1.0, 0.1, 0.2, 0.3),  # 0.1 is below 1.5 floor = 0.3: raised to reach it
    (1.0, 0.5, 0.2, 0.5),  # 0.5 stays above it
    (0.35, 0.1, 0.2, 0.1),  # the current step is within 1.2 of the target: not raised
])
def test_clamped(d, factor, floor, want):
    assert clamped(d, factor, floor) == pytest.approx(want, rel=1e-15)


def test_eps_query_bounds_the_largest_direction_first_and_skips_the_dominated():
    """Pilot bounds 2 (remove) and 3 (add): add is bounded first; once it is bounded at 2.5,
    remove (pilot 2 < 2.5) cannot raise the maximum and is skipped; the top direction is
    add and the upper bound 2.5."""
    q = EpsQuery([Direction.REMOVE, Direction.ADD],
                 pre={Direction.REMOVE: 2.0, Direction.ADD: 3.0})
    seen = []
    for r in q.worth_bounding():
        seen.append(r)
        q.bounded(r, 2.5, 0.1)
    assert seen == [Direction.ADD]
    assert q.top() is Direction.ADD and q.upper() == 2.5 and q.at_step[Direction.ADD] == 0.1


def test_query_stats_report_only_what_happened():
    s = QueryStats()
    assert s.details() == {}
    s.saw(10)
    s.saw(7)
    s.tilted(2.0)
    s.tilted(1.0)
    assert s.details() == {"fft_points": 10, "tilt": 2.0}
