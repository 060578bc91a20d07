"""Benchmark: the pd_fleet MILP on every shipped instance, against the best aggregated fleet and the Splitwise grid.

For each instance of instances/pd_fleet/ it times, in one process, prepare (workload, engines, memory checks), the
sizing of every candidate (the fleet's batching sizing of each aggregated option, the frontier of each (prefill,
decode) pair) and the MILP's build + solve, then runs ``best_aggregated`` and ``splitwise_grid``; it prints the MILP's
status, cost, bound and gap, its cost against the two baselines (ratios) and its total time against the Splitwise
grid's in the same run.  The issue's gate: the MILP proven optimal within 30 s on every shipped instance.
Writes benchmarks/out/ (benchmarks/results/ with --publish): pd_fleet.json and .md (quoted by the documentation).

Run: python benchmarks/bench_pd_fleet.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from optfleet.errors import InfeasibleError
from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.evaluator import evaluate
from optfleet.problems.pd_fleet.exact import candidates, solve_pd
from optfleet.problems.pd_fleet.grid import splitwise_grid
from optfleet.problems.pd_fleet.problem import prepare

from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = sorted((ROOT / "instances" / "pd_fleet").glob("*.yaml"))
GATE_S = 30.0


def bench(path: Path) -> dict:
    began = time.perf_counter()
    problem = prepare(load_instance(path))
    prepared = time.perf_counter()
    candidates(problem)
    sized = time.perf_counter()
    exact = solve_pd(problem)
    solved = time.perf_counter()
    try:
        aggregated = solve_pd(problem, aggregated_only=True).evaluation.cost_per_hour if problem.aggregated else None
    except InfeasibleError:
        aggregated = None
    grid_began = time.perf_counter()
    grid = evaluate(problem, splitwise_grid(problem)) if problem.prefill else None
    grid_s = time.perf_counter() - grid_began
    cost = exact.evaluation.cost_per_hour
    return {
        "instance": path.stem, "status": exact.report.status, "cost_per_hour": cost, "bound": exact.report.bound,
        "gap": exact.report.gap, "prepare_s": prepared - began, "sizing_s": sized - prepared, "solve_s": solved - sized,
        "total_s": solved - began, "gate_met": exact.report.proven_optimal and solved - began <= GATE_S,
        "disaggregated_pools": exact.evaluation.disaggregated_pools, "pools": len(problem.pools),
        "best_aggregated_cost_per_hour": aggregated,
        "splitwise_grid_cost_per_hour": grid.cost_per_hour if grid is not None and grid.feasible else None,
        "splitwise_grid_s": grid_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    speed = machine_speed()
    rows = [bench(path) for path in INSTANCES]

    def ratio(value, base):
        return "-" if value is None or base is None else f"{value / base:.3f}"

    table = []
    for r in rows:
        table.append([r["instance"], r["status"], f"{r['cost_per_hour']:.2f}", f"{r['bound']:.2f}", f"{100 * (r['gap'] or 0):.2g} %",
                      f"{r['disaggregated_pools']} of {r['pools']}", ratio(r["best_aggregated_cost_per_hour"], r["cost_per_hour"]),
                      ratio(r["splitwise_grid_cost_per_hour"], r["cost_per_hour"]), f"{r['prepare_s']:.2f}", f"{r['sizing_s']:.2f}",
                      f"{r['solve_s']:.2f}", f"{r['total_s']:.2f}", ratio(r["total_s"], r["splitwise_grid_s"]),
                      "yes" if r["gate_met"] else "NO"])
        print(" | ".join(table[-1]))
    columns = ["instance", "MILP status", "MILP $/h", "bound $/h", "gap", "disaggregated pools", "best aggregated / MILP",
               "Splitwise grid / MILP", "prepare s", "sizing s", "MILP solve s", "total s", "time MILP / grid",
               f"optimal in {GATE_S:g} s"]
    print(f"machine: {machine_speed_text(speed)}")
    write_results(folder, "pd_fleet", {"machine": speed, "gate_s": GATE_S, "rows": rows}, columns, table)


if __name__ == "__main__":
    main()
