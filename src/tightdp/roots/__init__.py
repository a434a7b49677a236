"""Root finding: the one family of safeguarded solvers of the package. Every monotone root
search imports from here (or uses scipy.optimize).

* bracketing (:mod:`~tightdp.roots.bracket`) -- :func:`walk_out` (additive steps doubling
  from a start, vectorized, with clamps; also settles a root on the safe side by steps
  growing from an ulp), :func:`expand_bracket` (its scalar bracket form), :func:`grow_until`
  (geometric), :func:`bisect`, :func:`table_start`, :func:`secant_start`;
* Newton iterations (:mod:`~tightdp.roots.newton`) -- :func:`newton_bracketed` (arrays of
  open brackets), :func:`newton_scalar` (one root, bracket possibly open to the right),
  :func:`newton_monotone` (convex increasing, from the right: no bracket),
  :func:`newton_polish` (from a table cell), :func:`secant_walk` (unbracketed, to be
  settled), :func:`hermite_start`;
* roots on grids in ``log x`` (:mod:`~tightdp.roots.grids`) -- :func:`bracket_on_grids`,
  :func:`solve_on_grids` (many targets), :func:`solve_few` (a query's few targets), answering
  :class:`Roots`;
* roots of decreasing functions on a verified side (:mod:`~tightdp.roots.decreasing`) --
  :func:`root_decreasing`, :func:`roots_decreasing`;
* searches over expensive queries (:mod:`~tightdp.roots.search`; each evaluation an
  accountant run) -- :func:`grow_bracket`, :func:`step_out`, :func:`bisect_until`,
  :func:`bisect_log`, :func:`bisect_int`, :func:`descend_to_fixed_point`,
  :func:`bracket_of_points`.

Certified callers keep the root on the safe side: the bracket ends keep their defining
property at every step, and the caller returns the end (or the settled point) whose side is
safe for the bound it reports. A solver that serves both one query and arrays of queries
takes one path by the size of its input; where a second path in Python floats exists (for a
few elements, to save numpy's per-call costs) it takes the same IEEE operations in the same
order, hence gives the same numbers, and its unit test checks that. Where the two paths are
one formula, it is written once over an arithmetic argument ``xp`` (``numpy``, or
``FLOATS`` of :mod:`tightdp.roots._floats`, the one home of numpy's edge semantics on
floats). Two float paths remain separate programs: ``grids._newton_few`` is a mode of its
own (it stops at an evaluated point, for callers that read their values there) and
``decreasing._roots_decreasing_floats`` runs the arrays' masked steps element by element.
"""

from .bracket import (
    BracketError,
    bisect,
    expand_bracket,
    grow_until,
    secant_start,
    table_start,
    walk_out,
)
from .decreasing import root_decreasing, roots_decreasing
from .grids import Brackets, Roots, bracket_on_grids, solve_few, solve_on_grids
from .newton import (
    hermite_start,
    newton_bracketed,
    newton_monotone,
    newton_polish,
    newton_scalar,
    secant_walk,
)
from .search import (
    bisect_int,
    bisect_log,
    bisect_until,
    bracket_of_points,
    descend_to_fixed_point,
    grow_bracket,
    step_out,
)

__all__ = ["BracketError", "walk_out", "expand_bracket", "grow_until", "bisect",
           "table_start", "secant_start", "newton_bracketed", "newton_scalar",
           "newton_monotone", "newton_polish", "secant_walk", "hermite_start",
           "Roots", "Brackets", "bracket_on_grids", "solve_on_grids", "solve_few",
           "root_decreasing", "roots_decreasing", "grow_bracket", "step_out", "bisect_until",
           "bisect_log", "bisect_int", "descend_to_fixed_point", "bracket_of_points"]
