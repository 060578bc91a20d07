"""Benchmark: the engine model's slot-model plans, checked by the batching simulator on the same engine.

For the shipped engine instance (instances/fleet/azure_2023_h100_engine.yaml: Llama-3-70B on H100 x8, 100 req/s,
P99 TTFT 1 s, P99 TPOT 150 ms) and a prefill-heavy variant (5 % output tokens):

1. the MILP under preset engine and under preset paper (status, cost, bound, gap, GPUs, seconds): what charging
   prefill compute changes;
2. the engine plan simulated in batching mode (every iteration timed by the same affine engine): per pool the
   model's P99 TTFT, utilisation, mean TPOT and TPOT bound against the simulated P99 TTFT, slot occupancy, mean /
   P99 / largest TPOT, and the share of requests meeting the TTFT and TPOT targets: the simulator's metrics
   (simulate/run.py), each averaged over the replications (the largest TPOT: the mean of each one's largest).

Writes benchmarks/out/ (benchmarks/results/ with --publish): engine.json/.md (1) and engine_simulated.json/.md (2).
Run: python benchmarks/bench_engine.py [--requests 60000] [--reps 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import optfleet
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.simulate import simulate_plan

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "instances/fleet/azure_2023_h100_engine.yaml"
CASES = {"shipped": {}, "prefill-heavy (5 % output)": {"workload__split__output_fraction": 0.05}}
WARMUP_SHARE = 0.1


def solved(case: dict, preset: str) -> dict:
    problem = optfleet.load(INSTANCE, preset=preset, **case).problem
    start = time.perf_counter()
    result = solve_milp(problem)
    seconds = time.perf_counter() - start
    report, evaluation = result.report, result.evaluation
    return {"preset": preset, "status": report.status, "cost_per_hour": evaluation.cost_per_hour, "bound": report.bound,
            "gap_pct": report.gap, "gpus": sum(p.instances * problem.configuration(p.gpu).tp for p in evaluation.pools),
            "plan": " + ".join(f"{p.window_tokens}:{p.instances}" for p in evaluation.pools), "meets_slo": evaluation.meets_slo,
            "seconds": seconds, "problem": problem, "evaluation": evaluation}


def checked(engine: dict, requests: int, reps: int) -> list[dict]:
    problem, evaluation = engine["problem"], engine["evaluation"]
    plan = evaluation.plan
    simulated = simulate_plan(problem, plan, requests=requests, reps=reps, seed=0, mode="batching", warmup_share=WARMUP_SHARE).metrics
    rows = []
    for pool in evaluation.pools:
        if pool.share == 0:
            continue
        sim = simulated[pool.name]
        rows.append({"pool": pool.name, "instances": pool.instances, "ttft_p99_model_ms": pool.ttft_p99_ms, "ttft_p99_simulated_ms": sim["ttft_p99_ms"][0],
                     "ttft_attainment": sim["slo_attainment"][0], "utilisation_model": pool.utilisation,
                     "occupancy_simulated": sim["utilisation"][0], "tpot_mean_model_ms": pool.tpot_mean_ms, "tpot_bound_ms": pool.tpot_bound_ms,
                     "tpot_mean_simulated_ms": sim["tpot_mean_ms"][0], "tpot_p99_simulated_ms": sim["tpot_p99_ms"][0],
                     "tpot_max_simulated_ms": sim["tpot_max_ms"][0], "tpot_attainment": sim["tpot_attainment"][0]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    data, lines = {}, []
    for name, case in CASES.items():
        engine, paper = solved(case, "engine"), solved(case, "paper")
        pools = checked(engine, args.requests, args.reps)
        data[name] = {"milp": [{k: v for k, v in r.items() if k not in ("problem", "evaluation")} for r in (engine, paper)], "simulated": pools}
        for r in (engine, paper):
            lines.append([name, r["preset"], r["status"], f"{r['cost_per_hour']:,.2f}", f"{r['bound']:,.2f}", f"{r['gap_pct']:.2g}",
                          str(r["gpus"]), r["plan"], f"{r['seconds']:.2f}"])
        for p in pools:
            print(f"{name} {p['pool']}: P99 TTFT model {p['ttft_p99_model_ms']:.0f} / simulated {p['ttft_p99_simulated_ms']:.0f} ms "
                  f"(met by {100 * p['ttft_attainment']:.2f} %); TPOT mean model {p['tpot_mean_model_ms']:.0f} / simulated "
                  f"{p['tpot_mean_simulated_ms']:.0f} ms, P99 {p['tpot_p99_simulated_ms']:.0f}, largest {p['tpot_max_simulated_ms']:.0f}, "
                  f"bound {p['tpot_bound_ms']:.0f} ms (met by {100 * p['tpot_attainment']:.2f} %); utilisation model "
                  f"{p['utilisation_model']:.2f} / occupancy simulated {p['occupancy_simulated']:.2f}")
    folder = output_folder(args)
    write_results(folder, "engine", data, ["case", "preset", "status", "$/h", "bound", "gap %", "GPUs", "plan (window:instances)", "seconds"], lines)
    write_results(folder, "engine_simulated", {"requests": args.requests, "reps": args.reps},
                  ["case", "pool", "P99 TTFT model / simulated ms", "TTFT met %", "TPOT mean model / simulated ms",
                   "TPOT P99 / largest simulated ms", "TPOT bound ms", "TPOT met %", "utilisation model / occupancy simulated"],
                  [[name, p["pool"], f"{p['ttft_p99_model_ms']:.0f} / {p['ttft_p99_simulated_ms']:.0f}", f"{100 * p['ttft_attainment']:.2f}",
                    f"{p['tpot_mean_model_ms']:.0f} / {p['tpot_mean_simulated_ms']:.0f}",
                    f"{p['tpot_p99_simulated_ms']:.0f} / {p['tpot_max_simulated_ms']:.0f}", f"{p['tpot_bound_ms']:.0f}",
                    f"{100 * p['tpot_attainment']:.2f}", f"{p['utilisation_model']:.2f} / {p['occupancy_simulated']:.2f}"]
                   for name, d in data.items() for p in d["simulated"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
