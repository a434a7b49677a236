"""tightdp: tight differential-privacy accounting with certified bounds."""

from ._budget import BudgetExceeded
from ._defaults import DEFAULT_RTOL
from ._version import __version__ as __version__
from .accountants import (
    Accountant,
    FFTAccountant,
    GDPAccountant,
    PLDAccountant,
    PRVAccountant,
    RDPAccountant,
    SaddlePointAccountant,
)
from .curves.gdp import gdp_delta, gdp_epsilon, gdp_mu
from .dpsgd import (
    GroupResult,
    calibrate_noise,
    calibrate_sampling_rate,
    calibrate_steps,
    dpsgd_delta,
    dpsgd_epsilon,
    group_epsilon,
    group_epsilons,
)
from .dpsgd.calibrate import CalibrationResult
from .dpsgd.setting import DPSGDSetting, dpsgd_setting
from .individual import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    IndividualPLDAccountant,
    IndividualSPAAccountant,
    RDPFilter,
    individual_epsilons,
)
from .mechanisms import (
    ApproxDP,
    DiscreteLaplace,
    DiscreteLoss,
    Gaussian,
    GaussianLoss,
    Laplace,
    LocationMixtureLoss,
    Mechanism,
    MixtureOfGaussians,
    PoissonSubsampled,
    PrivacyLoss,
    PureDP,
    RandomizedResponse,
    SampledWithoutReplacement,
    SampledWithReplacement,
)
from .progress import set_progress
from .results import DeltaResult, EpsilonResult, InconsistentBounds, Result, as_dict
from .state import ScaleCalibration, load, save

__all__ = [
    "Accountant",
    "FFTAccountant",
    "DeltaResult",
    "EpsilonResult",
    "PLDAccountant",
    "PRVAccountant",
    "RDPAccountant",
    "GDPAccountant",
    "SaddlePointAccountant",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "GDPFilter",
    "GDPOdometer",
    "IndividualGDPFilter",
    "IndividualPLDAccountant",
    "IndividualSPAAccountant",
    "RDPFilter",
    "individual_epsilons",
    "Mechanism",
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
    "dpsgd_epsilon",
    "dpsgd_delta",
    "group_epsilon",
    "GroupResult",
    "CalibrationResult",
    "ScaleCalibration",
    "Result",
    "as_dict",
    "InconsistentBounds",
    "BudgetExceeded",
    "calibrate_noise",
    "calibrate_steps",
    "calibrate_sampling_rate",
    "DEFAULT_RTOL",
    "group_epsilons",
    "DPSGDSetting",
    "dpsgd_setting",
    "set_progress",
    "save",
    "load",
]
