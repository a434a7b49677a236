"""Individual epsilon for DP-SGD with the saddle-point accountant: an APPROXIMATION.

Papers: Koskela, Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential
Privacy" (ICLR 2023), Sec. 5 and App. D.2, for what an individual eps is and the sensitivity
buckets; Alghamdi et al., "The Saddle-Point Accountant for Differential Privacy" (2023) for the
approximation.

What is computed
----------------
The same composition as :class:`~tightdp.individual.IndividualPLDAccountant`: example ``i``
sees, at each step, the Poisson subsampled Gaussian mechanism whose sensitivity is its
clipped gradient-norm ratio rounded *up* to the bucket grid ``c_b = b / B`` (App. D.2);
``n_{i,b}`` counts its steps in bucket ``b``. The CGF of a composition is the sum of the CGFs
(Alghamdi et al. 2023, eq. (72)), so example ``i``'s privacy loss has the CGF

    K_i(t) = sum_b n_{i,b} K_b(t)

with ``K_b`` the CGF (eq. (23)) of the privacy loss of ``PoissonSubsampled(Gaussian(sigma, c_b),
q)``, computed by :mod:`tightdp.losses.cgf`, one per direction (remove and add). With it the
saddle-point eps of :class:`~tightdp.SaddlePointAccountant` is computed per example and per
direction -- the saddle point of eq. (50), SP-MSD0 (eqs. (7)/(60)), SP-MSD1 (eq. (61)) or SP-CLT
(eqs. (8)/(66), Prop. 6), evaluated by the same function
(:func:`tightdp.curves.saddle.saddle_log_delta`) -- and the larger of the two directions is
returned. For an example whose norms are all >= C this is the accountant's answer for
``PoissonSubsampled(Gaussian(sigma), q)`` composed ``T`` times.

This is not a bound. The saddle-point value approximates the eps of each example's
composition (given its norms; the paper's approximative individual accountant of Sec. 5), with
no guarantee. Where the tilted loss is far from Gaussian (few effective compositions: the
SP-MSD1 correction terms exceed :data:`tightdp.curves.saddle.UNRELIABLE`, the accountant's
own diagnostic) the example is flagged unreliable -- here in either direction that was solved,
not only the one that sets the answer, because an unreliable direction may under-report. The
certified per-example numbers come from :class:`~tightdp.individual.IndividualPLDAccountant`;
the fully adaptive guarantee is the individual GDP filter's
(:class:`~tightdp.individual.IndividualGDPFilter`). What *is* certified here is ``upper``: the
refined moments bound (Alghamdi et al. 2023, eqs. (42)-(44)),
``delta(eps) <= e^{K_i(t) - t eps} t^t / (1+t)^{1+t}`` for every ``t > 0``, minimized over tilts
at which ``K_i`` is evaluated exactly (no interpolation), with the accountant's allowance for
the CGF quadrature made relative (``1e-11 (T_i + K_i(t))``).

How it is vectorized
--------------------
1. Brackets. Per direction the bucket CGFs and their first four derivatives are evaluated
   exactly (quadrature of :mod:`tightdp.losses.cgf`) at bracketing tilts built like the
   accountant's (``curves.saddle.tilt_grids``: 33 points from 1e-4 to 64 -- the accountant's
   ``solve_tilt`` uses 65, which brackets the same root wherever ``g`` increases -- then down
   to 1e-12, then up to the tilt cap 2048, or 1e12 for Gaussian losses). Matrix products with
   the counts give the examples' ``K_i, ..., K_i''''`` there, hence the saddle-point function
   ``g_i(t) = -log delta_approx(eps(t))`` and the refined-moments optimality function ``t
   K_i'(t) - K_i(t) + log(1 + t)`` (eq. (44)); the first grid point where each reaches ``-log
   delta`` brackets the example's root, as in the accountant (the refined-moments function is
   linear in the counts: one product row per tilt, ``t K_b' - K_b``). The refined-moments
   function (increasing) on the first grid, of both directions in one product per
   :data:`~.products.SUB_CHUNK` examples, right after their counts are converted to floats
   there (in cache): at the grid points of the brackets of the previous slice of examples (4-5
   points per direction; at every point for the first slice and for the examples whose root the
   window does not show inside it); the further grids only for the few examples off the first;
   the saddle-point function at the two ends of the refined-moments bracket, then grid point by
   grid point up or down from there (the same bracket wherever ``g_i`` is increasing on the
   grid).
2. Interpolants. On each bracket needed, every bucket's five rows are interpolated by Chebyshev
   polynomials of degree :data:`~.tables.DEGREE` at the Chebyshev-Lobatto tilts (exact values
   there). An example's composed interpolant is accepted when the sum over its buckets of
   ``n_{i,b}`` times their trailing coefficients is below :data:`~.tables.INTERP_RTOL` of its
   composed scale (plus a quadrature-noise floor). The CGF of the remove direction bends
   sharply in ``t`` near ``2 sigma^2 log(1/q) / c_b^2`` (where the tilted law switches to the
   sampled component), so some examples descend into halves of their bracket (exact composed
   values at the midpoint decide which) until it is resolved, at most
   :data:`~.solver.MAX_DEPTH` times.
3. Saddle points. The composed Chebyshev coefficients of an example's rows ``K_i, ..., K_i''''``
   are one matrix product of its counts with the bucket coefficients; those of ``K_i^(5)`` follow
   by the derivative recurrence of Chebyshev series from the composed ``K_i''''`` coefficients
   (linear: the derivative of the composed interpolant). The accountant's safeguarded Newton
   iteration in ``log t`` (bisection when a step leaves the bracket, the same stopping rules)
   solves ``g_i(t) = -log delta`` on the interpolant (the Chebyshev series summed directly, the
   ``T_k`` by their recurrence), and ``eps_i = K_i'(t) - 1/t - 1/(1+t)`` (eq. (50)). For
   SP-MSD0/1 the steps are Halley's, with the exact first derivative of ``g_i`` and its second
   without the SP-MSD1 term's, from a Halley step off the bracket end where ``g_i`` is nearer the
   target (~3 evaluations per example); SP-CLT iterates as the accountant (from the secant point,
   secant slopes after the first step). The examples of all pieces are iterated together (each on
   its own coefficients and interval), so small pieces cost no iteration of their own; eps at the
   final iterate (the last evaluated one, or a converged Newton step from it) is extrapolated
   from the last evaluation with the exact ``d eps / d log t = t (K_i'' + 1/t^2 + 1/(1+t)^2)``
   (eq. (50)), an error of the order of the squared step, far below the solver's tolerance (the
   interpolant is evaluated where the step exceeds :data:`~.solver.FINAL_STEP`); the SP-MSD1 terms
   reported are the last evaluation's.
4. Certified bound. The refined-moments bound is minimized over the Lobatto tilts of the
   bracket of its optimal tilt, where ``K_i`` is a matrix product of the counts with *exact*
   bucket values; any tilt gives a valid bound, so interpolation cannot make it under-report.
   In the second direction it is computed only for the examples where its value at the middle
   Lobatto tilt (one product row, an upper bound on the minimum, with a slack far above the
   rounding) does not already put it below both the first direction's bound and eps: elsewhere
   it changes neither ``upper`` (the maximum over the directions) nor step 5's choice.
5. Directions. The remove direction is solved first; the add direction's saddle point is
   computed only for the examples whose certified add-direction bound exceeds the eps found
   so far (elsewhere the add direction cannot raise the true eps above the value reported).
"""

from .accountant import IndividualSPAAccountant

__all__ = ["IndividualSPAAccountant"]
