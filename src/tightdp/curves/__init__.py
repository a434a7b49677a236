"""Closed forms and bound families of privacy curves: Gaussian DP, Rényi DP and its
conversions, and the saddle-point formulas."""

from .gdp import compose_mu, gdp_delta, gdp_epsilon, gdp_log_delta, gdp_mu
from .saddle import (
    log_clt_theta,
    log_theta_max,
    rma_eps,
    root_decreasing,
    saddle_eps,
    saddle_log_delta,
    saddle_point_eps,
    solve_tilt,
    tilt_grids,
)

__all__ = ["gdp_delta", "gdp_log_delta", "gdp_epsilon", "gdp_mu", "compose_mu",
           "saddle_eps", "saddle_log_delta", "saddle_point_eps", "log_clt_theta",
           "log_theta_max", "rma_eps", "tilt_grids", "solve_tilt", "root_decreasing"]
