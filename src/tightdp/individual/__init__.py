"""Individual and fully adaptive accounting (Koskela, Tobaben, Honkela, paper 000): GDP and
RDP filters, the GDP odometer, the individual GDP filter for DP-GD, and per-example eps of
DP-SGD from gradient-norm histories: certified with the PLD engine, approximated with the
saddle-point accountant."""

from .filters import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    RDPFilter,
    gaussian_rdp_order,
    rdp_to_epsilon,
)
from .pld_individual import (
    IndividualPLDAccountant,
    NormHistory,
    individual_epsilons,
    sensitivity_grid,
)
from .spa_individual import IndividualSPAAccountant, IndividualSPAResult

__all__ = [
    "GDPFilter",
    "GDPOdometer",
    "IndividualGDPFilter",
    "RDPFilter",
    "gaussian_rdp_order",
    "rdp_to_epsilon",
    "IndividualPLDAccountant",
    "NormHistory",
    "individual_epsilons",
    "sensitivity_grid",
    "IndividualSPAAccountant",
    "IndividualSPAResult",
]
