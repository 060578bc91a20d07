"""Plain-text rendering of reserved comparisons: the instance, its windows, then one table per question."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet import numbers, tables
from optfleet.problems.reserved.problem import ReservedProblem
from optfleet.problems.reserved.stats import curves, window_stats
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome

QUESTIONS = {
    "hybrid": "hybrid: least $/h of reserved units plus pay-as-you-go for what exceeds them in each window (no backlog)",
    "backlog": "backlog: least $/h when work may queue up to the wait limit before spilling",
    "latency": "latency: fewest units meeting the latency target (fluid FCFS queue)",
    "robust": "robust: one unit count for every scenario, least worst-scenario $/h",
    "commitment": "commitment: reservation + on-demand lots + deployments per model and block, least $/h",
}


def describe(problem: ReservedProblem) -> str:
    """What ``optfleet validate`` prints about a valid reserved instance."""
    return f"valid reserved instance '{problem.name}'\n" + render_problem(problem)


def render_problem(problem: ReservedProblem) -> str:
    """The trace, the profile, the prices, the windows' statistics and the notes."""
    trace, spec = problem.trace, problem.spec
    lines = [
        f"instance {problem.name}: {len(trace):,} requests over {numbers.duration(trace.span_s)} ({trace.source}); "
        f"classes: {', '.join(trace.class_names)}",
        f"  profile: {problem.profile.describe()}",
        f"  adjusted tokens per request: mean {problem.work.mean():,.1f}, max {problem.work.max():,.0f}",
        f"  base latency: {problem.baseline.how}",
    ]
    if problem.prices is not None:
        p = problem.prices
        lines.append(f"  prices: ${p.unit_per_hour:,.2f} per {problem.unit_name}-hour; pay-as-you-go ${p.input_per_million:,.2f} / "
                     f"${p.cached_per_million:,.2f} / ${p.output_per_million:,.2f} per million input / cached / output tokens")
    for series in problem.windows:
        s = window_stats(series, 0.0, spec.quantile_method)
        lines.append(f"  {series.width_s:g}-s windows ({series.n_windows:,}): units needed mean {s.mean_units:,.3f}, p95 {s.p95_units:,.3f}, "
                     f"p99 {s.p99_units:,.3f}, peak {s.peak_units:,.3f}")
    lines.append(f"  purchase grid: 0, {problem.profile.min_units}, then steps of {problem.profile.increment_units} up to {problem.max_units:,}")
    lines += [f"  note: {note}" for note in problem.notes]
    return "\n".join(lines)


def _extra(rows: list[dict[str, Any]], problem: ReservedProblem) -> list[Column]:
    """The columns a planner reads: units, $/h, overload/overflow/spare at the smallest width, latency (those
    with a value in some row)."""
    narrow = min(s.width_s for s in problem.windows)
    tag = f"{narrow:g}s"
    units = f"{problem.unit_name}s"
    extra = [
        Column("units", units, tables.count, KEY),
        Column("reservation_units", f"reserved {units}", tables.count, HIGH),
        Column("on_demand_lots", "on-demand lots", tables.count, MEDIUM),
        Column("total_per_hour", "hybrid $/h", tables.fixed(2), HIGH),
        Column("backlog_total_per_hour", "backlog $/h", tables.fixed(2), MEDIUM),
        Column("worst_scenario_per_hour", "worst $/h", tables.fixed(2), MEDIUM),
        Column("commitment_per_hour", "commitment $/h", tables.fixed(2), MEDIUM),
        Column(f"overload_pct_{tag}", f"overload % {tag}", tables.number(3), MEDIUM),
        Column(f"overflow_units_{tag}", f"overflow {units} {tag}", tables.number(3), LOW),
        Column(f"spare_units_{tag}", f"spare {units} {tag}", tables.number(3), LOW),
        Column("p99_e2e_s", "p99 e2e", numbers.duration, HIGH),
        Column("slo_attainment_pct", "SLO met %", tables.fixed(2), MEDIUM),
    ]
    return [column for column in extra if any(row.get(column.key) is not None for row in rows)]


def _column_notes(problem: ReservedProblem, columns: list[Column]) -> list[str]:
    """What the latency and window columns measure, said once above the tables (not in a footnote)."""
    keys = {c.key for c in columns}
    tag = f"{min(s.width_s for s in problem.windows):g}s"
    notes = []
    if keys & {"p99_e2e_s", "slo_attainment_pct"}:
        notes.append("  p99 e2e, SLO met %: every request queued on the reserved units alone, nothing spilled to pay-as-you-go; "
                     "a plan that leaves its peaks to pay-as-you-go shows the queue that would build up instead (hours or days)")
    if keys & {f"overload_pct_{tag}", f"overflow_units_{tag}", f"spare_units_{tag}"}:
        notes.append(f"  overload, overflow, spare: per {tag} window, the narrowest width (every width: --json or --out)")
    return notes


def _question_title(question: str, problem: ReservedProblem) -> str:
    if question.startswith("overload"):
        label = question.split(" ", 1)[1]
        p = float(label[1:]) / 100
        return f"{question}: fewest {problem.unit_name}s with at most {100 * (1 - p):.3g} % of windows overloaded at every width"
    if question == "latency":
        t = problem.plans.latency
        return f"latency: fewest {problem.unit_name}s with p{100 * t.percentile:g} {t.metric} latency <= {t.threshold_s:g} s (fluid FCFS queue)"
    return QUESTIONS[question]


def _by_question(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    """What the columns measure, then one table per question: its title, the bound, the rows and their notes."""
    problem = outcome.loaded.problem
    blocks: list[tables.Block] = []
    shown: list[Column] = []
    for group, reference in outcome.references.items():
        question = dict(group)["question"]
        rows = [row for row, r in zip(outcome.rows, outcome.results, strict=True) if r.group == group]
        extra = _extra(rows, problem)
        shown += extra
        blocks += ["", _question_title(question, problem), f"  bound: {reference.reason}", tables.comparison_table(rows, extra),
                   *tables.notes(rows)]
    notes = _column_notes(problem, shown)
    return (["", "columns:", *notes] if notes else []) + blocks


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a reserved instance: the instance, then one table per question."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_question(outcome)])


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve``: the chosen method's question, its plan beside the question's other methods."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_question(outcome)])


MAX_CURVE_POINTS = 2_000  # grid points written to window_curves.csv (a finer grid is sampled evenly)


def solve_files(outcome: "SolveOutcome") -> dict[str, str]:
    """``window_curves.csv``: per window width, overload probability, expected overflow and expected spare at
    every point of the purchase grid (stats.py), what a planner plots against ``G``."""
    import numpy as np
    import pandas as pd

    problem = outcome.loaded.problem
    grid = problem.grid()
    if len(grid) > MAX_CURVE_POINTS:
        grid = grid[np.unique(np.linspace(0, len(grid) - 1, MAX_CURVE_POINTS).round().astype(int))]
    frames = [pd.DataFrame({"window_s": series.width_s, **curves(series, grid), "units": grid}) for series in problem.windows]
    return {"window_curves.csv": pd.concat(frames, ignore_index=True).to_csv(index=False)}
