"""The one discrete-PLD engine: grid, discretizers, FFT composition, curve queries."""

from .compose import ComposedPLD, compose
from .discretize import connect_the_dots, dominated, loss_range
from .grid import DiscretePLD, delta_from_pmf, epsilon_from_pmf
from .windows import compose_fixed_window, compose_grid_chernoff

__all__ = ["DiscretePLD", "ComposedPLD", "compose", "compose_fixed_window",
           "compose_grid_chernoff", "connect_the_dots", "dominated",
           "loss_range", "delta_from_pmf", "epsilon_from_pmf"]
