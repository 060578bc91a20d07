"""The plot of a capacity plan (needs the optional ``plot`` extra, matplotlib): GPUs over time, stacked by purchase
option (top) and by model (bottom), for the MILP's schedule (or the cheapest feasible one when the MILP has none)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from optfleet.problems.capacity_plan.plan import Schedule, model_gpus

if TYPE_CHECKING:
    from optfleet.api import GapOutcome
    from optfleet.problems.capacity_plan.problem import CapacityProblem


def plot_gap(outcome: "GapOutcome", path: Path) -> None:
    """Write a PNG: top, the GPUs held per period stacked by option (reserved, on-demand, spot) over every type;
    bottom, the GPUs in use stacked by model, with the load charge on top (plan.gpus_in_use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem = outcome.loaded.problem
    shown = next((r for r in outcome.results if r.method == "milp" and r.plan is not None), None)
    if shown is None:
        feasible = [r for r in outcome.results if r.plan is not None and r.feasible]
        shown = min(feasible, key=lambda r: r.objective) if feasible else next((r for r in outcome.results if r.plan is not None), None)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 6.5), sharex=True)
    if shown is not None:
        s, hours = shown.plan, np.arange(problem.periods + 1) * problem.spec.period_hours
        labels, by_option = zip(*held_by_option(problem, s), strict=True)
        top.stackplot(hours, [_edges(v) for v in by_option], labels=labels, step="post", alpha=0.85)
        used = model_gpus(problem, s.gpu_type, s.instances).sum(axis=1)
        loading = shown.evaluation.gpus_in_use.sum(axis=0) - used.sum(axis=0)
        bottom.stackplot(hours, [_edges(v) for v in [*used, loading]], labels=[*problem.model_names, "loading"], step="post", alpha=0.85)
        top.set_title(f"{problem.name}: {shown.method}, GPUs held by purchase option (all types)", fontsize=10)
        bottom.set_title("GPUs in use by model (and the load-time charge)", fontsize=10)
    for axis in (top, bottom):
        axis.set_ylabel("GPUs")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="upper right")
    bottom.set_xlabel("hours since the start of the horizon")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _edges(values: np.ndarray) -> np.ndarray:
    """A period series drawn as steps from each period's start to its end: the last value repeated at the end."""
    return np.append(values, values[-1])


def held_by_option(problem: CapacityProblem, schedule: Schedule) -> list[tuple[str, np.ndarray]]:
    """GPUs held per period over every type, by how they were bought: the reservations already held before the plan
    (when there are any), the plan's reservations, on demand and spot."""
    series = [("already held", problem.held.total().sum(axis=0))] if problem.held.total().any() else []
    return series + [("reserved", schedule.reserved_held(problem).sum(axis=0)), ("on-demand", schedule.on_demand_gpus.sum(axis=0)),
                     ("spot", schedule.spot_gpus.sum(axis=0))]
