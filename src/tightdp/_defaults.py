"""Defaults shared by every front door (one literal each)."""

from __future__ import annotations

__all__ = ["DEFAULT_RTOL", "DELTA_MIN"]

#: default relative width of a certified bracket (PLD accountant, DP-SGD front doors,
#: calibration searches)
DEFAULT_RTOL = 1e-3

#: smallest delta any query accepts (every accountant, front door and the command). Below
#: the smallest normal double (2.2e-308) a delta carries fewer than 53 significant bits and
#: the engines' own intermediate values (delta / 1000, tilts of the tail bounds) underflow,
#: so certification stops there; 1e-300 leaves eight decades of room for them. A query below
#: it is refused with a ValueError naming delta; a delta(epsilon) upper bound below it is
#: reported as DELTA_MIN (a true delta that small is not representable with full precision).
DELTA_MIN = 1e-300
