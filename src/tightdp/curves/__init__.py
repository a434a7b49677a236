"""Closed forms and bound families of privacy curves: Gaussian DP, Rényi DP and its
conversions, and the saddle-point formulas."""

from .gdp import compose_mu, gdp_delta, gdp_epsilon, gdp_log_delta, gdp_mu

__all__ = ["gdp_delta", "gdp_log_delta", "gdp_epsilon", "gdp_mu", "compose_mu"]
