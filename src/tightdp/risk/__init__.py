"""What eps means: certified trade-off curves, attack success (TPR at FPR, advantage,
posterior success, the nearest Gaussian-DP curve) and calibration to a risk target.

The curve is read off the certified discretized pairs of the PLD accountant
(:mod:`tightdp.risk.tradeoff`), through the duality of Dong, Roth & Su 2022
(:mod:`tightdp.risk.curve`); :mod:`tightdp.risk.calibrate` searches a noise multiplier whose
certified curve meets a risk target.
"""

from .calibrate import RiskTarget, calibrate_noise_to_risk
from .curve import Profile
from .tradeoff import DEFAULT_FPR, DEFAULT_TOL, TradeoffResult, risk_values, tradeoff

__all__ = ["tradeoff", "TradeoffResult", "Profile", "risk_values", "DEFAULT_TOL", "DEFAULT_FPR",
           "RiskTarget", "calibrate_noise_to_risk"]
