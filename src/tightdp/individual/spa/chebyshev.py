"""Chebyshev interpolation on the Lobatto points: nodes, coefficients (DCT-I), evaluation
by the three-term recurrence and the derivative recurrence (Mason, Handscomb, *Chebyshev
Polynomials*, 2003), used for the bucket CGFs of the per-example saddle-point accountant."""

from __future__ import annotations

import numpy as np
from scipy import fft as sfft

__all__ = ["lobatto", "cheb_coefficients", "cheb_eval", "cheb_derivative"]


def lobatto(p: int) -> np.ndarray:
    """Chebyshev-Lobatto points ``cos(pi m / p)``, m = 0..p (from +1 down to -1); for even
    ``p`` the middle one exactly 0 (``cos(pi / 2)`` rounds to 6e-17)."""
    x = np.cos(np.pi * np.arange(p + 1) / p)
    if p % 2 == 0:
        x[p // 2] = 0.0
    return x


def cheb_coefficients(vals: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of the interpolant through values at the Lobatto points of the
    last axis (DCT-I: ``c_k = (2/p) sum'' f_m cos(pi k m / p)``, end coefficients halved)."""
    p = vals.shape[-1] - 1
    c = sfft.dct(vals, type=1, axis=-1) / p
    c[..., 0] *= 0.5
    c[..., -1] *= 0.5
    return c


def cheb_eval(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_k c[:, k] T_k(x)`` for coefficients ``c`` of shape ``(R, p+1, n)`` at ``x`` (n,):
    the ``T_k(x)`` by their three-term recurrence ``T_{k+1} = 2 x T_k - T_{k-1}`` (Mason,
    Handscomb, *Chebyshev Polynomials*, 2003, Sec. 1.2.2; ``|T_k| <= 1`` on ``[-1, 1]``, so
    the direct sum is as accurate as Clenshaw's recurrence), once per column for the ``R``
    rows, then summed (half the operations of Clenshaw's recurrence on the ``R`` rows) by one
    ``einsum`` (the products accumulated in order of degree, as a loop over the degrees would,
    in one pass instead of that loop of array operations)."""
    p1 = c.shape[1]
    tk = np.empty((p1, x.size))
    tk[0] = 1.0
    tk[1] = x
    x2 = 2.0 * x
    for k in range(2, p1):
        np.multiply(x2, tk[k - 1], out=tk[k])
        tk[k] -= tk[k - 2]
    return np.einsum("rkn,kn->rn", c, tk)


def cheb_derivative(c: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients (first axis: degree, one column per example; same shape as
    ``c``, the last one zero) of ``d/dt`` of the series ``c`` in ``x = scale (t - a) - 1``
    (``scale`` per column): ``d_{k-1} = d_{k+1} + 2 k c_k``, the constant term halved (the
    derivative recurrence of Chebyshev series; Mason, Handscomb, *Chebyshev Polynomials*,
    2003, Sec. 2.4.5). Linear in ``c``: the derivative of a composed interpolant is the
    composition of its buckets' derivatives."""
    p = c.shape[0] - 1
    d = np.empty_like(c)
    d[p] = 0.0
    for k in range(p, 0, -1):
        np.multiply(c[k], 2.0 * k, out=d[k - 1])
        if k + 1 <= p:
            d[k - 1] += d[k + 1]
    d[0] *= 0.5
    d *= scale
    return d
