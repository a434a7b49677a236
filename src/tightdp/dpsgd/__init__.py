"""DP-SGD front doors: one validated training setting becomes one mechanism; epsilon, delta,
group privacy and calibration are built on it."""

from .calibrate import (
    CalibrationResult,
    calibrate_noise,
    calibrate_noise_risk,
    calibrate_sampling_rate,
    calibrate_steps,
)
from .epsilon import dpsgd_accountant, dpsgd_delta, dpsgd_epsilon
from .group import GroupResult, group_epsilon, group_epsilons
from .risk import dpsgd_risk
from .setting import DPSGDSetting, dpsgd_setting

__all__ = ["dpsgd_epsilon", "dpsgd_delta", "dpsgd_accountant", "group_epsilon",
           "group_epsilons", "GroupResult", "calibrate_noise",
           "calibrate_steps", "calibrate_sampling_rate", "CalibrationResult", "DPSGDSetting",
           "dpsgd_setting", "dpsgd_risk", "calibrate_noise_risk"]
