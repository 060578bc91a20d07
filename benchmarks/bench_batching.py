"""Benchmark: the continuous-batching service model (slo.service_model: batching) against the batching simulator.

1. Fleet size: on the three paper workloads (preset paper), the sweep's and the homogeneous fleet's GPUs and
   cost under the slot model and under the batching model, and the sweep's time under each (the batching sweep
   routes every candidate, the slot sweep reads prefix tables).
2. Validation: every plan (the slot model's sweep and MILP plans, the batching model's sweep and MILP plans) simulated in
   batching mode (--requests x --reps replications) and scored by the batching model: utilisation (slot occupancy) and
   P99 TTFT per pool, with relative errors against the targets (5 % and 10 %).

Writes benchmarks/out/ (benchmarks/results/ with --publish): batching.json, batching_fleets.md (1) and batching.md (2).
Run: python benchmarks/bench_batching.py [--requests 600000] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import optfleet
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import homogeneous, sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.simulate import simulate_plan

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("azure_2023", "lmsys_multiturn", "agent_heavy")
UTIL_TARGET, TTFT_TARGET = 0.05, 0.10


def problems(name: str):
    path = ROOT / f"instances/fleet/{name}.yaml"
    return optfleet.load(path).problem, optfleet.load(path, slo__service_model="batching").problem


def fleet_rows() -> list[dict]:
    rows = []
    for name in WORKLOADS:
        for model, problem in zip(("slots", "batching"), problems(name), strict=True):
            row = {"workload": name, "model": model}
            try:
                start = time.perf_counter()
                result = sweep(problem)
                row["sweep_seconds"] = time.perf_counter() - start
                ev = evaluate(problem, result.plan)
                row.update(sweep_gpus=ev.total_instances, sweep_cost=ev.cost_per_hour,
                           sweep_plan=" + ".join(f"{p.window_tokens}:{p.instances}" for p in result.plan.pools) + f" (gamma {result.plan.gamma:g})")
            except InfeasibleError as exc:
                row.update(sweep_gpus=None, sweep_cost=None, sweep_plan=f"infeasible: {str(exc)[:80]}", sweep_seconds=None)
            try:
                ev = evaluate(problem, homogeneous(problem))
                row.update(homogeneous_gpus=ev.total_instances, homogeneous_cost=ev.cost_per_hour)
            except InfeasibleError:
                row.update(homogeneous_gpus=None, homogeneous_cost=None)
            rows.append(row)
            print(row)
    return rows


def plans(name: str):
    slot_problem, batching_problem = problems(name)
    made = {}
    for label, make in (("slot sweep", lambda: sweep(slot_problem).plan), ("slot MILP", lambda: solve_milp(slot_problem, routing="threshold").plan),
                        ("batching sweep", lambda: sweep(batching_problem).plan), ("batching MILP", lambda: solve_milp(batching_problem).plan)):
        try:
            plan = make()
        except (InfeasibleError, InputError) as exc:
            yield label, f"no plan ({str(exc)[:90]})"
            continue
        same = next((other for other, seen in made.items() if seen.pools == plan.pools and seen.rules == plan.rules and seen.gamma == plan.gamma), None)
        made[label] = plan
        yield label, plan if same is None else f"the same plan as the {same}"


def validation_rows(requests: int, reps: int) -> tuple[list[dict], list[str]]:
    rows, skipped = [], []
    for name in WORKLOADS:
        _, problem = problems(name)
        for label, plan in plans(name):
            if isinstance(plan, str):
                skipped.append(f"{name} / {label}: {plan}")
                continue
            analytic = evaluate(problem, plan)
            try:
                start = time.perf_counter()
                result = simulate_plan(problem, plan, requests=requests, reps=reps, seed=0, mode="batching")
                seconds = time.perf_counter() - start
            except InputError as exc:
                skipped.append(f"{name} / {label}: simulation skipped, {exc}")
                continue
            for pool in analytic.pools:
                if pool.instances == 0 or pool.share == 0:
                    continue
                sim = result.metrics[pool.name]
                row = {"workload": name, "plan": label, "pool": pool.name, "window": pool.window_tokens, "gpus": pool.instances, "seconds": seconds,
                       "util_model": pool.utilisation, "util_simulated": sim["utilisation"][0], "util_ci95": sim["utilisation"][1],
                       "ttft_p99_model_ms": pool.ttft_p99_ms, "ttft_p99_simulated_ms": sim["ttft_p99_ms"][0], "ttft_ci95_ms": sim["ttft_p99_ms"][1],
                       "slo_attainment": sim["slo_attainment"][0]}
                row["util_rel_error"] = row["util_model"] / row["util_simulated"] - 1
                row["ttft_rel_error"] = row["ttft_p99_model_ms"] / row["ttft_p99_simulated_ms"] - 1
                rows.append(row)
                print(f"{name:16s} {label:15s} {pool.name:6s} GPUs {pool.instances:5d} util {row['util_model']:.4f} vs {row['util_simulated']:.4f} "
                      f"({100 * row['util_rel_error']:+.1f} %)  P99 TTFT {row['ttft_p99_model_ms']:.1f} vs {row['ttft_p99_simulated_ms']:.1f} ms "
                      f"({100 * row['ttft_rel_error']:+.1f} %)  SLO met {100 * row['slo_attainment']:.1f} %  [{seconds:.0f} s]")
    return rows, skipped


def money(value) -> str:
    return "-" if value is None else f"{value:,.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--requests", type=int, default=600_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    fleets = fleet_rows()
    rows, skipped = validation_rows(args.requests, args.reps)
    within = sum(abs(r["util_rel_error"]) <= UTIL_TARGET and abs(r["ttft_rel_error"]) <= TTFT_TARGET for r in rows)
    results = output_folder(args)
    (results / "batching.json").write_text(json.dumps({"fleets": fleets, "validation": rows, "skipped": skipped}, indent=2) + "\n")
    fleet_lines = [
        "Fleet size under the slot model and the batching model (preset paper; $/h):",
        "",
        "| workload | model | sweep plan (window:GPUs) | sweep GPUs | sweep $/h | homogeneous GPUs | homogeneous $/h | sweep s |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| {f['workload']} | {f['model']} | {f['sweep_plan']} | {f['sweep_gpus'] if f['sweep_gpus'] is not None else '-'} | {money(f['sweep_cost'])} | "
          f"{f['homogeneous_gpus'] if f['homogeneous_gpus'] is not None else '-'} | {money(f['homogeneous_cost'])} | "
          f"{'-' if f['sweep_seconds'] is None else format(f['sweep_seconds'], '.2f')} |" for f in fleets),
    ]
    (results / "batching_fleets.md").write_text("\n".join(fleet_lines) + "\n")
    lines = [
        f"Batching model vs batching simulator ({args.requests:,} requests per plan x {args.reps} replications, simulated values as "
        f"mean +- 95 % half-width; targets: utilisation within {100 * UTIL_TARGET:.0f} %, P99 TTFT within {100 * TTFT_TARGET:.0f} % of the "
        f"simulated mean): {within} of {len(rows)} pools within both.",
        "",
        "| workload | plan | pool | window | GPUs | utilisation model | simulated | error | P99 TTFT model ms | simulated ms | error | SLO attainment |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {r['workload']} | {r['plan']} | {r['pool']} | {r['window']} | {r['gpus']} | {r['util_model']:.4f} | {r['util_simulated']:.4f} +- "
          f"{r['util_ci95']:.4f} | {100 * r['util_rel_error']:+.1f} % | {r['ttft_p99_model_ms']:.1f} | {r['ttft_p99_simulated_ms']:.1f} +- "
          f"{r['ttft_ci95_ms']:.1f} | {100 * r['ttft_rel_error']:+.1f} % | "
          f"{100 * r['slo_attainment']:.1f} % |" for r in rows),
        "",
        *(f"- {line}" for line in skipped),
    ]
    (results / "batching.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
