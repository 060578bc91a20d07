"""Text for people about fleet results: ``solve`` (the plan's pools, every method side by side), ``gap``, ``validate``, ``simulate``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd

from optfleet import tables
from optfleet.problems.fleet.assumptions import assumption_lines
from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics
from optfleet.problems.fleet.heuristics.closed_forms import savings_forecast
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing_text import compressed_ranges, merged_ranges, routing_lines, threshold_cuts
from optfleet.results import MethodResult, first_result, format_cost, json_safe

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


def _pool_table(problem: FleetProblem, evaluation: FleetEvaluation) -> str:
    rows = []
    for p in evaluation.pools:
        rows.append({
            "pool": p.name,
            "GPU": p.gpu,
            "window": p.window_tokens,
            "instances": p.instances,
            "GPUs": _physical_gpus(problem, p),
            "slots/instance": p.slots_per_instance,
            "traffic %": 100 * p.share,
            "compressed %": 100 * p.compressed_share,
            "E[S] s": p.mean_service_ms / 1000,
            "Cs^2": p.service_scv,
            "util %": 100 * p.utilisation,
            "P99 wait ms": p.wait_p99_ms,
            "TTFT floor ms": p.prefill_p99_ms + p.first_iteration_ms,
            "P99 TTFT ms": p.ttft_p99_ms,
            "binding": p.binding,
            "cost": format_cost(p.cost_per_hour),
        })
    frame = pd.DataFrame(rows)
    if problem.charges_prefill or problem.tpot_targets.any:  # the slot model's TPOT: the longest iteration (every percentile), the mean
        frame.insert(frame.columns.get_loc("binding"), "TPOT bound ms", [p.tpot_bound_ms for p in evaluation.pools])
        frame.insert(frame.columns.get_loc("binding"), "mean TPOT ms", [p.tpot_mean_ms for p in evaluation.pools])
    if any(p.tpot_p99_ms is not None for p in evaluation.pools):  # the batching model's P99, under the engine model, replaces the bound
        frame.insert(frame.columns.get_loc("mean TPOT ms"), "P99 TPOT ms", [p.tpot_p99_ms for p in evaluation.pools])
        frame = frame.drop(columns=["TPOT bound ms"])
    if (frame["instances"] == frame["GPUs"]).all():
        frame = frame.drop(columns=["instances"]).rename(columns={"slots/instance": "slots/GPU"})
    if evaluation.service_model == "batching":  # the same fields, read by the batching model (evaluator.py)
        frame = frame.rename(columns={"E[S] s": "slot hold s", "Cs^2": "Cs^2 hold" if problem.charges_prefill else "Cs^2 iters",
                                      "TTFT floor ms": "in-GPU P99 ms"})
        frame.insert(frame.columns.get_loc("in-GPU P99 ms"), "iteration ms", [p.first_iteration_ms for p in evaluation.pools])
    return frame.to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def _method_row(problem: FleetProblem, result: MethodResult, homogeneous: FleetEvaluation | None) -> dict[str, object]:
    e = result.evaluation
    if e is None:
        return {"method": result.method, "B": "-", "gamma": "-", "GPUs per pool": "-", "GPUs": "-", "cost": "-", "$/yr": "-",
                "savings %": "-", "SLO": "n/a" if not result.available else "infeasible", "naive %": "-", "corrected %": "-",
                "time ms": f"{1000 * result.seconds:.1f}"}
    comparable = homogeneous is not None and e.plan.served_share >= 1.0
    f = savings_forecast(e, homogeneous) if comparable else None
    return {
        "method": result.method,
        "B": "rules" if e.plan.rules is not None else (e.plan.boundary_tokens or "-"),
        "gamma": "-" if e.plan.rules is not None else f"{e.plan.gamma:.1f}",
        "GPUs per pool": "/".join(str(_physical_gpus(problem, p)) for p in e.pools),
        "GPUs": sum(_physical_gpus(problem, p) for p in e.pools),
        "cost": format_cost(e.cost_per_hour),
        "$/yr": f"{e.cost_per_year:,.0f}",
        "savings %": f"{100 * (1 - e.cost_per_hour / homogeneous.cost_per_hour):.1f}" if comparable else "-",
        "SLO": ("met" if e.meets_slo else "VIOLATED") + ("" if result.feasible or not e.meets_slo else ", breaks a constraint"),
        "naive %": f"{100 * f.naive:.1f}" if f else "-",
        "corrected %": f"{100 * f.corrected:.1f}" if f else "-",
        "time ms": f"{1000 * result.seconds:.1f}",
    }


def render_solve(outcome: "SolveOutcome") -> str:
    """The text printed by ``optfleet solve``: the chosen plan, its pools, then every method side by side."""
    problem = outcome.loaded.problem
    main = outcome.main[0]
    base = first_result(outcome.results, "homogeneous")
    homogeneous = base.evaluation if base is not None else None
    lines = [
        f"instance {problem.name}: lambda = {problem.rate_rps:g} req/s, P99 TTFT SLO {problem.ttft_p99_ms:g} ms "
        f"(rule: {problem.ttft_rule}{', service model: batching' if problem.service_model == 'batching' else ''}), rho_max {problem.rho_max:g}",
        *assumption_lines(problem),
        "",
    ]
    if main.evaluation is None:
        lines.append(f"{main.method}: {main.note}")
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
            headline += f", {100 * (1 - e.cost_per_hour / homogeneous.cost_per_hour):.1f}% below homogeneous"
        if e.plan.served_share < 1.0:
            headline += f"; serves {100 * e.plan.served_share:.2f}% of the {problem.rate_rps:g} req/s (budget cap), rejects the rest"
        lines += [headline]
        if e.plan.rules is not None:
            lines += routing_lines(e.plan)
        if main.report is not None:
            tables = ("batching tables at each pool's traffic mix (approximate; the bound is a relaxation's, valid for every plan)"
                      if problem.service_model == "batching" else "Erlang tables")
            lines.append(f"solver: {main.report.summary}; solved {main.columns.get('table_iterations')} time(s) to refresh the "
                         f"{tables}; the plan passes the evaluator")
        if main.note:
            lines.append(f"note: {main.note}")
        lines += ["", _pool_table(problem, e)]
    lines += ["", "every method, scored by the same evaluator (savings vs homogeneous; naive/corrected = closed forms):"]
    lines.append(pd.DataFrame([_method_row(problem, r, homogeneous) for r in outcome.results]).to_string(index=False))
    lines += [f"  {r.method}: {r.note}" for r in outcome.results if (r.evaluation is None or not r.feasible) and r.note and r.method != main.method]
    return "\n".join(lines)


def render_gap(outcome: "GapOutcome") -> str:
    """The ``optfleet gap`` text: the core columns and the kind's own (see optfleet/tables.py)."""
    text = tables.single_group_gap(outcome, {"pools": ("pools", tables.text), "gpus": ("GPUs", tables.text), "instances": ("instances", tables.text)})
    head, _, rest = text.partition("\n")
    return "\n".join([head, *assumption_lines(outcome.loaded.problem), rest])


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


def render_simulation(result: "SimulationResult") -> str:
    """Simulated metrics per pool and for the fleet: ``mean +- half-width`` per cell.  The TPOT columns appear when
    the run measured them (batching mode; ``tpot_attainment`` when the instance sets a TPOT percentile target)."""
    known = ["utilisation", "wait_p50_ms", "wait_p99_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "slo_attainment",
             "tpot_mean_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "tpot_attainment", "queue_p99", "requests"]
    columns = [name for name in known if any(name in metrics for metrics in result.metrics.values())]
    rows = []
    for scope, metrics in result.metrics.items():
        row: dict[str, str] = {"scope": scope}
        for name in columns:
            if name in metrics and metrics[name][0] == metrics[name][0]:  # NaN: no measured request in the scope
                mean, half = metrics[name]
                shown = half == half and half > 1e-9 * max(abs(mean), 1.0)  # no half-width for one replication or round-off
                row[name] = f"{mean:,.4g} +- {half:.2g}" if shown else f"{mean:,.4g}"
            else:
                row[name] = "-"
        rows.append(row)
    return pd.DataFrame(rows).to_string(index=False)
