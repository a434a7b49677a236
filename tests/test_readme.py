"""The README's Python quick start runs as written (documentation that users paste)."""

from __future__ import annotations

import re
import shlex

from conftest import ROOT


def test_python_quick_start_runs(capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start \(Python\)\n\n```python\n(.*?)```", text, re.S)
    assert block, "README has no Python quick start"
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.split("\n")
    # its first line is the main job's eps and bracket: the published value 6.1877 inside
    eps, lo, up = (float(x) for x in re.findall(r"[\d.]+", out[0])[:3])
    assert lo <= 6.1877 <= up and eps == up


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_main_command_prints_the_readme_block(capsys):
    """The README's main job prints its block: every line as printed, but for the time of
    the query (the last column of the table row, and the width of its rule)."""
    from tightdp import cli

    part = _section((ROOT / "README.md").read_text(), "Install and run (the main job)")
    command, shown = re.findall(r"```(?:bash)?\n(.*?)```", part, re.S)[:2]
    args = shlex.split(command.split("&&")[1])
    assert args[0] == "tightdp"
    assert cli.main(args[1:]) == 0
    printed = capsys.readouterr().out

    def without_time(block: str) -> list[str]:
        lines = block.strip("\n").split("\n")
        return lines[:1] + [re.sub(r"\s+\S+$", "", line) for line in lines[1:]]

    assert without_time(printed) == without_time(shown), printed
    assert float(printed.strip().split()[-1]) >= 0.0  # the time of the query
    # the published value 6.1877 (the README: "true value ~ 6.1877") inside the printed bracket
    lower, eps, upper = (float(x) for x in printed.strip().split("\n")[-1].split()[:3])
    assert lower <= 6.1877 <= upper == eps


def test_readme_test_command_is_the_one_ci_runs():
    readme = _section((ROOT / "README.md").read_text(), "Tests")
    ci = (ROOT / ".ci" / "run").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).strip().split("\n")
    assert block[-1] == ci.strip().split("\n")[-1] == "python -m pytest -q"
    # every extra CI installs is installed by the README's lines, and no other
    extras = lambda text: set(re.findall(r'-e "\.\[([\w,-]+)\]"', text))  # noqa: E731
    split = lambda found: {x for group in found for x in group.split(",")}  # noqa: E731
    assert split(extras("\n".join(block))) == split(extras(ci))
    assert "torch==2.13.0" in block[1] and "torch==2.13.0" in ci
    assert "13 minutes" in readme and "skipped:" in readme


def test_readme_lists_every_spec_field():
    """Every field the state-file reader takes (of each accountant, each registered
    mechanism, and the document) is in the README's table of fields."""
    from tightdp import state
    from tightdp.mechanisms.fields import REGISTRY

    part = _section((ROOT / "README.md").read_text(), "State and composition files")
    rows: dict[str, set[str]] = {}
    where = ""
    for line in part.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rule = bool(cells[0]) and set(cells[0]) <= {"-"}
        if len(cells) == 3 and line.startswith("|") and not rule:
            where = cells[0].strip("`") or where
            rows.setdefault(where, set()).update(re.findall(r"`(\w+)`", cells[1]))
    expected = {"top level": set(state._TOP), "accountant": {"name", "options"},
                "every accountant": {"max_memory", "max_seconds", "neighboring"}}
    expected.update({name: set(options) for name, (_, options, _) in
                     state._ACCOUNTANTS.items() if options})
    expected.update({name: set(cls.FIELDS) for name, cls in REGISTRY.items()})
    for where, fields in expected.items():
        assert rows.get(where, set()) == fields, where


def test_skip_summary_counts_skips_by_reason():
    from types import SimpleNamespace

    from conftest import skip_summary

    def skipped(reason: str):
        return SimpleNamespace(longrepr=("tests/x.py", 3, f"Skipped: {reason}"))

    reports = [skipped("could not import 'riskcal': No module named 'riskcal'"),
               skipped("could not import 'opacus.accountants': No module named 'opacus'"),
               skipped("full-size check: set TIGHTDP_SLOW=1 to run"),
               skipped("could not import 'riskcal': No module named 'riskcal'"),
               skipped("full-size check: set TIGHTDP_SLOW=1 to run"),
               skipped("full-size check: set TIGHTDP_SLOW=1 to run"),
               skipped("dp_accounting is not installed"),
               skipped("rdp does not support PureDP"), skipped("gdp does not support Laplace")]
    assert skip_summary(reports) == ("skipped: 3 (full size: set TIGHTDP_SLOW=1), "
                                     "2 (peer not installed: riskcal), "
                                     "2 (an accountant without the mechanism), "
                                     "1 (peer not installed: opacus), "
                                     "1 (peer not installed: dp_accounting)")
    assert skip_summary([]) == ""
