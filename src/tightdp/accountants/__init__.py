"""Accountants: each composes mechanisms and answers delta(eps) and eps(delta)."""

from .base import Accountant, DeltaResult, EpsilonResult
from .gdp import GDPAccountant
from .pld import PLDAccountant
from .rdp import RDPAccountant
from .spa import SaddlePointAccountant

__all__ = ["Accountant", "DeltaResult", "EpsilonResult", "PLDAccountant"]
__all__ += ["GDPAccountant", "RDPAccountant"]
__all__ += ["SaddlePointAccountant"]
