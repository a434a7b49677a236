"""The FFT product of the composition engine, and the bound on its floating-point error.

:func:`circular_product` folds every law modulo the FFT length, transforms it once, raises it
to its count in the Fourier domain and transforms back (Koskela et al. 2020, Alg. 1; Gopi et
al. 2021, Alg. 1), with a bound on the rounding error of every output value (the charge the
composed bounds carry); in long double where asked (:data:`UNIT_ROUNDOFF_EXTENDED`).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from scipy import fft as sfft

from .._numerics import UNIT_ROUNDOFF
from .grid import DiscretePLD

__all__ = ["UNIT_ROUNDOFF_EXTENDED", "circular_product", "fold", "product_seconds"]


#: constant of the FFT's pointwise error bound ``c u log2(N) sum |x|`` (every output of an
#: N-point transform is a sum over ``log2 N`` levels of butterflies, each adding a relative
#: error of at most a few ``u`` with accurately tabulated twiddle factors)
_C_FFT = 4.0


def circular_product(terms, n: int, lo_index: int, workers: int | None,
                      noise_bound: bool = True, extended: bool = False
                      ) -> tuple[np.ndarray, float]:
    """The composed law folded modulo ``n``, position ``j`` holding grid index
    ``lo_index + j`` (mod n): each law is folded once (atom ``i`` to position
    ``(offset + i) mod n``), transformed once, and raised to its count in the Fourier domain
    (Koskela et al. 2020, Alg. 1; Gopi et al. 2021, Alg. 1).

    Also returns ``log_noise``, the log of a bound on the floating-point error of every
    output value. Each forward coefficient ``F_ij`` of law ``i`` is within
    ``e_i = (c log2 N + 4) u sum|x_i|`` of the exact one, and the powering multiplies in a
    relative error of a few ``u`` per product, so with ``a_ij = |F_ij|`` the product's
    coefficient is within ``prod_i (a_ij (1 + 4u) + e_i)^k_i - prod_i a_ij^k_i`` of the
    exact one (binomial expansion, all orders). The inverse transform's output at any point
    is then within the mean of those errors over the spectrum plus its own
    ``c u log2 N mean_j |G_j|``. The bound grows with the count (``F^k`` amplifies
    the forward error ``k``-fold), which is what it must do: at ``10^12`` compositions the
    FFT itself is only accurate to about ``10^-4`` of the peak. With ``noise_bound=False``
    (a caller that reports no bound) that work is skipped and ``log_noise`` is NaN; the law
    is the same to the bit.

    ``extended=True`` computes the forward transforms and the powering in numpy's long
    double (unit roundoff :data:`UNIT_ROUNDOFF_EXTENDED`, ``2^-64`` on x86-64: 2048 times
    smaller than double's; the same as double where long double is double, and then nothing
    is gained), at the frequencies where the composed magnitude is within ``e^-60`` of its
    largest; the others are set to 0 and their largest possible magnitude is added to the
    error (:func:`_circular_product_extended`). The bound above is evaluated with the
    long-double unit roundoff, plus ``2 u |G_j|`` for rounding the long-double product to
    double; the inverse transform stays in double (its error is not amplified by the
    counts). For long compositions of laws that are nearly a point mass (tiny sampling
    rates, 10^6 steps) the ``k``-fold amplified forward error is the bound's whole content,
    and the long-double product lowers it by orders of magnitude; a long-double rfft is
    slower than a double one, so the powering is only done where it matters (figures in
    docs/pld-constants.md).
    """
    if extended and noise_bound:
        return _circular_product_extended(terms, n, lo_index, workers)
    acc: np.ndarray | None = None
    logs: list[np.ndarray] | None = None
    lg2 = math.log2(max(n, 2))
    for p, k in terms:
        f = sfft.rfft(fold(p, n), workers=workers)
        if noise_bound:
            e = (_C_FFT * lg2 + 4.0) * UNIT_ROUNDOFF * float(np.abs(p.probs).sum())
            logs = _add_logs(logs, _term_logs(np.abs(f), k, 4 * UNIT_ROUNDOFF, e))
        f = _int_power(f, k)
        acc = f if acc is None else np.multiply(acc, f, out=acc)
    if not noise_bound:
        res = sfft.irfft(acc, n=n, workers=workers)
        return np.roll(res, -(lo_index % n)), math.nan
    return _inverse_with_noise(cast(np.ndarray, acc),
                               float(_coefficient_errors(*cast("list[np.ndarray]", logs)).sum()),
                               n, lo_index, workers, sum(k for _, k in terms))


def _term_logs(a: np.ndarray, k: int, c: float, e: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one law's transform magnitudes ``a`` (computed within ``e`` each) raised to
    ``k`` with a relative error of ``c`` per product: ``k log a``, ``k log1p(c + e/a)`` and
    ``k log(a (1 + c) + e)`` (the last for ``a = 0``), summed over the laws by
    :func:`_add_logs` and turned into the coefficient errors by :func:`_coefficient_errors`.
    The middle one keeps the small relative increments (``c`` and ``e/a`` may be far below
    the double spacing at ``a ~ 1``)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        la = k * np.log(a)
        dl = k * np.log1p(c + e / a)
        lb = la + dl  # the same where both are finite; directly elsewhere (a = 0, e/a = inf)
        bad = ~np.isfinite(lb)
        if bad.any():
            lb[bad] = k * np.log(a[bad] * (1.0 + c) + e)
    return la, dl, lb


def _add_logs(acc: list[np.ndarray] | None,
              logs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Sum of :func:`_term_logs` over the laws (``acc`` None for the first)."""
    if acc is None:
        return list(logs)
    for x, y in zip(acc, logs, strict=True):
        np.add(x, y, out=x)
    return acc


def _coefficient_errors(log_a: np.ndarray, dlog: np.ndarray, log_b: np.ndarray
                        ) -> np.ndarray:
    """``prod_i (a_i (1 + c_i) + e_i)^k_i - prod_i a_i^k_i`` per frequency (the bound of
    :func:`circular_product`) from the sums of :func:`_term_logs`:
    ``e^log_a expm1(dlog)``, or ``e^log_b`` where some ``a_i`` is 0 or the increment is
    huge (then the product of the ``a_i`` is negligible beside it)."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.exp(log_a) * np.expm1(np.minimum(dlog, 700.0))
    bad = ~(dlog < 700.0)  # NaN and inf included
    if bad.any():
        err[bad] = np.exp(log_b[bad])
    return err


def _inverse_with_noise(acc: np.ndarray, err_sum: float, n: int, lo_index: int,
                        workers: int | None, k_total: int) -> tuple[np.ndarray, float]:
    """The inverse transform of the product ``acc`` (rotated to the window) and the log of
    the bound on its pointwise error (:func:`circular_product`): the mean over the
    (Hermitian) spectrum of the coefficient errors (``err_sum``: their sum over the half
    spectrum, evaluated with the magnitudes ``a_i`` as computed in double, each within a
    relative ``u`` of the transform's: hence the factor ``(1 + 2u)^k_total`` on it), plus the
    inverse transform's own ``(c log2 N + 4) u mean_j |G_j|``."""
    lg2 = math.log2(max(n, 2))
    mean_err = 2.0 * err_sum * math.exp(2.0 * UNIT_ROUNDOFF * k_total) / n
    mean_g = 2.0 * float(np.abs(acc).sum()) / n
    noise = mean_err + (_C_FFT * lg2 + 4.0) * UNIT_ROUNDOFF * mean_g
    res = sfft.irfft(acc, n=n, workers=workers)
    return np.roll(res, -(lo_index % n)), (math.log(noise) if noise > 0 else -math.inf)


#: unit roundoff of numpy's long double: ``2^-64`` for x86-64's 80-bit extended format,
#: ``UNIT_ROUNDOFF`` where long double is double
UNIT_ROUNDOFF_EXTENDED = float(np.finfo(np.longdouble).eps) / 2.0
#: in extended mode, frequencies whose composed log-magnitude is within this of the largest
#: are powered in long double (:func:`circular_product`)
_EXTENDED_RANGE = 60.0


def _circular_product_extended(terms, n: int, lo_index: int, workers: int | None
                               ) -> tuple[np.ndarray, float]:
    """:func:`circular_product` with long-double forward transforms and powering (see
    there, ``extended=True``). Only the frequencies whose composed magnitude is within
    ``e^-_EXTENDED_RANGE`` of the largest are powered; the others are set to 0, each with
    its largest possible true magnitude ``prod_i (a_i + e_i)^k_i`` added to the error sum
    (at most ``e^-60`` of the largest coefficient, times a little more than 1)."""
    lg2 = math.log2(max(n, 2))
    ux = UNIT_ROUNDOFF_EXTENDED
    spectra: list[tuple[np.ndarray, int]] = []
    logs: list[np.ndarray] | None = None
    for p, k in terms:
        fx = sfft.rfft(fold(p, n).astype(np.longdouble), workers=workers)
        e = (_C_FFT * lg2 + 4.0) * ux * float(np.abs(p.probs).sum())
        logs = _add_logs(logs, _term_logs(np.abs(fx).astype(float), k, 4 * ux, e))
        spectra.append((fx, k))
    logs = cast("list[np.ndarray]", logs)
    log_a = logs[0]
    keep = log_a >= float(np.max(log_a)) - _EXTENDED_RANGE
    sel = np.nonzero(keep)[0]
    prod: np.ndarray | None = None
    for fx, k in spectra:
        g = _int_power(fx[sel], k)
        prod = g if prod is None else np.multiply(prod, g, out=prod)
    del spectra
    acc = np.zeros(log_a.size, dtype=complex)
    acc[sel] = cast(np.ndarray, prod).astype(complex)
    err_sum = (float(_coefficient_errors(*(x[sel] for x in logs)).sum())
               + float(np.exp(logs[2][~keep]).sum())
               # rounding the long-double product to double: a relative u of each
               + 2.0 * UNIT_ROUNDOFF * float(np.abs(acc[sel]).sum()))
    return _inverse_with_noise(acc, err_sum, n, lo_index, workers, sum(k for _, k in terms))


#: seconds per law and per ``N log2 N`` of :func:`circular_product` (fold, transform, error
#: bound and powering), in double and in long double, with room for a loaded machine
#: (docs/pld-constants.md)
_SECONDS_DOUBLE = 2e-9
_SECONDS_EXTENDED = 1.2e-8


def product_seconds(n: int, laws: int, *, extended: bool) -> float:
    """An estimate of the time :func:`circular_product` takes for ``laws`` distinct laws on
    ``n`` points (each law is folded and transformed once: ``O(n log n)`` per law), so that
    a caller can refuse before starting a product that does not fit its time budget."""
    per = _SECONDS_EXTENDED if extended and UNIT_ROUNDOFF_EXTENDED < UNIT_ROUNDOFF else (
        _SECONDS_DOUBLE)
    return per * laws * n * math.log2(max(n, 2))


def _int_power(f: np.ndarray, k: int) -> np.ndarray:
    """``f ** k`` for an integer ``k >= 1`` by binary powering (in place, about
    ``2 log2 k`` multiplications; numpy's ``**`` goes through exp/log for large k and is
    several times slower with the same rounding error, of order ``k`` ulps)."""
    if k == 1:  # the transform itself (each caller's own array)
        return f
    result: np.ndarray | None = None
    base = f.copy()
    while True:
        if k & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        k >>= 1
        if not k:
            return cast(np.ndarray, result)
        np.multiply(base, base, out=base)


def fold(p: DiscretePLD, n: int) -> np.ndarray:
    """The weights of ``p`` folded modulo ``n`` (atom ``i`` at position ``(offset + i) mod n``):
    a law of at most ``n`` atoms is one cyclic shift (for ``offset = -n/2`` and ``n`` atoms,
    the half-swap ``D`` of Koskela et al. 2020)."""
    size, start = p.probs.size, p.offset % n
    if size > n:
        return np.bincount((p.offset + np.arange(size)) % n, weights=p.probs, minlength=n)
    out = np.zeros(n)
    head = min(size, n - start)
    out[start:start + head] = p.probs[:head]
    out[:size - head] = p.probs[head:]
    return out
