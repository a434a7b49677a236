"""Accountants: each composes mechanisms and answers delta(eps) and eps(delta)."""

from ..results import DeltaResult, EpsilonResult
from .base import Accountant
from .fft import FFTAccountant
from .gdp import GDPAccountant
from .pld import PLDAccountant
from .prv import PRVAccountant
from .rdp import RDPAccountant
from .spa import SaddlePointAccountant

__all__ = ["Accountant", "DeltaResult", "EpsilonResult", "PLDAccountant"]
__all__ += ["GDPAccountant", "RDPAccountant"]
__all__ += ["PRVAccountant"]
__all__ += ["SaddlePointAccountant"]
__all__ += ["FFTAccountant"]
