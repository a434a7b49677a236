"""Shared test helpers: the reference cases (vendored from the project's shared reference set
into tests/data/reference_cases.json, so that a clone of this repository alone runs them)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tightdp as td

ROOT = Path(__file__).resolve().parents[1]
CASES_PATH = Path(__file__).resolve().parent / "data" / "reference_cases.json"

#: full-size slow tests when TIGHTDP_SLOW=1; otherwise reduced versions run
SLOW = os.environ.get("TIGHTDP_SLOW", "") == "1"


def same(a, b) -> bool:
    """Equal bit for bit (NaN equal to NaN, arrays elementwise, None to None)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, str | bool):
        return a == b
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return x.shape == y.shape and bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))


def load_cases() -> list[dict]:
    return json.loads(CASES_PATH.read_text())["cases"]


def case_by_id(cid: str) -> dict:
    """One reference case (a missing id is an error in the test, not a skip)."""
    for c in load_cases():
        if c["id"] == cid:
            return c
    raise KeyError(f"reference case {cid} is not in {CASES_PATH}")


def mechanism_of(m: dict) -> tuple[list[tuple[td.Mechanism, int]], str]:
    """(list of (mechanism, count), neighbouring) for a reference case's mechanism."""
    kind = m["kind"]
    if kind == "poisson_subsampled_gaussian":
        base = td.Gaussian(m["sigma"], m.get("sensitivity", 1.0))
        if m["neighboring"] == "substitute":
            # the reference defines the pair itself: Koskela et al.'s substitute pair
            mech = td.SampledWithoutReplacement(base, m["q"], pair="koskela2020")
        else:
            mech = td.PoissonSubsampled(base, m["q"])
        return [(mech, m["steps"])], m["neighboring"]
    if kind == "gaussian":
        return [(td.Gaussian(m["sigma"], m.get("sensitivity", 1.0)), m["steps"])], "any"
    if kind == "composition":
        out = []
        for part in m["parts"]:
            out += mechanism_of(part)[0]
        return out, m["neighboring"]
    if kind == "laplace":
        return [(td.Laplace(m["scale"], m.get("sensitivity", 1.0)), m["steps"])], "any"
    if kind == "pure_dp":
        return [(td.PureDP(m["eps0"]), m["steps"])], "any"
    if kind == "randomized_response":
        return [(td.RandomizedResponse(m["noise_parameter"], m["num_buckets"]),
                 m["steps"])], "replace_one"
    if kind == "mixture_of_gaussians":
        return [(td.MixtureOfGaussians(m["sensitivities"], m["probabilities"],
                                       m["standard_deviation"]), m["steps"])], m["neighboring"]
    raise KeyError(kind)


def relation_for(mechanisms) -> str:
    """The neighbouring relation to build an accountant composing ``mechanisms`` with:
    replace-one when one of them is defined under it and not under add/remove (sampling
    without / with replacement, randomized response), else add/remove (the default)."""
    for m in mechanisms:
        if "add_or_remove_one" not in m.relations and "replace_one" in m.relations:
            return "replace_one"
    return "add_or_remove_one"


@pytest.fixture(scope="session")
def reference_cases() -> list[dict]:
    return load_cases()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` are the full-size versions of checks that also run reduced by
    default; they run only with TIGHTDP_SLOW=1 (or when selected with ``-m slow``)."""
    if SLOW or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="full-size check: set TIGHTDP_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def skip_reason(report) -> str:
    """A skipped test's reason, shortened to its kind: a missing optional package (the
    reason of ``pytest.importorskip``) as "peer not installed: NAME", the reduced slow checks
    as "full size: set TIGHTDP_SLOW=1", the cases of an accountant that does not take a
    mechanism as one, any other reason as given (cut at 60 characters)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    text = " ".join(str(text).split()).removeprefix("Skipped: ")
    found = (re.search(r"could not import '([\w.]+)'", text)
             or re.fullmatch(r"([\w.-]+) is not installed", text))
    if found:
        return f"peer not installed: {found.group(1).split('.')[0]}"
    if "TIGHTDP_SLOW" in text:
        return "full size: set TIGHTDP_SLOW=1"
    if re.match(r"\w+ does not support ", text):  # one per (accountant, mechanism) case
        return "an accountant without the mechanism"
    return text if len(text) <= 60 else text[:57] + "..."


def skip_summary(reports) -> str:
    """One line counting skipped tests by reason, most frequent first (empty if none)."""
    counts = Counter(skip_reason(r) for r in reports)
    if not counts:
        return ""
    return "skipped: " + ", ".join(f"{n} ({why})" for why, n in counts.most_common())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The run ends with one line saying what was skipped and why (after pytest's own
    summary, before its count of passed and skipped tests)."""
    yield
    line = skip_summary(terminalreporter.stats.get("skipped", []))
    if line:
        terminalreporter.write_line(line)
