"""``optfleet explain``'s output: text tables (optfleet/tables.py), one JSON document, and the curves as a PNG.

JSON: ``{"instance", "kind", "objective_unit", "plan": {"objective", "status", "plan"}, "notes": [...], "tables":
{name: [row, ...]}}``; an infinite range end (no limit) is ``null``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from optfleet import tables
from optfleet.sensitivity.run import ExplainResult
from optfleet.results import json_safe

TITLES = {
    "binding": "Binding constraints: each row of the plan with its slack (0 = binds)",
    "shadow_prices": "Shadow prices: d(objective)/d(bound) of the LP (a MILP's with its integer plan fixed), and the bound's range with the same basis",
    "price_ranges": "Price ranges of the fixed-integer LP: the prices over which its basis stays optimal (not the MILP's plan: see break-even)",
    "break_even": "Break-even: the value at which the exact plan changes (re-solved; low = last value with the same plan)",
    "alternatives": "Near-optimal alternatives: named restrictions solved exactly",
}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if v is pd.NA else v) for k, v in row.items()} for row in frame.astype(object).where(frame.notna(), None).to_dict("records")]


def to_dict(result: ExplainResult) -> dict[str, Any]:
    """One JSON-safe document of everything ``explain`` found (module docstring)."""
    return json_safe({
        "instance": result.instance, "kind": result.kind, "objective_unit": result.objective_unit,
        "plan": {"objective": result.base.objective, "status": result.base.status, "plan": result.base.plan},
        "notes": list(result.analysis.notes),
        "tables": {name: _records(frame) for name, frame in result.tables().items()},
    })


# cells read by people: costs to the cent, percentages to a tenth, probed values to four figures (JSON keeps them whole)
FORMATS = {"objective": tables.fixed(2), "objective_there": tables.fixed(2), "change_pct": tables.fixed(1),
           "over_optimum_pct": tables.fixed(1), "current": tables.number(4), "low": tables.number(4), "break_even": tables.number(4)}
IN_OBJECTIVE_UNIT = ("objective", "objective_there")  # headed with the kind's objective unit ($/h)


def _cell(formatter: tables.Formatter) -> tables.Formatter:
    return lambda value: "-" if value is None else formatter(value)


def _table(frame: pd.DataFrame, objective_unit: str = "") -> tables.Table:
    """A DataFrame as a fitted table: the first column stays, then the value columns, the row names and plans go first."""
    keep = {"row": tables.LOW, "plan": tables.LOW, "plan_there": tables.LOW, "dual": tables.LOW, "status": tables.MEDIUM}
    columns = [tables.Column(key, f"{key} {objective_unit}" if key in IN_OBJECTIVE_UNIT and objective_unit else key,
                             _cell(FORMATS[key]) if key in FORMATS else tables.value, tables.KEY if i == 0 else keep.get(key, tables.HIGH))
               for i, key in enumerate(frame.columns)]
    return tables.Table(columns, _records(frame))


def text(result: ExplainResult) -> str:
    """The report for people at the output width."""
    blocks: list[tables.Block] = [
        f"{result.instance} ({result.kind}): exact plan {result.base.plan}, {tables.objective(result.base.objective, result.objective_unit)} "
        f"({result.base.status})",
        *result.analysis.notes,
    ]
    for name, frame in result.tables().items():
        title = TITLES.get(name) or f"Curve of {name.removeprefix('curve:')}: the exact optimum at each value (plan_changes marks a new plan)"
        blocks += ["", title, _table(frame, result.objective_unit) if len(frame) else "  (none)"]
    return tables.page(blocks)


def plot(result: ExplainResult, path: Path) -> None:
    """Each curve's objective against its parameter, one panel per curve, the values where the plan changes marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = list(result.curves.items())
    figure, axes = plt.subplots(1, max(len(curves), 1), figsize=(5 * max(len(curves), 1), 3.6), squeeze=False)
    for axis, (name, frame) in zip(axes[0], curves, strict=False):
        axis.plot(frame[name], frame["objective"], marker="o")
        changed = frame[frame["plan_changes"].eq(True)]  # None: the first point of another question
        axis.scatter(changed[name], changed["objective"], color="red", zorder=3, label="plan changes")
        axis.set_xlabel(name)
        axis.set_ylabel(result.objective_unit)
        axis.legend()
    figure.suptitle(f"{result.instance}: exact optimum")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
