"""Benchmark: the fleet MILP under the continuous-batching service model (optfleet/problems/fleet/milp_batching.py).

On the three paper workloads (preset paper, slo.service_model: batching), in one process: the sweep (the baseline)
and the MILP (threshold routing, K = 2, the instances' solve: block): cost, the MILP's relaxation bound and the gap
of both to it, the MILP's status, table refreshes, where its plan came from, and its time as a ratio to the sweep's.
The bound is given twice: the relaxation with integer chunk levels (floor ``P99 chunks + 1`` iterations, the bound
before the join levels) and the one the MILP reports, with the join levels (milp_batching.py ``join_levels``).

Where the gap is: the relaxation's routing with every pool at its least instance count under the evaluator
(``MilpResult.relaxation_routing``) splits the gap into the bound's part (bound to that cost) and the incumbent's
(that cost to the incumbent), and a second table shows, per pool of that plan, what of the P99 TTFT the relaxation
leaves out: the loaded iteration ``t`` against the idle ``W`` the floor levels count in, and the in-GPU P99 in
iterations against the relaxation's floor ``P99 chunks + 1`` (the rest is the join and the prefill wait).

A third table holds the engine model's instances (``preset: engine``, the batching service model: the Azure 70B,
LMSYS 8B and Agent-heavy 70B TP4 fleets), whose bound is the relaxation with the cycle row, its work levels
(models/fleet_work_levels.py) and the prefill floor levels (milp_batching.py ``relaxation_data``); its "before" is the
relaxation without any of them (the occupancy row and the integer chunk levels with the base step as ``W``), and a
column gives the bound without the work levels alone.

Writes benchmarks/out/ (benchmarks/results/ with --publish): batching_milp.json|md, batching_milp_gap_parts.json|md and
batching_milp_engine.json|md.
Run: python benchmarks/bench_batching_milp.py
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.constraints import gpu_bounds
from optfleet.problems.fleet.milp import _build, _runner, solve_milp
from optfleet.problems.fleet.milp_batching import relaxation_data
from optfleet.problems.fleet.milp_data import prepare_milp_data
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing import route
from optfleet.solvers.report import relative_gap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from output import add_output_option, output_folder, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")
ENGINE_INSTANCES = ("azure_2023_h100_batching", "lmsys_llama3_8b_batching", "agent_heavy_engine_batching")  # preset: engine, batching service model


def row(name: str) -> dict:
    problem = optfleet.load(ROOT / f"instances/fleet/{name}.yaml", slo__service_model="batching").problem
    start = time.perf_counter()
    swept = evaluate(problem, sweep(problem).plan)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    result = solve_milp(problem)
    milp_s = time.perf_counter() - start
    bound = result.report.bound
    resized = result.relaxation_routing
    before = chunk_level_bound(problem)
    unleveled = work_level_free_bound(problem) if problem.charges_prefill else None
    return {
        "workload": name, "sweep_cost": swept.cost_per_hour, "sweep_gpus": swept.total_instances, "sweep_seconds": sweep_s,
        "milp_cost": result.evaluation.cost_per_hour, "milp_gpus": result.evaluation.total_instances, "milp_seconds": milp_s,
        "milp_plan": " + ".join(f"{p.window_tokens}:{p.instances}" for p in result.evaluation.pools), "plan_origin": result.note or result.plan.method,
        "status": result.report.status, "bound": bound, "milp_gap": relative_gap(result.evaluation.cost_per_hour, bound),
        "sweep_gap": relative_gap(swept.cost_per_hour, bound), "models_solved": len(result.history),
        "passing_models": sum(h["passes_evaluator"] for h in result.history),
        "chunk_level_bound": before, "chunk_level_gap": None if before is None else relative_gap(result.evaluation.cost_per_hour, before),
        "work_level_free_bound": unleveled,
        "work_level_free_gap": None if unleveled is None else relative_gap(result.evaluation.cost_per_hour, unleveled),
        "relaxation_routing_cost": None if resized is None else resized.cost_per_hour,
        "relaxation_routing_gap": None if resized is None else relative_gap(resized.cost_per_hour, bound),
        "ttft_parts": [] if resized is None else ttft_parts(problem, resized.plan),
    }


def chunk_level_bound(problem: FleetProblem) -> float | None:
    """The relaxation's bound before the join levels (integer chunk levels, floor ``P99 chunks + 1``): the "before"."""
    data, tables = relaxation_data(prepare_milp_data(problem), with_join=False)
    model = _build(problem, data, gpu_bounds(data, problem.constraints), data.service_ratio_ms, routing=problem.milp_routing,
                   max_pools=problem.max_pools, customize=None, wait_tables=tables)
    return _runner(model, problem.solver, None)(model, time_limit=problem.time_limit_s, mip_gap=problem.mip_gap).bound


def work_level_free_bound(problem: FleetProblem) -> float | None:
    """Under the engine model, the relaxation's bound without the work levels (the cycle row alone)."""
    data, tables = relaxation_data(prepare_milp_data(problem))
    data = replace(data, work_levels=None)
    model = _build(problem, data, gpu_bounds(data, problem.constraints), data.service_ratio_ms, routing=problem.milp_routing,
                   max_pools=problem.max_pools, customize=None, wait_tables=tables)
    return _runner(model, problem.solver, None)(model, time_limit=problem.time_limit_s, mip_gap=problem.mip_gap).bound


def ttft_parts(problem: FleetProblem, plan: Plan) -> list[dict]:
    """Per pool of ``plan`` (the relaxation's routing at the evaluator's least counts): the loaded iteration against the
    idle ``W``, and the in-GPU P99 in iterations against the relaxation's floor ``P99 chunks + 1``."""
    evaluation = evaluate(problem, plan)
    parts = []
    for pool, metrics, traffic in zip(plan.pools, evaluation.pools, route(problem.mix, plan, problem.compressible_fraction), strict=True):
        if traffic.share <= 0:
            continue
        config = problem.pool(pool.window_tokens)
        chunks = config.prefill_chunks(traffic.l_in)
        weight = traffic.weight / traffic.weight.sum()
        p99_chunks = min(m for m in range(int(chunks.max()) + 1) if weight[chunks > m].sum() <= 0.01)
        iteration_ms = metrics.first_iteration_ms
        parts.append({"window_tokens": pool.window_tokens, "instances": pool.instances, "iteration_ms": iteration_ms, "w_ms": config.w_ms,
                      "in_gpu_p99_iterations": (metrics.prefill_p99_ms + iteration_ms) / iteration_ms, "floor_iterations": p99_chunks + 1,
                      "ttft_p99_ms": metrics.ttft_p99_ms, "wait_p99_ms": metrics.wait_p99_ms})
    return parts


def origin(note: str) -> str:
    """The MILP row's plan origin in a few words (milp.py's note, else the plan's method)."""
    if note.startswith("the sweep"):
        return "sweep (fallback)"
    if note.startswith("the routing of the relaxation's plan"):
        return "relaxation's routing, pools resized"
    if note.startswith("the routing"):
        return f"model {note.split('model ')[1].split()[0]}'s routing, pools resized"
    return note


def table_row(r: dict) -> list[str]:
    """One workload's line of the MILP tables."""
    return [r["workload"], f"{r['sweep_cost']:,.2f} ({r['sweep_gpus']})", f"{r['milp_cost']:,.2f} ({r['milp_gpus']})", r["milp_plan"],
            origin(r["plan_origin"]),
            "-" if r["chunk_level_bound"] is None else f"{r['chunk_level_bound']:,.2f} ({percent(r['chunk_level_gap'])})",
            "-" if r["bound"] is None else f"{r['bound']:,.2f}", percent(r["milp_gap"]), percent(r["sweep_gap"]),
            "-" if r["relaxation_routing_cost"] is None else f"{r['relaxation_routing_cost']:,.2f} ({percent(r['relaxation_routing_gap'])})",
            r["status"], f"{r['models_solved']} ({r['passing_models']})",
            f"{r['milp_seconds']:.1f} / {r['sweep_seconds']:.1f} = {r['milp_seconds'] / r['sweep_seconds']:.1f}x"]


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    args = parser.parse_args()
    rows = []
    for name in WORKLOADS:
        rows.append(row(name))
        print(rows[-1])
    engine_rows = []
    for name in ENGINE_INSTANCES:
        engine_rows.append(row(name))
        print(engine_rows[-1])
    columns = ["workload", "sweep $/h (GPUs)", "MILP $/h (GPUs)", "MILP plan", "plan from", "bound: chunk levels $/h (MILP gap)",
               "bound: join levels $/h", "MILP gap", "sweep gap", "relaxation's routing resized $/h (gap)", "status", "models solved (passing)",
               "MILP s / sweep s"]
    folder = output_folder(args)
    write_results(folder, "batching_milp", {"rows": rows}, columns, [table_row(r) for r in rows])
    engine_columns = [*columns[:5], "bound: occupancy row, chunk levels $/h (MILP gap)", "bound: cycle row without work levels $/h (MILP gap)",
                      "bound: cycle row with work levels, prefill floor levels $/h", *columns[7:]]
    engine_table = []
    for r in engine_rows:
        line = table_row(r)
        free = "-" if r["work_level_free_bound"] is None else f"{r['work_level_free_bound']:,.2f} ({percent(r['work_level_free_gap'])})"
        engine_table.append([*line[:6], free, *line[6:]])
    write_results(folder, "batching_milp_engine", {"rows": engine_rows}, engine_columns, engine_table)
    part_columns = ["workload", "pool", "GPUs", "iteration t ms (idle W)", "in-GPU P99 iterations", "relaxation floor iterations (P99 chunks + 1)",
                    "join + prefill wait iterations", "slot wait P99 ms", "P99 TTFT ms"]
    part_rows = [[r["workload"], f"w{p['window_tokens']}", str(p["instances"]), f"{p['iteration_ms']:.1f} ({p['w_ms']:.0f})",
                  f"{p['in_gpu_p99_iterations']:.2f}", str(p["floor_iterations"]), f"{p['in_gpu_p99_iterations'] - p['floor_iterations']:.2f}",
                  f"{p['wait_p99_ms']:.1f}", f"{p['ttft_p99_ms']:.1f}"] for r in rows for p in r["ttft_parts"]]
    write_results(folder, "batching_milp_gap_parts", {"rows": [dict(workload=r["workload"], pools=r["ttft_parts"]) for r in rows]},
                  part_columns, part_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
