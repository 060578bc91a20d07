"""Benchmark: the catalog-wide fleet MILP against the best single-type fleets, in one process.

For every shipped catalog instance, and for a scale case -- six GPU types
(A100-80GB, H100-SXM, H200, B200, MI300X, L40S) x TP {4, 8} x four windows on
the LMSYS workload with a 0.05 gamma step (64 length classes, 47 pool
options; the issue's "6 types x 4 windows x 2 TP x 50 classes") -- it times
prepare + build + solve (with the R_j refreshes) of the mixed MILP and of the
exact single-type MILP of each type, and prints mixed cost / best single-type
cost and the times; then the mixed MILP again under threshold routing (same K),
its time against the split routing time of the same run.  The scale case's
gate is "proven optimal in <= 10 s".
Writes benchmarks/out/ (benchmarks/results/ with --publish): heterogeneous.json and .md (quoted by the documentation).

Run: python benchmarks/bench_heterogeneous.py [--time-limit 120]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.milp import solve_milp
import optfleet
from optfleet.instance.loader import read_document
from optfleet.problems.fleet.kind import SINGLE_TYPE_PREFIX, run, single_type_methods
from optfleet.problems.fleet.milp_data import prepare_milp_data
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.progress import silent

from output import add_output_option, gap_pct, output_folder

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "instances" / "fleet"
INSTANCES = ("azure_2023_catalog", "lmsys_llama3_8b_catalog", "azure_2023_catalog_16_h100", "azure_2023_catalog_mix")
SCALE_GATE_S = 10.0


def scale_case() -> FleetProblem:
    """Six GPU types x TP {4, 8} x four windows, LMSYS CDF, gamma step 0.05, K = 3 split routing."""
    path = FLEET / "azure_2023_catalog.yaml"
    data = read_document(path)
    data["name"] = "scale-6-types"
    data["workload"]["lengths"] = {"cdf_file": str(path.parent / "data" / "lmsys_multiturn_cdf.json")}  # a mapping's paths resolve against the working folder
    data["gpu_catalog"]["gpus"] = ["A100-80GB", "H100-SXM", "H200", "B200", "MI300X", "L40S"]
    data["compression"]["gamma_step"] = 0.05
    return optfleet.load(data).problem


def measure(problem: FleetProblem, time_limit_s: float) -> dict:
    data = prepare_milp_data(problem)
    row: dict = {"instance": problem.name, "classes": len(data.mass), "options": len(data.pools), "K": problem.max_pools, "routing": problem.milp_routing}
    start = time.perf_counter()
    try:
        mixed = solve_milp(problem, routing=problem.milp_routing, max_pools=problem.max_pools, time_limit_s=time_limit_s, mip_gap=problem.mip_gap)
    except InfeasibleError as exc:
        row.update(status="infeasible", reason=str(exc)[:160], seconds=time.perf_counter() - start)
        return row
    row.update(
        status=mixed.report.status, cost=mixed.evaluation.cost_per_hour, bound=mixed.report.bound, gap=mixed.report.gap,
        seconds=time.perf_counter() - start, solves=mixed.iterations, passes_evaluator=mixed.evaluation.meets_slo,
        pools=[f"{p.gpu} {p.window_tokens}:{p.instances}" for p in mixed.evaluation.pools],
    )
    singles = {}
    for method in single_type_methods(problem):
        (result,) = run(problem, method, silent)
        singles[method.removeprefix(SINGLE_TYPE_PREFIX)] = {
            "cost": None if result.evaluation is None else result.evaluation.cost_per_hour,
            "status": "infeasible" if result.evaluation is None else result.report.status,
            "seconds": result.seconds,
        }
    row["single_type"] = singles
    start = time.perf_counter()
    try:
        threshold = solve_milp(problem, routing="threshold", max_pools=problem.max_pools, time_limit_s=time_limit_s, mip_gap=problem.mip_gap)
        row.update(threshold_status=threshold.report.status, threshold_cost=threshold.evaluation.cost_per_hour,
                   threshold_gap=threshold.report.gap, threshold_seconds=time.perf_counter() - start)
    except InfeasibleError:
        row.update(threshold_status="infeasible", threshold_cost=None, threshold_gap=None, threshold_seconds=time.perf_counter() - start)
    feasible = {t: s["cost"] for t, s in singles.items() if s["cost"] is not None}
    if feasible:
        best = min(feasible, key=feasible.get)
        row.update(best_single_type=best, best_single_cost=feasible[best], savings_pct=100 * (1 - row["cost"] / feasible[best]))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    problems = [optfleet.load(FLEET / f"{name}.yaml").problem for name in INSTANCES]
    rows = []
    for problem in [*problems, scale_case()]:
        row = measure(problem, args.time_limit)
        rows.append(row)
        if row["status"] == "infeasible":
            print(f"{row['instance']:30s} infeasible ({row['seconds']:.1f} s): {row['reason']}")
            continue
        versus = (f"best single type {row['best_single_type']} ${row['best_single_cost']:,.2f}/h, mixed saves {row['savings_pct']:.2f} %"
                  if "best_single_cost" in row else "no single type is feasible")
        print(f"{row['instance']:30s} {row['classes']} classes x {row['options']} options: {row['status']} ${row['cost']:,.2f}/h "
              f"in {row['seconds']:.1f} s ({row['solves']} solves); {versus}")
    results = output_folder(args)
    (results / "heterogeneous.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["| instance | classes x options | K | status | mixed $/h | gap | MILP s (solves) | best single type $/h | mixed saves | single-type s "
             "| threshold routing $/h | status | s | threshold / split s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "infeasible":
            lines.append(f"| {r['instance']} | {r['classes']} x {r['options']} | {r['K']} | infeasible | - | - | {r['seconds']:.1f} | - | - | - | - | - | - | - |")
            continue
        single_s = sum(s["seconds"] for s in r["single_type"].values())
        best = f"{r['best_single_type']} {r['best_single_cost']:,.2f}" if "best_single_cost" in r else "none feasible"
        saves = f"{r['savings_pct']:.2f} %" if "savings_pct" in r else "-"
        threshold_cost = "-" if r["threshold_cost"] is None else f"{r['threshold_cost']:,.2f}"
        lines.append(f"| {r['instance']} | {r['classes']} x {r['options']} | {r['K']} | {r['status']} | {r['cost']:,.2f} | {gap_pct(r['gap'])} | "
                     f"{r['seconds']:.1f} ({r['solves']}) | {best} | {saves} | {single_s:.1f} | {threshold_cost} | {r['threshold_status']} | "
                     f"{r['threshold_seconds']:.1f} | {r['threshold_seconds'] / r['seconds']:.1f} |")
    scale = rows[-1]
    verdict = "met" if scale["status"] == "optimal" and scale["seconds"] <= SCALE_GATE_S else "MISSED"
    lines.append("")
    lines.append(f"Scale gate (6 types x 4 windows x 2 TP, {scale['classes']} classes, proven optimal in <= {SCALE_GATE_S:.0f} s): "
                 f"{verdict} ({scale['status']}, {scale['seconds']:.1f} s).")
    slow = [r["instance"] for r in rows if r["status"] != "infeasible" and not (r["threshold_status"] == "optimal" and r["threshold_seconds"] <= SCALE_GATE_S)]
    lines.append(f"Threshold routing gate (every instance proven optimal in <= {SCALE_GATE_S:.0f} s): "
                 + ("met." if not slow else f"MISSED on {', '.join(slow)}."))
    (results / "heterogeneous.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
