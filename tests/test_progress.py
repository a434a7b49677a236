"""tightdp.progress: bars only on a terminal or when asked, off with set_progress(False) or
TIGHTDP_PROGRESS=0; diagnostics through the 'tightdp' logger, never print."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tightdp as td
from tightdp.progress import progress_bar, progress_enabled, set_progress


@pytest.fixture(autouse=True)
def _automatic():
    set_progress(None)
    yield
    set_progress(None)


def test_off_when_not_a_terminal(capsys):
    assert not progress_enabled()  # pytest captures stderr: not a terminal
    assert list(progress_bar(range(3), desc="x")) == [0, 1, 2]
    with progress_bar(total=5) as bar:
        bar.update(5)
    assert capsys.readouterr().err == ""


def test_switch_and_environment(monkeypatch):
    set_progress(True)
    assert progress_enabled()
    set_progress(False)
    assert not progress_enabled()
    set_progress(None)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setenv("TIGHTDP_PROGRESS", "0")
    assert not progress_enabled()
    with pytest.raises(ValueError, match="enabled"):
        set_progress("yes")


def test_forced_bar_draws_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr("tightdp.progress.SHOW_AFTER_SECONDS", 0.0)
    with progress_bar(total=4, desc="work", enabled=True) as bar:
        bar.update(4)
    assert "work" in capsys.readouterr().err


def test_individual_accounting_logs_not_prints(capsys, caplog):
    acc = td.IndividualPLDAccountant(sampling_rate=0.1, noise_multiplier=1.0, clip_norm=1.0,
                                     n_examples=4, progress=False)
    for _ in range(3):
        acc.step(np.array([0.5, 1.0, 0.0, 2.0]))
    with caplog.at_level(logging.INFO, logger="tightdp"):
        r = acc.epsilon(1e-5)
    assert np.all(np.isfinite(r.epsilon))
    assert any("grid step" in m for m in caplog.messages)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_cli_quiet_turns_bars_off():
    from tightdp import cli

    set_progress(True)
    assert cli.main(["epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps",
                     "10", "--delta", "1e-5", "--quiet"]) == 0
    assert not progress_enabled()
    assert cli.main(["epsilon", "--sampling-rate", "0.01", "--noise-multiplier", "1", "--steps",
                     "10", "--delta", "1e-5"]) == 0
    assert not progress_enabled()  # automatic again: not a terminal under pytest
