"""Every reference case the mechanisms cover: the certified PLD bracket overlaps the
reference bracket, and our upper bound is never below the reference lower bound."""

from __future__ import annotations

import pytest

import tightdp as td
from conftest import load_cases, mechanism_of, relation_for

CASES = load_cases()
FAST = {"A01", "A02", "A03", "A05", "A06", "A09", "A21", "A22", "B01", "B02", "B03", "B06",
        "C01", "C02", "C05", "C09", "E01", "D-P-s1-k1", "D-F-s1-k1"}


def _params():
    for c in CASES:
        marks = [] if c["id"] in FAST else [pytest.mark.slow]
        yield pytest.param(c, id=c["id"], marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_reference_bracket_overlaps(case):
    terms, _ = mechanism_of(case["mechanism"])
    acc = td.PLDAccountant(rtol=1e-3, neighboring=relation_for(m for m, _ in terms))
    for mech, k in terms:
        acc.compose(mech, k)
    q = case["query"]
    r = acc.epsilon(q["delta"]) if q["type"] == "eps_at_delta" else acc.delta(q["eps"])
    tol = 1e-12 * max(abs(case["upper"]), 1e-300)
    assert r.upper >= case["lower"] - tol, "certified upper bound below the true value"
    assert r.lower <= case["upper"] + tol, "certified lower bound above the true value"
    assert r.certified
