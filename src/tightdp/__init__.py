"""tightdp: tight differential-privacy accounting with certified bounds."""

from . import risk as risk
from ._defaults import DEFAULT_RTOL, DELTA_MIN
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
from .budget import Budget, BudgetExceeded
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
from .dpsgd.risk import dpsgd_risk
from .dpsgd.setting import DPSGDSetting, dpsgd_setting
from .individual import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    IndividualPLDAccountant,
    IndividualSPAAccountant,
    NormRecorder,
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
from .sweep import SweepTable, sweep

__all__ = [
    "Accountant",
    "ApproxDP",
    "as_dict",
    "Budget",
    "BudgetExceeded",
    "calibrate_noise",
    "calibrate_sampling_rate",
    "calibrate_steps",
    "CalibrationResult",
    "DEFAULT_RTOL",
    "DELTA_MIN",
    "DeltaResult",
    "DiscreteLaplace",
    "DiscreteLoss",
    "dpsgd_delta",
    "dpsgd_epsilon",
    "dpsgd_risk",
    "risk",
    "dpsgd_setting",
    "DPSGDSetting",
    "EpsilonResult",
    "FFTAccountant",
    "Gaussian",
    "GaussianLoss",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "GDPAccountant",
    "GDPFilter",
    "GDPOdometer",
    "group_epsilon",
    "group_epsilons",
    "GroupResult",
    "InconsistentBounds",
    "individual_epsilons",
    "IndividualGDPFilter",
    "IndividualPLDAccountant",
    "IndividualSPAAccountant",
    "NormRecorder",
    "Laplace",
    "load",
    "LocationMixtureLoss",
    "Mechanism",
    "MixtureOfGaussians",
    "PLDAccountant",
    "PoissonSubsampled",
    "PrivacyLoss",
    "PRVAccountant",
    "PureDP",
    "RandomizedResponse",
    "RDPAccountant",
    "RDPFilter",
    "Result",
    "SaddlePointAccountant",
    "SampledWithoutReplacement",
    "SampledWithReplacement",
    "save",
    "ScaleCalibration",
    "set_progress",
    "sweep",
    "SweepTable",
]
