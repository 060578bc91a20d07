"""Plain-text tables of a fleet run: the chosen plan's pools, then every method side by side."""

from __future__ import annotations

import pandas as pd

from optfleet.fleet.evaluator import FleetEvaluation
from optfleet.runs import FleetRun, MethodResult
from optfleet.simulate import SimulationResult


def _pool_table(evaluation: FleetEvaluation) -> str:
    rows = []
    for p in evaluation.pools:
        rows.append({
            "pool": p.name,
            "GPU": p.gpu,
            "window": p.window_tokens,
            "GPUs": p.gpus,
            "slots/GPU": p.slots_per_gpu,
            "traffic %": 100 * p.share,
            "compressed %": 100 * p.compressed_share,
            "E[S] s": p.mean_service_ms / 1000,
            "Cs^2": p.service_scv,
            "util %": 100 * p.utilisation,
            "P99 wait ms": p.wait_p99_ms,
            "TTFT floor ms": p.prefill_p99_ms + p.first_iteration_ms,
            "P99 TTFT ms": p.ttft_p99_ms,
            "binding": p.binding,
            "$/h": p.cost_per_hour,
        })
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def _method_row(result: MethodResult) -> dict[str, object]:
    e = result.evaluation
    if e is None:
        return {"method": result.method, "B": "-", "gamma": "-", "GPUs per pool": "-", "GPUs": "-", "$/h": "-", "$/yr": "-",
                "savings %": "-", "SLO": "infeasible", "naive %": "-", "corrected %": "-", "time ms": f"{1000 * result.seconds:.1f}"}
    f = result.forecast
    return {
        "method": result.method,
        "B": "rules" if e.plan.rules is not None else (e.plan.boundary_tokens or "-"),
        "gamma": "-" if e.plan.rules is not None else f"{e.plan.gamma:.1f}",
        "GPUs per pool": "/".join(str(p.gpus) for p in e.pools),
        "GPUs": e.total_gpus,
        "$/h": f"{e.cost_per_hour:,.2f}",
        "$/yr": f"{e.cost_per_year:,.0f}",
        "savings %": f"{100 * result.savings_vs_homogeneous:.1f}" if result.savings_vs_homogeneous is not None else "-",
        "SLO": "met" if e.meets_slo else "VIOLATED",
        "naive %": f"{100 * f.naive:.1f}" if f else "-",
        "corrected %": f"{100 * f.corrected:.1f}" if f else "-",
        "time ms": f"{1000 * result.seconds:.1f}",
    }


def render_run(run: FleetRun) -> str:
    """The text printed by ``optfleet solve``."""
    problem = run.problem
    main = run.main
    lines = [
        f"instance {problem.name}: lambda = {problem.rate_rps:g} req/s, P99 TTFT SLO {problem.ttft_p99_ms:g} ms "
        f"(rule: {problem.ttft_rule}), rho_max {problem.rho_max:g}",
        "",
    ]
    if main.evaluation is None:
        lines.append(f"{main.method}: {main.infeasible_reason}")
    else:
        e = main.evaluation
        boundary = e.plan.boundary_tokens
        if e.plan.rules is not None:
            headline = f"{main.method}: windows {', '.join(str(p.window_tokens) for p in e.plan.pools)}, split by {len(e.plan.rules)} length-class rules, "
        else:
            headline = f"{main.method}: B* = {boundary if boundary else '- (one pool)'}, gamma* = {e.plan.gamma:.1f}, "
        headline += ", ".join(f"n_{p.name} = {p.gpus}" for p in e.pools)
        headline += f"; {e.total_gpus} GPUs, ${e.cost_per_hour:,.2f}/h, ${e.cost_per_year:,.0f}/yr"
        if main.savings_vs_homogeneous is not None:
            headline += f", {100 * main.savings_vs_homogeneous:.1f}% below homogeneous"
        if e.plan.served_share < 1.0:
            headline += f"; serves {100 * e.plan.served_share:.2f}% of the {problem.rate_rps:g} req/s (budget cap), rejects the rest"
        lines += [headline]
        if main.solve_report is not None:
            lines.append(f"solver: {main.solve_report.summary}; solved {main.iterations} time(s) to refresh the Erlang tables; the plan passes the evaluator")
        lines += ["", _pool_table(e)]
    lines += ["", "every method, scored by the same evaluator (savings vs homogeneous; naive/corrected = closed forms):"]
    lines.append(pd.DataFrame([_method_row(r) for r in run.results.values()]).to_string(index=False))
    infeasible = [r for r in run.results.values() if r.evaluation is None and r.method != main.method]
    lines += [f"  {r.method}: {r.infeasible_reason}" for r in infeasible]
    return "\n".join(lines)


def render_simulation(result: SimulationResult) -> str:
    """Simulated metrics per pool and for the fleet: ``mean +- half-width`` per cell."""
    columns = ["utilisation", "wait_p50_ms", "wait_p99_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "slo_attainment", "queue_p99", "requests"]
    rows = []
    for scope, metrics in result.metrics.items():
        row: dict[str, str] = {"scope": scope}
        for name in columns:
            if name in metrics:
                mean, half = metrics[name]
                row[name] = f"{mean:,.4g}" if half != half else f"{mean:,.4g} +- {half:.2g}"
            else:
                row[name] = "-"
        rows.append(row)
    return pd.DataFrame(rows).to_string(index=False)


def render_gap(rows: list[dict]) -> str:
    """The ``optfleet gap`` table."""
    return pd.DataFrame(rows).to_string(index=False)
