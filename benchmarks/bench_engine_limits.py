"""Benchmark: how the paper workloads' fleets move when the engine's batch limits are on (issue: engine batch limits).

For each paper workload under both presets and three engine settings -- no limits (the
FleetOpt paper's model), vLLM's OpenAI-server defaults for the A100 (``defaults: vllm``:
256 sequences, 2,048 batched tokens) and a latency-oriented 128 / 512 -- it solves the
sweep and the MILP (the instance's routing and K) and prints each cost against the
no-limit cost of the same method, measured in the same run, with the MILP's status and
bound, the plan's pools and the largest slots per GPU and iteration time among them.
Writes benchmarks/out/ (benchmarks/results/ with --publish): engine_limits.{json,md}.

Run: python benchmarks/bench_engine_limits.py [--publish]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import optfleet
from optfleet.errors import InfeasibleError
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.milp import solve_milp

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")
PRESETS = ("paper", "fleetsim_compatible")
ENGINES = (("none", None), ("vllm A100 (256/2048)", {"defaults": "vllm"}),
           ("128/512", {"max_num_seqs": 128, "max_num_batched_tokens": 512}))


def _largest_pool(problem, plan) -> tuple[int, float]:
    """The largest slots per GPU among the plan's pools with GPUs, and that pool's full-batch iteration ms."""
    configs = [problem.pool(p.window_tokens, p.gpu) for p in plan.pools if p.instances > 0]
    top = max(configs, key=lambda c: c.slots_per_instance)
    return top.slots_per_instance, float(top.iteration_ms(top.window_tokens if top.length_scale_tokens else 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    args = parser.parse_args()
    rows = []
    for preset in PRESETS:
        for name in WORKLOADS:
            baseline: dict[str, float | None] = {}
            for label, engine in ENGINES:
                problem = optfleet.load(ROOT / f"instances/fleet/{name}.yaml", preset=preset, hardware__engine=engine).problem
                row = {"preset": preset, "workload": name, "engine": label}
                for method in ("sweep", "milp"):
                    try:
                        if method == "sweep":
                            plan = sweep(problem).plan
                            cost, status, bound = evaluate(problem, plan).cost_per_hour, "heuristic", None
                        else:
                            result = solve_milp(problem)
                            plan, cost, status, bound = result.plan, result.evaluation.cost_per_hour, result.report.status, result.report.bound
                    except InfeasibleError:
                        row[method] = {"status": "infeasible"}
                        continue
                    slots, iteration = _largest_pool(problem, plan)
                    baseline.setdefault(method, cost)
                    row[method] = {"status": status, "cost_per_hour": cost, "bound": bound, "pools": [(p.window_tokens, p.instances) for p in plan.pools],
                                   "max_slots_per_gpu": slots, "iteration_ms": iteration, "vs_no_limits": cost / baseline[method]}
                rows.append(row)
                print(f"{preset:19s} {name:16s} {label:22s} " + "; ".join(
                    f"{m} {row[m]['status']}" + (f" ${row[m]['cost_per_hour']:,.2f}/h (x{row[m]['vs_no_limits']:.3f}) {row[m]['pools']}"
                                                 if "cost_per_hour" in row[m] else "") for m in ("sweep", "milp")))
    folder = output_folder(args)

    def cell(result: dict) -> list[str]:
        if "cost_per_hour" not in result:
            return [result["status"], "-", "-", "-"]
        pools = ", ".join(f"{w} ({n})" for w, n in result["pools"])
        return [f"{result['cost_per_hour']:,.2f}", f"{result['vs_no_limits']:.4f}", pools,
                f"{result['max_slots_per_gpu']} / {result['iteration_ms']:.0f} ms"]

    columns = ["preset", "workload", "engine", "sweep $/h", "vs none", "sweep pools", "sweep max slots / t_iter",
               "MILP $/h", "vs none", "MILP pools", "MILP max slots / t_iter", "MILP status"]
    table = [[r["preset"], r["workload"], r["engine"], *cell(r["sweep"]), *cell(r["milp"]), r["milp"]["status"]] for r in rows]
    write_results(folder, "engine_limits", {"rows": rows}, columns, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
