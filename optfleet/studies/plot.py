"""A study's result column against a swept one, one line per hue value, as a PNG for a slide (the ``plot`` extra).

Axis labels are the column names made readable, with the unit their suffix
names (``workload.rate_rps`` -> "workload rate (req/s)", ``gap_pct`` -> "gap
(%)"); ``objective`` and ``bound`` take the table's ``objective_unit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from optfleet.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

# Column-name suffix -> the unit it stands for (longest suffix first wins).
UNITS = {
    "_per_hour": "$/h",
    "_per_year": "$/yr",
    "_per_gpu_hour": "$/GPU-h",
    "_rps": "req/s",
    "_ms": "ms",
    "_s": "s",
    "_pct": "%",
    "_tokens": "tokens",
    "_gb": "GB",
}
SECONDS_COLUMNS = ("seconds",)
OBJECTIVE_COLUMNS = ("objective", "bound")


def axis_label(column: str, frame: "pd.DataFrame") -> str:
    """``column`` as an axis label with its unit (module docstring): the last two parts of a dotted path."""
    *parents, name = column.split(".")
    unit = None
    if name in SECONDS_COLUMNS:
        unit = "s"
    elif name in OBJECTIVE_COLUMNS and "objective_unit" in frame.columns:
        given = frame["objective_unit"].dropna().unique()
        unit = str(given[0]) if len(given) == 1 and given[0] else None
    else:
        suffix = next((s for s in sorted(UNITS, key=len, reverse=True) if name.endswith(s) and name != s), None)
        if suffix is not None:
            unit, name = UNITS[suffix], name.removesuffix(suffix)
    words = " ".join([*parents[-1:], name]).replace("_", " ")
    return f"{words} ({unit})" if unit else words


def check_columns(frame: "pd.DataFrame", **columns: str | None) -> None:
    """Each named column must be in ``frame``: an InputError naming the option, the column and the available ones."""
    for option, column in columns.items():
        if column is not None and column not in frame.columns:
            raise InputError(f"--{option}", column, f"no such column; available: {', '.join(map(str, frame.columns))}")


def plot_study(frame: "pd.DataFrame", x: str, y: str, path: Path, *, hue: str | None = None, title: str | None = None) -> None:
    """Write a PNG of ``y`` against ``x`` (lines with markers, sorted by ``x``), one line per value of ``hue``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_columns(frame, x=x, y=y, hue=hue)
    data = frame.dropna(subset=[x, y])
    if data.empty:
        raise InputError("--y", y, f"no row has both {x} and {y} (e.g. gap_pct needs an exact method among the methods)")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=150)
    groups = [(None, data)] if hue is None else list(data.groupby(hue, sort=False, dropna=False))
    for name, group in groups:
        group = group.sort_values(x)
        ax.plot(group[x].to_numpy(), group[y].to_numpy(), marker="o", label=None if hue is None else str(name))
    x_label, y_label = axis_label(x, frame), axis_label(y, frame)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title or f"{y_label} vs {x_label}")
    ax.grid(True, alpha=0.3)
    if hue is not None:
        ax.legend(title=hue)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
