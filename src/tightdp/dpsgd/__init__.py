"""DP-SGD front doors: one validated training setting becomes one mechanism; epsilon, group
privacy and calibration are built on it."""

from .calibrate import (
    CalibrationResult,
    calibrate_noise,
    calibrate_sampling_rate,
    calibrate_steps,
)
from .epsilon import dpsgd_epsilon
from .group import GroupResult, group_epsilon

__all__ = ["dpsgd_epsilon", "group_epsilon", "GroupResult", "calibrate_noise",
           "calibrate_steps", "calibrate_sampling_rate", "CalibrationResult"]
