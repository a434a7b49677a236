"""Jupyter display of results (``_repr_html_``): a headline with the bracket, a small table,
and a small inline SVG plot when matplotlib is importable (the table alone otherwise)."""

from __future__ import annotations

import html
import io
from collections.abc import Sequence

import numpy as np

__all__ = ["result_html"]


def _svg(points: tuple[np.ndarray, np.ndarray, np.ndarray]) -> str:
    """A small log-x plot of a band ``(x, lower, upper)`` as inline SVG ("" without
    matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return ""
    x, lo, hi = points
    fig, ax = plt.subplots(figsize=(3.2, 2.2), dpi=80)
    try:
        ax.fill_between(x, lo, hi, color="C0", alpha=0.4, lw=0)
        ax.plot(x, hi, color="C0", lw=1)
        ax.plot(x, x, color="0.5", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.tick_params(labelsize=7)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
    finally:
        plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]


def result_html(head: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]],
                points: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> str:
    """The HTML of a result: ``head`` (the bracket), a table of ``rows`` under ``columns``
    (at most 20 rows shown), and the plot of ``points`` if given and matplotlib is there."""
    th = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows[:20])
    more = f"<p>({len(rows) - 20} more rows)</p>" if len(rows) > 20 else ""
    plot = _svg(points) if points is not None else ""
    return (f"<div><p><b>{html.escape(head)}</b></p><table><tr>{th}</tr>{body}</table>"
            f"{more}{plot}</div>")
