"""Mechanisms and their privacy loss random variables."""

from ..losses import DiscreteLoss, GaussianLoss, LocationMixtureLoss, PrivacyLoss
from .allocation import RandomAllocation
from .allocation_replace import AllocationReplaceOne
from .base import Mechanism
from .basic import ApproxDP, Gaussian, Laplace, PureDP, RandomizedResponse
from .discrete_laplace import DiscreteLaplace
from .fields import register
from .mixture import MixtureOfGaussians
from .shuffling import Shuffled, ShuffledMaxPair
from .subsampling import PoissonSubsampled, SampledWithoutReplacement, SampledWithReplacement
from .truncated import PublicCoinMixture, TruncatedPoisson
from .truncated_lower import TruncatedPoissonLowerPair

# the mechanisms of state files, in the order their errors list them
register(Gaussian, Laplace, DiscreteLaplace, RandomizedResponse, PureDP, ApproxDP,
         PoissonSubsampled, SampledWithoutReplacement, SampledWithReplacement, MixtureOfGaussians,
         Shuffled, RandomAllocation, TruncatedPoisson, AllocationReplaceOne)

__all__ = [
    "Mechanism",
    "AllocationReplaceOne",
    "PrivacyLoss",
    "GaussianLoss",
    "LocationMixtureLoss",
    "DiscreteLoss",
    "Gaussian",
    "Laplace",
    "DiscreteLaplace",
    "RandomizedResponse",
    "PureDP",
    "ApproxDP",
    "PoissonSubsampled",
    "SampledWithoutReplacement",
    "SampledWithReplacement",
    "MixtureOfGaussians",
    "Shuffled",
    "ShuffledMaxPair",
    "RandomAllocation",
    "TruncatedPoisson",
    "TruncatedPoissonLowerPair",
    "PublicCoinMixture",
]
