"""Accountants: each composes mechanisms and answers delta(eps) and eps(delta)."""

from .base import Accountant, DeltaResult, EpsilonResult
from .pld import PLDAccountant

__all__ = ["Accountant", "DeltaResult", "EpsilonResult", "PLDAccountant"]
