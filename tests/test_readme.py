"""The README's Python quick start runs as written (documentation that users paste)."""

from __future__ import annotations

import re

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
