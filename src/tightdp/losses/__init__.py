"""Privacy loss random variables: the law of ``log P(o)/Q(o)`` under P and Q, and its CGF."""

from .base import PrivacyLoss
from .cgf import cgf, cgf_and_abs3, tilted_abs_third_moment
from .coin import CoinMixtureLoss
from .discrete import DiscreteLoss
from .gaussian import GaussianLoss
from .mixture import LocationMixtureLoss

__all__ = ["PrivacyLoss", "GaussianLoss", "LocationMixtureLoss", "DiscreteLoss",
           "CoinMixtureLoss", "cgf", "cgf_and_abs3", "tilted_abs_third_moment"]
