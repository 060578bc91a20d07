"""Benchmark: the fleet MILP under the continuous-batching service model (optfleet/problems/fleet/milp_batching.py).

On the three paper workloads (preset paper, slo.service_model: batching), in one process: the sweep (the baseline)
and the MILP (threshold routing, K = 2, the instances' solve: block): cost, the MILP's relaxation bound and the gap
of both to it, the MILP's status, table refreshes, where its plan came from, and its time as a ratio to the sweep's.

Writes benchmarks/out/ (benchmarks/results/ with --publish): batching_milp.json and batching_milp.md.
Run: python benchmarks/bench_batching_milp.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.solvers.report import relative_gap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from output import add_output_option, output_folder, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")


def row(name: str) -> dict:
    problem = optfleet.load(ROOT / f"instances/fleet/{name}.yaml", slo__service_model="batching").problem
    start = time.perf_counter()
    swept = evaluate(problem, sweep(problem).plan)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    result = solve_milp(problem)
    milp_s = time.perf_counter() - start
    bound = result.report.bound
    return {
        "workload": name, "sweep_cost": swept.cost_per_hour, "sweep_gpus": swept.total_instances, "sweep_seconds": sweep_s,
        "milp_cost": result.evaluation.cost_per_hour, "milp_gpus": result.evaluation.total_instances, "milp_seconds": milp_s,
        "milp_plan": " + ".join(f"{p.window_tokens}:{p.instances}" for p in result.evaluation.pools), "plan_origin": result.note or result.plan.method,
        "status": result.report.status, "bound": bound, "milp_gap": relative_gap(result.evaluation.cost_per_hour, bound),
        "sweep_gap": relative_gap(swept.cost_per_hour, bound), "models_solved": len(result.history),
        "passing_models": sum(h["passes_evaluator"] for h in result.history),
    }


def origin(note: str) -> str:
    """The MILP row's plan origin in a few words (milp.py's note, else the plan's method)."""
    if note.startswith("the sweep"):
        return "sweep (fallback)"
    if note.startswith("the routing"):
        return f"model {note.split('model ')[1].split()[0]}'s routing, pools resized"
    return note


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
    columns = ["workload", "sweep $/h (GPUs)", "MILP $/h (GPUs)", "MILP plan", "plan from", "relaxation bound $/h", "MILP gap", "sweep gap",
               "status", "models solved (passing)", "MILP s / sweep s"]
    table = [[r["workload"], f"{r['sweep_cost']:,.2f} ({r['sweep_gpus']})", f"{r['milp_cost']:,.2f} ({r['milp_gpus']})", r["milp_plan"],
              origin(r["plan_origin"]),
              "-" if r["bound"] is None else f"{r['bound']:,.2f}", percent(r["milp_gap"]), percent(r["sweep_gap"]), r["status"],
              f"{r['models_solved']} ({r['passing_models']})", f"{r['milp_seconds']:.1f} / {r['sweep_seconds']:.1f} = {r['milp_seconds'] / r['sweep_seconds']:.1f}x"]
             for r in rows]
    write_results(output_folder(args), "batching_milp", {"rows": rows}, columns, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
