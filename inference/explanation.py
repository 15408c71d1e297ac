"""The structured forms every result's explanation shares.

Each result has three renderings of one computation: ``explain(...)`` (printable text),
``explain_frame(...)`` (a pandas DataFrame, one row per rule, cluster, group, item or prototype, with the
same keyword arguments as ``explain``) and ``to_dict(...)`` (the frame's rows and the result's facts as
plain Python values, ready for ``json.dumps``). In a notebook a result displays as a compact HTML card
(``_repr_html_``): the facts, the convergence status of an MCMC fit, and the frame; ``print`` shows the
facts, the status and ``explain()`` (``ExplainedResultMixin``).
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd


def plain(value):
    """``value`` as JSON-ready Python: numpy scalars and arrays, tuples and mappings converted recursively;
    a non-finite float becomes None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, np.ndarray, pd.Index)):
        return [plain(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def records(frame: pd.DataFrame) -> list[dict]:
    """The rows of ``frame`` (its index as the first column) as JSON-ready dicts."""
    return [plain(row) for row in frame.reset_index().to_dict(orient="records")]


def mcmc_facts(result) -> dict:
    """A tempered fit's convergence facts for ``to_dict``: ``converged``, per summary ``r_hat`` and
    ``ess_bulk`` (``diagnostics``) and ``log_evidence``."""
    return {
        "converged": result.converged,
        "diagnostics": plain(result.diagnostics.to_dict(orient="index")),
        "log_evidence": plain(result.log_evidence),
    }


def mcmc_status(result) -> str:
    """One line on a tempered fit's convergence (``TemperedRun.message``) for the HTML card."""
    return result.run.message()


class ExplainedResultMixin:
    """A result's three displays from one ``_card()`` (title, facts, frame, convergence status or None):
    ``repr`` one line of the title and facts, ``str`` / ``print`` those with the status and then
    ``explain()``, and the HTML card of a notebook."""

    def _card(self) -> tuple[str, dict, pd.DataFrame, str | None]:
        raise NotImplementedError

    def __repr__(self) -> str:
        title, facts, _, _ = self._card()
        return f"<{title}: {_facts_line(facts)}>"

    def __str__(self) -> str:
        title, facts, _, status = self._card()
        return "\n".join([f"{title}: {_facts_line(facts)}", *([status] if status else []), "", str(self.explain())])

    def _repr_html_(self) -> str:
        return html_card(*self._card())


def _facts_line(facts: dict) -> str:
    return "; ".join(f"{name}: {_fact(value)}" for name, value in facts.items())


def html_card(title: str, facts: dict, frame: pd.DataFrame, status: str | None = None, max_rows: int = 20) -> str:
    """A compact HTML rendering: ``title``, a line of ``facts`` (name: value), an optional ``status`` line
    (green when it starts with "converged", else red) and the first ``max_rows`` rows of ``frame``."""
    parts = [f"<div><strong>{html.escape(title)}</strong>"]
    if facts:
        parts.append(f"<div>{html.escape(_facts_line(facts))}</div>")
    if status is not None:
        colour = "green" if status.startswith("converged") else "#b00"
        parts.append(f'<div style="color:{colour}">{html.escape(status)}</div>')
    table = frame.head(max_rows).to_html(float_format=lambda v: f"{v:.3g}", border=0)
    parts.append(table)
    if len(frame) > max_rows:
        parts.append(f"<div>... {len(frame) - max_rows} more rows (explain_frame() has them all)</div>")
    parts.append("</div>")
    return "\n".join(parts)


def _fact(value) -> str:
    return f"{value:.4g}" if isinstance(value, (float, np.floating)) else str(value)
