"""Text for people about fleet results: ``solve`` (the plan's pools, every method side by side), ``gap``, ``validate``, ``simulate``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from optfleet import numbers, tables
from optfleet.problems.fleet.assumptions import assumption_lines
from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics
from optfleet.problems.fleet.heuristics.closed_forms import savings_forecast
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing_text import compressed_ranges, merged_ranges, routing_blocks, threshold_cuts
from optfleet.results import MethodResult, first_result, format_cost, json_safe
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome
    from optfleet.problems.fleet.simulate.run import SimulationResult


def _physical_gpus(problem: FleetProblem, pool: PoolMetrics) -> int:
    """GPUs of a pool: its instances times their tensor-parallel degree."""
    return problem.configuration(pool.gpu).tp * pool.instances


def _gpu_count(problem: FleetProblem, evaluation: FleetEvaluation) -> str:
    """``113 GPUs``, or ``392 GPUs in 80 instances`` when instances span several GPUs."""
    gpus = sum(_physical_gpus(problem, p) for p in evaluation.pools)
    return f"{gpus} GPUs" if gpus == evaluation.total_instances else f"{gpus} GPUs in {evaluation.total_instances} instances"


def _pool_table(problem: FleetProblem, evaluation: FleetEvaluation) -> Table:
    """One row per pool: size, traffic, service, utilisation, latency, what binds and the cost.  The TPOT columns
    appear when the instance charges prefill or sets TPOT targets (the batching model's P99 in place of the slot
    model's bound when it has one); ``instances`` only when an instance spans several GPUs; under the batching
    service model the service columns are read as the batching model reads them (evaluator.py)."""
    pools = evaluation.pools
    rows = [{
        "pool": p.name, "gpu": p.gpu, "window": p.window_tokens, "instances": p.instances, "gpus": _physical_gpus(problem, p),
        "slots": p.slots_per_instance, "traffic": p.share, "compressed": p.compressed_share, "service_s": p.mean_service_ms / 1000,
        "scv": p.service_scv, "util": p.utilisation, "wait": p.wait_p99_ms, "floor": p.prefill_p99_ms + p.first_iteration_ms,
        "iteration": p.first_iteration_ms, "ttft": p.ttft_p99_ms, "tpot_bound": p.tpot_bound_ms, "tpot_p99": p.tpot_p99_ms,
        "tpot_mean": p.tpot_mean_ms, "binding": p.binding, "cost": p.cost_per_hour,
    } for p in pools]
    batching = evaluation.service_model == "batching"
    per_instance = any(r["instances"] != r["gpus"] for r in rows)
    tpot = problem.charges_prefill or problem.tpot_targets.any
    tpot_p99 = any(p.tpot_p99_ms is not None for p in pools)
    ms = tables.fixed(2)
    columns = [
        Column("pool", "pool", tables.text, KEY),
        Column("gpu", "GPU", tables.text, HIGH),
        Column("window", "window tokens", tables.count, HIGH),
        *([Column("instances", "instances", tables.count, KEY)] if per_instance else []),
        Column("gpus", "GPUs", tables.count, KEY),
        Column("slots", "slots/instance" if per_instance else "slots/GPU", tables.count, MEDIUM),
        Column("traffic", "traffic %", tables.percent(1), HIGH),
        Column("compressed", "compressed %", tables.percent(1), LOW),
        Column("service_s", "slot hold s" if batching else "E[S] s", tables.fixed(2), LOW),
        Column("scv", ("Cs^2 hold" if problem.charges_prefill else "Cs^2 iters") if batching else "Cs^2", tables.fixed(2), LOW),
        Column("util", "util %", tables.percent(1), KEY),
        Column("wait", "P99 wait ms", ms, MEDIUM),
        *([Column("iteration", "iteration ms", ms, LOW)] if batching else []),
        Column("floor", "in-GPU P99 ms" if batching else "TTFT floor ms", ms, MEDIUM),
        Column("ttft", "P99 TTFT ms", ms, KEY),
        *([Column("tpot_p99", "P99 TPOT ms", ms, HIGH)] if tpot and tpot_p99 else [Column("tpot_bound", "TPOT bound ms", ms, HIGH)] if tpot else []),
        *([Column("tpot_mean", "mean TPOT ms", ms, MEDIUM)] if tpot else []),
        Column("binding", "binding", tables.text, HIGH),
        Column("cost", "cost $/h", tables.fixed(2), KEY),
    ]
    return Table(columns, rows)


METHOD_COLUMNS = [
    Column("method", "method", tables.text, KEY),
    Column("boundary", "B tokens", tables.text, HIGH),
    Column("gamma", "gamma", tables.text, HIGH),
    Column("per_pool", "GPUs per pool", tables.text, MEDIUM),
    Column("gpus", "GPUs", tables.count, HIGH),
    Column("cost", "cost $/h", tables.fixed(2), KEY),
    Column("per_year", "cost $/yr", tables.count, LOW),
    Column("savings", "savings %", tables.fixed(1), HIGH),
    Column("slo", "SLO", tables.text, KEY),
    Column("naive", "naive %", tables.fixed(1), LOW),
    Column("corrected", "corrected %", tables.fixed(1), LOW),
    Column("seconds", "time s", numbers.seconds, MEDIUM),
]


def _method_row(problem: FleetProblem, result: MethodResult, homogeneous: FleetEvaluation | None) -> dict[str, object]:
    """A method's row of :data:`METHOD_COLUMNS` (savings and the closed forms against the homogeneous fleet)."""
    e = result.evaluation
    if e is None:
        return {"method": result.method, "slo": "n/a" if not result.available else "infeasible", "seconds": result.seconds}
    comparable = homogeneous is not None and e.plan.served_share >= 1.0
    f = savings_forecast(e, homogeneous) if comparable else None
    return {
        "method": result.method,
        "boundary": "rules" if e.plan.rules is not None else (f"{e.plan.boundary_tokens:,}" if e.plan.boundary_tokens else None),
        "gamma": None if e.plan.rules is not None else f"{e.plan.gamma:.1f}",
        "per_pool": "/".join(str(_physical_gpus(problem, p)) for p in e.pools),
        "gpus": sum(_physical_gpus(problem, p) for p in e.pools),
        "cost": e.cost_per_hour,
        "per_year": e.cost_per_year,
        "savings": 100 * (1 - e.cost_per_hour / homogeneous.cost_per_hour) if comparable else None,
        "slo": ("met" if e.meets_slo else "VIOLATED") + ("" if result.feasible or not e.meets_slo else ", breaks a constraint"),
        "naive": 100 * f.naive if f else None,
        "corrected": 100 * f.corrected if f else None,
        "seconds": result.seconds,
    }


def render_solve(outcome: "SolveOutcome") -> str:
    """The text printed by ``optfleet solve``: the chosen plan, its pools, then every method side by side."""
    problem = outcome.loaded.problem
    main = outcome.main[0]
    base = first_result(outcome.results, "homogeneous")
    homogeneous = base.evaluation if base is not None else None
    blocks: list[tables.Block] = [
        f"instance {problem.name}: lambda = {numbers.significant(problem.rate_rps, 6)} req/s, P99 TTFT SLO {numbers.significant(problem.ttft_p99_ms, 6)} ms "
        f"(rule: {problem.ttft_rule}{', service model: batching' if problem.service_model == 'batching' else ''}), rho_max {problem.rho_max:g}",
        *assumption_lines(problem),
        "",
    ]
    if main.evaluation is None:
        blocks.append(f"{main.method}: {main.note}")
    else:
        e = main.evaluation
        boundary = e.plan.boundary_tokens
        if e.plan.rules is not None:
            cuts = threshold_cuts(e.plan)
            routed = "threshold routing" if cuts is not None else f"split routing in {len(merged_ranges(e.plan))} length ranges"
            routed += " with Compress-and-Route" if cuts is not None and compressed_ranges(e.plan) else ""
            headline = f"{main.method}: windows {', '.join(str(p.window_tokens) for p in e.plan.pools)}, {routed}, "
        else:
            headline = f"{main.method}: B* = {boundary if boundary else '- (one pool)'}, gamma* = {e.plan.gamma:.1f}, "
        headline += ", ".join(f"n_{p.name} = {p.instances}" for p in e.pools)
        headline += f"; {_gpu_count(problem, e)}, {format_cost(e.cost_per_hour)}, ${e.cost_per_year:,.0f}/yr"
        if homogeneous is not None and e.plan.served_share >= 1.0:
            headline += f", {numbers.versus(e.cost_per_hour, homogeneous.cost_per_hour, 'homogeneous')}"
        if e.plan.served_share < 1.0:
            headline += f"; serves {100 * e.plan.served_share:.2f} % of the {numbers.significant(problem.rate_rps, 6)} req/s (budget cap), rejects the rest"
        blocks += [headline]
        if e.plan.rules is not None:
            blocks += routing_blocks(e.plan)
        if main.report is not None:
            erlang = ("batching tables at each pool's traffic mix (approximate; the bound is a relaxation's, valid for every plan)"
                      if problem.service_model == "batching" else "Erlang tables")
            blocks.append(f"solver: {main.report.summary}; solved {main.columns.get('table_iterations')} time(s) to refresh the "
                          f"{erlang}; the plan passes the evaluator")
        if main.note:
            blocks.append(f"note: {main.note}")
        blocks += ["", _pool_table(problem, e)]
    blocks += ["", "every method, scored by the same evaluator (savings vs homogeneous; naive/corrected = closed forms):",
               Table(METHOD_COLUMNS, [_method_row(problem, r, homogeneous) for r in outcome.results])]
    blocks += [f"  {r.method}: {r.note}" for r in outcome.results if (r.evaluation is None or not r.feasible) and r.note and r.method != main.method]
    return tables.page(blocks)


GAP_COLUMNS = [Column("pools", "pools", tables.text, MEDIUM), Column("gpus", "GPUs", tables.count, HIGH),
               Column("instances", "instances", tables.count, LOW)]


def render_gap(outcome: "GapOutcome") -> str:
    """The ``optfleet gap`` text: the core columns and the kind's own (see optfleet/tables.py)."""
    return tables.single_group_gap(outcome, GAP_COLUMNS, head=assumption_lines(outcome.loaded.problem))


def solve_files(outcome: SolveOutcome) -> dict[str, str]:
    """``plan.json`` (read back by ``simulate --plan``) and, for the sweep, its candidate table ``candidates.csv``."""
    main = outcome.main[0]
    files: dict[str, str] = {}
    if main.plan is not None:
        files["plan.json"] = json.dumps(json_safe(main.plan.to_dict()), indent=2)
    if outcome.method == "sweep" and main.plan is not None:
        from optfleet.problems.fleet.heuristics.sweep import sweep

        table = sweep(outcome.loaded.problem).candidates
        sized = ["n_short", "n_long", "instances", "cost_per_hour"]  # the sweep marks an infeasible candidate with -1 / inf here
        table[sized] = table[sized].where(table["feasible"])
        files["candidates.csv"] = table.convert_dtypes().to_csv(index=False)  # infeasible candidates: empty cells
    return files


SIMULATED = [  # (metric, heading, importance)
    ("utilisation", "util %", KEY), ("wait_p50_ms", "P50 wait ms", LOW), ("wait_p99_ms", "P99 wait ms", HIGH),
    ("ttft_p50_ms", "P50 TTFT ms", MEDIUM), ("ttft_p90_ms", "P90 TTFT ms", LOW), ("ttft_p99_ms", "P99 TTFT ms", KEY),
    ("slo_attainment", "SLO met %", KEY), ("tpot_mean_ms", "mean TPOT ms", MEDIUM), ("tpot_p50_ms", "P50 TPOT ms", LOW),
    ("tpot_p90_ms", "P90 TPOT ms", LOW), ("tpot_p99_ms", "P99 TPOT ms", HIGH), ("tpot_attainment", "TPOT met %", HIGH),
    ("queue_p99", "P99 queue", LOW), ("requests", "requests", MEDIUM),
]
SHARES = ("utilisation", "slo_attainment", "tpot_attainment")  # shown in %


def _estimate(metric: str) -> tables.Formatter:
    """``mean +- half-width`` of one metric (no half-width for one replication or round-off); shares in %."""
    scale = 100.0 if metric in SHARES else 1.0

    def cell(value: tuple[float, float] | None) -> str:
        if value is None or value[0] != value[0]:  # NaN: no measured request in the scope
            return numbers.MISSING
        mean, half = value
        shown = half == half and half > 1e-9 * max(abs(mean), 1.0)
        text = numbers.count(mean) if metric == "requests" else numbers.significant(scale * mean, 4)
        return f"{text} +- {numbers.significant(scale * half, 2)}" if shown else text

    return cell


def render_simulation(result: "SimulationResult") -> Table:
    """Simulated metrics per pool and for the fleet: ``mean +- half-width`` per cell.  The TPOT columns appear when
    the run measured them (batching mode; ``tpot_attainment`` when the instance sets a TPOT percentile target)."""
    measured = [(name, heading, keep) for name, heading, keep in SIMULATED if any(name in m for m in result.metrics.values())]
    columns = [Column("scope", "scope", tables.text, KEY), *(Column(name, heading, _estimate(name), keep) for name, heading, keep in measured)]
    return Table(columns, [{"scope": scope, **metrics} for scope, metrics in result.metrics.items()])
