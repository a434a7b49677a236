"""The answers every accountant and front door returns, and the one way to turn them into dicts.

Every "epsilon at delta" is an :class:`EpsilonResult`, every "delta at epsilon" a
:class:`DeltaResult`; a query of many values (an array of deltas, an array of epsilons, or one
value per example of an individual accountant) holds arrays in the same fields. Every result
type derives from :class:`Result`, whose :meth:`Result.as_dict` is :func:`as_dict`: strict JSON
values (numpy arrays and scalars as lists and numbers, NaN as None, an infinity as None with a
``<field>_infinite`` flag), so that ``json.dumps(r.as_dict(), allow_nan=False)`` always works.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np

__all__ = ["Result", "EpsilonResult", "DeltaResult", "InconsistentBounds", "check_bracket",
           "as_dict"]


class InconsistentBounds(RuntimeError):
    """A lower bound came out above an upper bound: a bug in this library, never hidden."""


def check_bracket(lower, upper, what: str, accountant: str) -> None:
    """Raise :class:`InconsistentBounds` if ``lower > upper`` anywhere beyond floating-point
    rounding (relative 1e-9). Both are certified bounds of one true value, so this can only
    come from a bug; clipping one to the other would hide it (and possibly an under-report).
    """
    lo = np.asarray(lower, dtype=float)
    up = np.asarray(upper, dtype=float)
    bad = lo > up * (1 + 1e-9) + 1e-300
    if np.any(bad):
        i = int(np.argmax(bad.reshape(-1)))
        raise InconsistentBounds(
            f"{accountant}: internal inconsistency, lower bound {lo.reshape(-1)[i]!r} above "
            f"upper bound {up.reshape(-1)[i]!r} for {what}; this is a bug in tightdp, please "
            "report it with the inputs")


# ------------------------------------------------------------------------------------------
# the one conversion to JSON values
# ------------------------------------------------------------------------------------------
def _json(x):
    """``x`` as strict JSON: ``(value, flag)``. An infinite float becomes None and ``flag``
    says which: True for +inf, "-" for -inf (for a list: a list of such flags, None where
    finite); NaN becomes None with no flag (undefined). Dicts carry their flags inside, as
    ``<key>_infinite`` (+inf) and ``<key>_negative_infinite`` (-inf)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    if hasattr(x, "tolist") and not isinstance(x, float):  # numpy arrays and scalars
        x = x.tolist()
    if isinstance(x, bool) or x is None or isinstance(x, str | int):
        return x, None
    if isinstance(x, float):
        if math.isnan(x):
            return None, None
        if math.isinf(x):
            return None, (True if x > 0 else "-")
        return float(x), None
    if isinstance(x, dict):
        out = {}
        for k, val in x.items():
            value, flag = _json(val)
            out[str(k)] = value
            if flag is not None:
                pos, neg = _split_flag(flag)
                if pos is not None:
                    out[f"{k}_infinite"] = pos
                if neg is not None:
                    out[f"{k}_negative_infinite"] = neg
        return out, None
    if isinstance(x, list | tuple):
        pairs = [_json(val) for val in x]
        flags = [f for _, f in pairs]
        return [val for val, _ in pairs], (None if all(f is None for f in flags) else flags)
    return str(x), None


def _split_flag(flag):
    """A flag of :func:`_json` as (booleans for +inf, booleans for -inf), each None when
    there is no such infinity (lists mirrored element by element, False where not)."""
    if flag is True:
        return True, None
    if flag == "-":
        return None, True
    if isinstance(flag, list):
        parts = [_split_flag(f) if f is not None else (None, None) for f in flag]
        pos = [p for p, _ in parts]
        neg = [n for _, n in parts]
        return (None if all(p is None for p in pos) else [p if p is not None else False
                                                           for p in pos],
                None if all(n is None for n in neg) else [n if n is not None else False
                                                          for n in neg])
    return None, None


def as_dict(obj) -> dict:
    """A result (any dataclass) or a dict as a dict of strict JSON values.

    numpy arrays and scalars become lists and Python numbers; NaN becomes None (undefined);
    an infinity becomes None and is flagged beside it: ``<key>_infinite`` (True, or a list of
    booleans for a list) for +inf, ``<key>_negative_infinite`` for -inf; nested dicts and
    dataclasses likewise; any other object becomes its ``str``. The output of
    ``json.dumps(as_dict(r), allow_nan=False)`` therefore always exists and loads back to
    ``as_dict(r)``. The command line's ``--json`` output is this function's.
    """
    if not isinstance(obj, dict) and not (dataclasses.is_dataclass(obj)
                                          and not isinstance(obj, type)):
        raise ValueError(f"as_dict takes a result dataclass or a dict, got "
                         f"{type(obj).__name__}")
    return _json(obj)[0]


class Result:
    """Base of every result dataclass: :meth:`as_dict` (see :func:`as_dict`)."""

    def as_dict(self) -> dict:
        """This result as a dict of strict JSON values (see :func:`as_dict`)."""
        return as_dict(self)


class _Answered(Result):
    """What every answer has besides its two values (the fields :data:`_ANSWER_FIELDS`,
    made by :func:`_answer`), spelled out for the type checker."""

    if TYPE_CHECKING:
        lower: float | np.ndarray | None
        upper: float | np.ndarray | None
        accountant: str
        certified: bool
        estimate: float | np.ndarray | None
        note: str
        details: dict

        def __float__(self) -> float: ...


def _answer_html(r: _Answered, value: str, at: str) -> str:
    """``_repr_html_`` of an answer: the bracket, a table of at most 20 of its values, and
    (for many values, matplotlib importable) a small plot of the band."""
    from ._html import result_html

    vals = np.atleast_1d(np.asarray(getattr(r, value), dtype=float))
    ats = np.broadcast_to(np.atleast_1d(np.asarray(getattr(r, at), dtype=float)), vals.shape)
    lo = (np.full(vals.shape, np.nan) if r.lower is None
          else np.atleast_1d(np.asarray(r.lower, dtype=float)))
    hi = (np.full(vals.shape, np.nan) if r.upper is None
          else np.atleast_1d(np.asarray(r.upper, dtype=float)))
    kind = "certified upper bound" if r.certified else "approximation (not a bound)"
    head = (f"{value} = {vals[0]:.6g} at {at} = {ats[0]:.6g}" if vals.size == 1
            else f"{value} at {vals.size} values of {at}") + f" ({kind}; {r.accountant})"
    rows = [(f"{a:.6g}", f"{x:.6g}", f"{y:.6g}", f"{z:.6g}")
            for a, x, y, z in zip(ats.ravel(), lo.ravel(), vals.ravel(), hi.ravel(),
                                  strict=True)]
    band = None
    if 1 < vals.size and ats.ndim == 1 and np.all(np.diff(ats) > 0):
        band = (ats, np.where(np.isnan(lo), vals, lo), np.where(np.isnan(hi), vals, hi))
    return result_html(head + (f". {r.note}" if r.note else ""),
                       (at, "lower", value, "upper"), rows, band)


def _one_float(x, what: str) -> float:
    """``float(result)``: the single value of a result of one query."""
    arr = np.asarray(x, dtype=float)
    if arr.size != 1:
        raise TypeError(f"this result holds {arr.size} values of {what} (one per query "
                        f"value or example), not one number: use .{what}")
    return float(arr.reshape(-1)[0])


#: The fields every answer has after its two values (what was computed, and at what): the
#: certified bracket, who answered, whether ``upper`` is certified, the estimate, a note and
#: the method's details. One list for :class:`EpsilonResult` and :class:`DeltaResult`.
_ANSWER_FIELDS = (
    ("lower", "float | np.ndarray | None", dataclasses.MISSING),
    ("upper", "float | np.ndarray | None", dataclasses.MISSING),
    ("accountant", "str", dataclasses.MISSING),
    ("certified", "bool", dataclasses.MISSING),
    ("estimate", "float | np.ndarray | None", None),
    ("note", "str", ""),
    ("details", "dict", dict),  # a factory: each result gets its own dict
)


_R = TypeVar("_R")


def _answer(value: str, at: str) -> Callable[[type[_R]], type[_R]]:
    """Make the decorated class a dataclass answering ``value`` at ``at``: fields ``value``,
    ``at`` (positional, in that order), then :data:`_ANSWER_FIELDS`; ``float(result)`` is the
    single ``value`` of a one-query result."""

    def make(cls):
        ann = {value: "float | np.ndarray", at: "float | np.ndarray"}
        for name, typ, default in _ANSWER_FIELDS:
            ann[name] = typ
            if default is dict:
                setattr(cls, name, field(default_factory=dict))
            elif default is not dataclasses.MISSING:
                setattr(cls, name, default)
        cls.__annotations__ = ann
        cls.__float__ = lambda self: _one_float(getattr(self, value), value)
        cls._repr_html_ = lambda self: _answer_html(self, value, at)
        return dataclass(cls)

    return make


@_answer("epsilon", "delta")
class EpsilonResult(_Answered):
    """epsilon at one delta, at many deltas, or per example (arrays in the last two cases).

    ``epsilon`` is the number to report: the certified upper bound where the method
    certifies one (``certified=True``), otherwise the method's estimate, in which case
    ``certified`` is False and ``note`` says what kind of approximation it is.
    ``lower``/``upper`` are certified bounds of the true value, or None where the method has
    none. When ``epsilon`` is an array, ``lower``, ``upper`` and ``estimate`` are arrays of the
    same shape (or None), and ``delta`` has the shape of the query: a number for the
    per-example answer of an individual accountant (arrays ``(N,)``), an array for a query of
    many deltas (arrays ``delta.shape``, or ``delta.shape + (N,)`` per example), whose
    ``details`` hold, per key, the list of the values of the single queries (see
    :class:`tightdp.accountants.base.Queries`).

    Fields: ``epsilon``, ``delta``, ``lower``, ``upper``, ``accountant``, ``certified``,
    ``estimate`` (None), ``note`` (""), ``details`` ({}).
    """

    if TYPE_CHECKING:  # the fields :func:`_answer` makes, spelled out for the type checker
        epsilon: float | np.ndarray
        delta: float | np.ndarray

        def __init__(self, epsilon: float | np.ndarray, delta: float | np.ndarray,
                     lower: float | np.ndarray | None, upper: float | np.ndarray | None,
                     accountant: str, certified: bool,
                     estimate: float | np.ndarray | None = None, note: str = "",
                     details: dict | None = None) -> None: ...


@_answer("delta", "epsilon")
class DeltaResult(_Answered):
    """delta at one or many epsilons (arrays when epsilon was an array, or per example);
    fields as in :class:`EpsilonResult` (``delta`` first, then ``epsilon``)."""

    if TYPE_CHECKING:  # the fields :func:`_answer` makes, spelled out for the type checker
        delta: float | np.ndarray
        epsilon: float | np.ndarray

        def __init__(self, delta: float | np.ndarray, epsilon: float | np.ndarray,
                     lower: float | np.ndarray | None, upper: float | np.ndarray | None,
                     accountant: str, certified: bool,
                     estimate: float | np.ndarray | None = None, note: str = "",
                     details: dict | None = None) -> None: ...
