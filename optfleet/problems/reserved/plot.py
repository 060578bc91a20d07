"""Plots of a reserved comparison (needs the optional ``plot`` extra, matplotlib): ``X_n`` over time with every
plan's unit count, and $/h against the unit count."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from optfleet.api import GapOutcome

MAX_POINTS = 20_000  # windows drawn on the time axis (longer series are shown by each block's maximum)


def plot_gap(outcome: "GapOutcome", path: Path) -> None:
    """Write a PNG: left, the units each cost window needs over time with each plan's units as a line; right,
    the hybrid $/h (reserved + pay-as-you-go spill) at every grid point, with each plan marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from optfleet.problems.reserved.evaluator import spill_per_hour_on_grid

    problem = outcome.loaded.problem
    series = problem.cost_windows
    needed = series.units_needed
    step = max(1, int(np.ceil(len(needed) / MAX_POINTS)))
    shown = needed[: len(needed) // step * step].reshape(-1, step).max(axis=1) if step > 1 else needed
    hours = np.arange(len(shown)) * step * series.width_s / 3600.0
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.4), gridspec_kw={"width_ratios": [1.6, 1]})
    left.plot(hours, shown, color="0.55", linewidth=0.5, label=f"needed per {series.width_s:g}-s window" + (f" (max of {step})" if step > 1 else ""))
    plans = {}
    for result in outcome.results:
        if result.plan is not None and hasattr(result.plan, "units"):
            plans.setdefault(result.plan.units, []).append(result.method)
    for i, (units, names) in enumerate(sorted(plans.items())):
        left.axhline(units, color=f"C{i}", linewidth=1.1, label=f"{units:,} {problem.unit_name}s: {', '.join(names)}")
    left.set_xlabel("time since the first request (h)")
    left.set_ylabel(f"{problem.unit_name}s")
    left.set_title(f"{problem.name}: units needed per window and each plan", fontsize=10)
    left.legend(fontsize=7, loc="upper right")
    left.grid(alpha=0.3)
    if problem.prices is not None:
        grid = problem.grid()
        right.plot(grid, problem.prices.unit_per_hour * grid + spill_per_hour_on_grid(series, grid), color="C0", linewidth=1.2, label="hybrid $/h")
        chosen = np.array(sorted(plans), dtype=np.int64)
        for i, (units, cost) in enumerate(zip(chosen, problem.prices.unit_per_hour * chosen + spill_per_hour_on_grid(series, chosen), strict=True)):
            right.scatter([units], [cost], color=f"C{i}", zorder=3, s=18)
        right.set_xlabel(f"reserved {problem.unit_name}s")
        right.set_ylabel("$/h (reserved + pay-as-you-go)")
        right.set_title("cost against the unit count", fontsize=10)
        right.grid(alpha=0.3)
    else:
        right.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
