"""Defaults shared by every front door (one literal each)."""

from __future__ import annotations

__all__ = ["DEFAULT_RTOL"]

#: default relative width of a certified bracket (PLD accountant, DP-SGD front doors,
#: calibration searches)
DEFAULT_RTOL = 1e-3
