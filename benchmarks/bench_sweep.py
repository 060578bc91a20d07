"""Benchmark: the joint B x gamma sweep, vectorised vs a per-candidate evaluator loop.

For each paper workload and preset it times (median of --repeat runs, same
process) the vectorised sweep (CandidateTables prefix sums + vectorised sizing,
what ``optfleet solve --method sweep`` runs) and, as the baseline, the same
candidates scored one by one with the evaluator (route + exact pool statistics
+ sizing per candidate).  It checks both give the same best plan, prints the
time per workload, the number of candidates and the speed-up, and writes
benchmarks/out/ (benchmarks/results/ with --publish): sweep.json and sweep.md (quoted by the documentation).

Run: python benchmarks/bench_sweep.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.problem import FleetProblem, prepare
from optfleet.problems.fleet.heuristics.sweep import sweep
from optfleet.instance import load_instance

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")
PRESETS = ("paper", "fleetsim_compatible")


def loop_sweep(problem: FleetProblem) -> tuple[float, tuple]:
    """Baseline: every candidate routed and sized by the evaluator, one at a time."""
    best: tuple = (float("inf"),)
    plans = [Plan((PoolPlan("long", problem.long_window_tokens, 0),))]
    for b in problem.boundary_candidates:
        for g in problem.gammas:
            plans.append(Plan((PoolPlan("short", b, 0), PoolPlan("long", problem.long_window_tokens, 0)), gamma=g))
    for plan in plans:
        need = [p.min_instances for p in evaluate(problem, plan).pools]
        if min(need) < 0:
            continue
        cost = evaluate(problem, plan.with_instances(need)).cost_per_hour
        key = (cost, sum(need), plan.gamma, -(plan.boundary_tokens or problem.long_window_tokens))
        if key < best[:4]:
            best = (*key, plan.boundary_tokens, plan.gamma, need)
    return best[0], best


def _costs(row: dict) -> str:
    if row["sweep_per_hour"] is None:
        return "-"
    saving = 100 * (1 - row["sweep_per_hour"] / row["homogeneous_per_hour"])
    return f"{row['sweep_per_hour']:,.2f} vs {row['homogeneous_per_hour']:,.2f} (-{saving:.1f} %)"


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rows = []
    for preset in PRESETS:
        for name in WORKLOADS:
            problem = prepare(load_instance(ROOT / "instances" / "fleet" / f"{name}.yaml", preset=preset))
            homogeneous_cost = None
            try:
                result = sweep(problem)
                plan = result.plan
                found = (plan.boundary_tokens, plan.gamma, [p.instances for p in plan.pools])
                candidates = len(result.candidates)
                homogeneous_cost = float(result.candidates.loc[0, "cost_per_hour"])
                sweep_cost = float(result.candidates["cost_per_hour"].min())
            except InfeasibleError:  # infeasible instances are timed too
                found, candidates = "infeasible", None

            def vectorised() -> None:
                try:
                    sweep(problem)
                except InfeasibleError:
                    pass

            fast = median_seconds(vectorised, args.repeat)
            start = time.perf_counter()
            loop_cost, loop_best = loop_sweep(problem)
            slow = time.perf_counter() - start
            loop_found = (loop_best[4], loop_best[5], loop_best[6]) if loop_cost < float("inf") else None
            agree = (loop_found is None and isinstance(found, str)) or (
                loop_found is not None and not isinstance(found, str)
                and loop_found[1:] == found[1:] and (loop_found[0] == found[0])
            )
            rows.append({
                "workload": name, "preset": preset, "atoms": int(len(problem.mix.prob)),
                "candidates": candidates or 1 + len(problem.boundary_candidates) * len(problem.gammas),
                "sweep_ms": 1000 * fast, "evaluator_loop_ms": 1000 * slow, "speedup": slow / fast,
                "best": str(found), "loop_agrees": bool(agree),
                "homogeneous_per_hour": homogeneous_cost if homogeneous_cost != float("inf") else None,
                "sweep_per_hour": sweep_cost if homogeneous_cost is not None else None,
            })
            r = rows[-1]
            print(f"{preset:20s} {name:16s} atoms {r['atoms']:6d}  candidates {r['candidates']:4d}  "
                  f"sweep {r['sweep_ms']:7.2f} ms  loop {r['evaluator_loop_ms']:8.1f} ms  x{r['speedup']:6.1f}  "
                  f"agree {r['loop_agrees']}  best {r['best']}")
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "processor": platform.processor() or "unknown", "repeat": args.repeat}
    results = output_folder(args)
    (results / "sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = ["| preset | workload | atoms | candidates | sweep ms (median) | evaluator loop ms | speed-up | same best plan | sweep best (B, gamma, GPUs) | $/h sweep vs homogeneous |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['preset']} | {r['workload']} | {r['atoms']} | {r['candidates']} | {r['sweep_ms']:.2f} | {r['evaluator_loop_ms']:.0f} | "
              f"{r['speedup']:.0f}x | {'yes' if r['loop_agrees'] else 'NO'} | {r['best']} | {_costs(r)} |" for r in rows]
    (results / "sweep.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["loop_agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
