"""Benchmark: the fleet MILP against the sweep, in one process.

For each paper workload under both presets (``paper``; ``fleetsim_compatible``,
where the MILP solves the floor levels' restriction and relaxation) and each MILP configuration -- restricted to the sweep's
policy space, threshold routing K = 2, split routing K = 2 and K = 3 -- it
times data preparation + build + solve (with the R_j refreshes), and prints
MILP time / sweep time and MILP cost / sweep cost with the solver's status,
bound and gap.  Where the moment-ratio levels (models/fleet_moments.py) closed a gap, the same run without them
(``MOMENT_ROUNDS = 0``: the bound at each pool's least class ratio) gives the "before" columns of milp_moments.md.
Writes benchmarks/out/ (benchmarks/results/ with --publish): milp.json and milp.md (quoted by
the documentation).

Run: python benchmarks/bench_milp.py [--time-limit 120]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import optfleet.problems.fleet.milp as milp_driver
from optfleet.errors import InfeasibleError
import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep

from output import add_output_option, gap_pct, output_folder

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")
PRESETS = ("paper", "fleetsim_compatible")
CONFIGS = (("sweep", 2), ("threshold", 2), ("split", 2), ("split", 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    rows = []
    for preset, name in ((p, w) for p in PRESETS for w in WORKLOADS):
        problem = optfleet.load(ROOT / f"instances/fleet/{name}.yaml", preset=preset).problem
        start = time.perf_counter()
        try:
            swept = evaluate(problem, sweep(problem).plan).cost_per_hour
        except InfeasibleError:
            swept = None
        sweep_s = time.perf_counter() - start
        for routing, max_pools in CONFIGS:
            start = time.perf_counter()
            try:
                result = milp_driver.solve_milp(problem, routing=routing, max_pools=max_pools, time_limit_s=args.time_limit)
            except InfeasibleError as exc:
                rows.append({"preset": preset, "workload": name, "routing": routing, "K": max_pools, "status": "infeasible", "reason": str(exc)[:120],
                             "seconds": time.perf_counter() - start, "sweep_seconds": sweep_s})
                print(f"{preset:19s} {name:16s} {routing:9s} K={max_pools} infeasible ({time.perf_counter() - start:.1f} s)")
                continue
            seconds = time.perf_counter() - start
            report = result.report
            row = {
                "preset": preset, "workload": name, "routing": routing, "K": max_pools, "status": report.status, "objective": report.objective,
                "bound": report.bound, "gap": report.gap, "seconds": seconds, "solver_seconds": report.seconds,
                "iterations": result.iterations, "sweep_cost": swept, "sweep_seconds": sweep_s,
                "windows": [p.window_tokens for p in result.plan.pools], "gpus": [p.instances for p in result.plan.pools],
                "passes_evaluator": result.evaluation.meets_slo,
            }
            if "E[S^2]/E[S] interval" in report.log:  # the moment-ratio levels ran: the same solve without them
                row["before"] = _without_ratio_levels(problem, routing, max_pools, args.time_limit)
            rows.append(row)
            print(f"{preset:19s} {name:16s} {routing:9s} K={max_pools} {report.summary}; total {seconds:.1f} s ({result.iterations} solves); "
                  f"MILP/sweep cost {report.objective / swept:.4f}, time x{seconds / sweep_s:,.0f}; windows {row['windows']} GPUs {row['gpus']}")
    results = output_folder(args)
    (results / "milp.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["| preset | workload | routing | K | status | $/h MILP | bound | gap | sweep $/h | MILP / sweep cost | windows (GPUs) | MILP s (solves) | sweep ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "infeasible":
            lines.append(f"| {r['preset']} | {r['workload']} | {r['routing']} | {r['K']} | infeasible | - | - | - | - | - | - | {r['seconds']:.1f} | {1000 * r['sweep_seconds']:.1f} |")
            continue
        pools = ", ".join(f"{w} ({n})" for w, n in zip(r["windows"], r["gpus"], strict=True))
        lines.append(f"| {r['preset']} | {r['workload']} | {r['routing']} | {r['K']} | {r['status']} | {r['objective']:,.2f} | {r['bound']:,.2f} | {gap_pct(r['gap'])} | "
                     f"{r['sweep_cost']:,.2f} | {r['objective'] / r['sweep_cost']:.4f} | {pools} | {r['seconds']:.1f} ({r['iterations']}) | {1000 * r['sweep_seconds']:.1f} |")
    (results / "milp.md").write_text("\n".join(lines) + "\n")
    before = [r for r in rows if "before" in r]
    if before:
        lines = ["| preset | workload | routing | K | before: status | $/h | bound | gap | s | after: status | $/h | bound | gap | s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in before:
            b = r["before"]
            lines.append(f"| {r['preset']} | {r['workload']} | {r['routing']} | {r['K']} | {b['status']} | {b['objective']:,.2f} | {b['bound']:,.2f} | "
                         f"{gap_pct(b['gap'])} | {b['seconds']:.1f} | {r['status']} | {r['objective']:,.2f} | {r['bound']:,.2f} | {gap_pct(r['gap'])} | "
                         f"{r['seconds']:.1f} |")
        (results / "milp_moments.md").write_text("\n".join(lines) + "\n")
    return 0


def _without_ratio_levels(problem, routing: str, max_pools: int, time_limit_s: float) -> dict:
    """The MILP's result with no moment-ratio rounds (the bound at each pool's least class ratio), and its time."""
    rounds, milp_driver.MOMENT_ROUNDS = milp_driver.MOMENT_ROUNDS, 0
    try:
        start = time.perf_counter()
        report = milp_driver.solve_milp(problem, routing=routing, max_pools=max_pools, time_limit_s=time_limit_s).report
        return {"status": report.status, "objective": report.objective, "bound": report.bound, "gap": report.gap,
                "seconds": time.perf_counter() - start}
    finally:
        milp_driver.MOMENT_ROUNDS = rounds


if __name__ == "__main__":
    sys.exit(main())
