"""Individual and fully adaptive accounting (Koskela, Tobaben, Honkela, "Individual Privacy
Accounting with Gaussian Differential Privacy", 2023): GDP and RDP filters, the GDP odometer,
the individual GDP filter for DP-GD, and per-example eps of DP-SGD from gradient-norm
histories: certified with the PLD engine, approximated with the saddle-point accountant.

Every one answers ``epsilon(delta)`` (a number or an array of deltas) with an
:class:`~tightdp.EpsilonResult`, holding one value per example for the individual ones; the
filters and the odometer also answer ``delta(epsilon)`` with a :class:`~tightdp.DeltaResult`."""

from .filters import (
    GDPFilter,
    GDPOdometer,
    IndividualGDPFilter,
    RDPFilter,
    gaussian_rdp_order,
    rdp_to_epsilon,
)
from .history import NormHistory, sensitivity_grid
from .pld_individual import IndividualPLDAccountant, individual_epsilons
from .recording import NormRecorder
from .spa import IndividualSPAAccountant

__all__ = [
    "GDPFilter",
    "GDPOdometer",
    "IndividualGDPFilter",
    "RDPFilter",
    "gaussian_rdp_order",
    "rdp_to_epsilon",
    "IndividualPLDAccountant",
    "NormHistory",
    "NormRecorder",
    "individual_epsilons",
    "sensitivity_grid",
    "IndividualSPAAccountant",
]
