"""Benchmark: the discrete-event simulator's speed and its agreement with the analytical evaluator.

1. Speed: 1e6 requests through the largest shipped plan (agent-heavy under the
   fleetsim-compatible preset, 1,851 GPUs) in slot mode; requests per second.
2. Validation: every feasible sweep plan of the three paper workloads under
   both presets, and the MILP plan (threshold routing, K = 2) under both
   presets, simulated in slot
   mode (--requests, default 1e6) and in batching mode (--batching-requests,
   default 4e5), one replication each, against the evaluator: utilisation and
   P99 TTFT per pool, relative errors, and the time each run took.

Writes benchmarks/out/ (benchmarks/results/ with --publish): simulate.json and simulate.md (quoted by the documentation).
Run: python benchmarks/bench_simulate.py [--requests 1000000] [--batching-requests 200000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.milp import solve_milp
import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.simulate import simulate_plan

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
CASES = [(w, p, m) for p in ("paper", "fleetsim_compatible") for w in ("azure_2023", "lmsys_multiturn", "agent_heavy") for m in ("sweep", "milp")]


def method_plan(problem, method: str):
    return sweep(problem).plan if method == "sweep" else solve_milp(problem, routing="threshold").plan


def timed(problem, plan, requests: int, mode: str):
    start = time.perf_counter()
    result = simulate_plan(problem, plan, requests=requests, reps=1, seed=0, mode=mode)
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--batching-requests", type=int, default=400_000)
    args = parser.parse_args()

    problem = optfleet.load(ROOT / "instances/fleet/agent_heavy.yaml", preset="fleetsim_compatible").problem
    plan = sweep(problem).plan
    _, seconds = timed(problem, plan, args.requests, "slots")
    speed = {"plan_gpus": sum(p.instances for p in plan.pools), "requests": args.requests, "seconds": seconds, "requests_per_s": args.requests / seconds}
    print(f"speed: {args.requests} requests through {speed['plan_gpus']} GPUs in {seconds:.1f} s ({speed['requests_per_s']:,.0f} req/s), slot mode")

    rows, skipped = [], []
    for name, preset, method in CASES:
        problem = optfleet.load(ROOT / f"instances/fleet/{name}.yaml", preset=preset).problem
        try:
            plan = method_plan(problem, method)
        except (InfeasibleError, InputError) as exc:
            print(f"{preset:20s} {name:16s} {method:5s} no plan: {exc}")
            skipped.append(f"{preset} / {name} / {method}: no plan to simulate ({str(exc)[:90]})")
            continue
        analytic = evaluate(problem, plan)
        for mode, requests in (("slots", args.requests), ("batching", args.batching_requests)):
            try:
                result, seconds = timed(problem, plan, requests, mode)
            except InputError as exc:
                print(f"{preset:20s} {name:16s} {method:5s} {mode:8s} skipped: {exc}")
                skipped.append(f"{preset} / {name} / {method} / {mode}: skipped, {exc}")
                continue
            for pool in analytic.pools:
                if pool.instances == 0:
                    continue
                sim = result.metrics[pool.name]
                row = {
                    "preset": preset, "workload": name, "method": method, "mode": mode, "requests": requests, "seconds": seconds,
                    "pool": pool.name, "gpus": pool.instances,
                    "util_analytic": pool.utilisation, "util_simulated": sim["utilisation"][0],
                    "util_rel_error": sim["utilisation"][0] / pool.utilisation - 1,
                    "ttft_p99_analytic_ms": pool.ttft_p99_ms, "ttft_p99_simulated_ms": sim["ttft_p99_ms"][0],
                    "slo_attainment": sim["slo_attainment"][0],
                }
                rows.append(row)
                print(f"{preset:20s} {name:16s} {method:5s} {mode:8s} {pool.name:6s} GPUs {pool.instances:5d}  util {row['util_analytic']:.4f} vs {row['util_simulated']:.4f} "
                      f"({100 * row['util_rel_error']:+.2f} %)  P99 TTFT {row['ttft_p99_analytic_ms']:8.1f} vs {row['ttft_p99_simulated_ms']:8.1f} ms  "
                      f"SLO met {100 * row['slo_attainment']:.1f} %  [{seconds:.1f} s, {requests / seconds:,.0f} req/s]")
    results = output_folder(args)
    (results / "simulate.json").write_text(json.dumps({"speed": speed, "validation": rows, "skipped": skipped}, indent=2) + "\n")
    lines = [
        f"Speed: {speed['requests']:,} requests through a {speed['plan_gpus']:,}-GPU plan in {speed['seconds']:.1f} s "
        f"({speed['requests_per_s']:,.0f} requests/s, slot mode).",
        "",
        "| preset | workload | method | mode | pool | GPUs | utilisation analytic | simulated | rel. error | P99 TTFT analytic ms | simulated ms | SLO attainment | run s (req/s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['preset']} | {r['workload']} | {r['method']} | {r['mode']} | {r['pool']} | {r['gpus']} | {r['util_analytic']:.4f} | {r['util_simulated']:.4f} | "
        f"{100 * r['util_rel_error']:+.2f} % | {r['ttft_p99_analytic_ms']:.1f} | {r['ttft_p99_simulated_ms']:.1f} | {100 * r['slo_attainment']:.1f} % | "
        f"{r['seconds']:.1f} ({r['requests'] / r['seconds']:,.0f}) |"
        for r in rows
    ]
    lines += ["", *(f"- {line}" for line in skipped)]
    (results / "simulate.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
