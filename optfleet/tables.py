"""Plain-text tables of result rows, the same for every kind: core columns first, then the kind's own.

A kind's text renderer picks which of its own columns to show and how to
label them; numbers are formatted here once (``-`` for a missing value, costs
as ``$1,234.56/h``, gaps to two decimals, times in seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from optfleet.results import format_cost

if TYPE_CHECKING:
    from optfleet.api import GapOutcome

Formatter = Callable[[Any], str]


def number(digits: int = 4) -> Formatter:
    """``1,234`` style with ``digits`` significant figures; ``-`` for None."""
    return lambda v: "-" if v is None else f"{v:,.{digits}g}"


def fixed(decimals: int = 2) -> Formatter:
    return lambda v: "-" if v is None else f"{v:,.{decimals}f}"


def text(v: Any) -> str:
    return "-" if v is None or v == "" else str(v)


def objective(value: Any, unit: str) -> str:
    """An objective in its unit: costs as ``$x/h``, others as ``x unit``."""
    if value is None:
        return "-"
    if unit == "$/h":
        return format_cost(value)
    number = f"{value:,.1f}" if abs(value) >= 1000 else f"{value:,.6g}"
    return f"{number} {unit}".rstrip()


def core_frame(rows: Sequence[Mapping[str, Any]], extra: Mapping[str, tuple[str, Formatter]] | None = None) -> pd.DataFrame:
    """The rows as strings: method, status, feasible, objective (with its unit), bound, gap %, time s, then
    ``extra`` (``{row key: (heading, formatter)}``)."""
    shown = []
    for row in rows:
        unit = row.get("objective_unit", "")
        cells = {
            "method": row["method"],
            "status": row["status"],
            "feasible": "yes" if row["feasible"] else "no",
            "objective": objective(row["objective"], unit),
            "bound": objective(row["bound"], unit),
            "gap %": fixed(2)(row["gap_pct"]),
            "time s": fixed(3)(row["seconds"]),
        }
        for key, (heading, fmt) in (extra or {}).items():
            cells[heading] = fmt(row.get(key))
        shown.append(cells)
    return pd.DataFrame(shown)


def notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``  method: note`` for every row with a note (why no plan, what a plan breaks)."""
    return [f"  {row['method']}: {row['note']}" for row in rows if row.get("note")]


def render(frame: pd.DataFrame) -> str:
    return frame.to_string(index=False)


def single_group_gap(outcome: "GapOutcome", extra: Mapping[str, tuple[str, Formatter]]) -> str:
    """The ``gap`` text of a kind whose rows form one group: the bound's reason, the table, the notes, and the
    mixed-vs-best-single-type line when the kind's summary has one."""
    (reference,) = outcome.references.values()
    name = outcome.loaded.instance.spec.name
    lines = [f"instance {name}: gap = distance to the bound in % of the bound; bound: {reference.reason}", ""]
    lines.append(render(core_frame(outcome.rows, extra)))
    lines += notes(outcome.rows)
    mixed = (outcome.summary or {}).get("mixed_vs_best_single_type")
    if mixed is not None:
        lines.append(f"mixed fleet {format_cost(mixed['mixed_cost_per_hour'])} vs best single type {mixed['best_single_type']} "
                     f"{format_cost(mixed['best_single_cost_per_hour'])}: {mixed['savings_pct']:.2f} % saved")
    return "\n".join(lines)
