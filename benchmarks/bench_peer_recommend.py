"""Benchmark: optfleet's plans beside NVIDIA aiconfigurator's ``recommend``, both simulated by optfleet on the same data.

For each case (model x system x rate x ISL/OSL x TTFT x TPOT), the peer's ``aiconfigurator cli recommend`` (a
benchmark-only dependency: the library never calls it) gives its aggregated plan (TP and replicas, from
``agg/best_config_topn.csv``'s first row without data-parallel attention, which optfleet's measured source does not
model; the JSON keeps the peer's first choice).  optfleet plans the same case from the same measured database
(``hardware.performance.source: measured``, the batching service model with its load-dependent P99 TPOT, the sweep),
at the peer's TP and at each TP that fits, keeping the cheapest.  Both plans are then simulated by optfleet's batching
simulator on that engine, under Poisson arrivals and a length distribution around the case's ISL/OSL (L_total
uniform on two segments, mean ISL + OSL, the output share OSL / (ISL + OSL)): GPUs, $/h, P99 TTFT, P99 TPOT and the
share of requests meeting each target.  The peer sizes for fixed ISL/OSL from static per-batch estimates; this
table shows what that plan does under a length distribution and queueing.

Needs the ``measured`` extra and the peer's CLI (pip install 'optfleet[measured]' aiconfigurator==<core version>).
Writes benchmarks/out/ (benchmarks/results/ with --publish): peer_recommend.json/.md.
Run: python benchmarks/bench_peer_recommend.py [--requests 100000] [--reps 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from optfleet.engine.measured import aiconfigurator_version
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.problem import prepare
from optfleet.problems.fleet.simulate import simulate_plan

from bench_measured_models import bundled_config
from output import add_output_option, output_folder, write_results

GPU_OF = {"h100_sxm": "H100-SXM", "h200_sxm": "H200"}
# (model, system, rate req/s, ISL, OSL, TTFT ms, TPOT ms, mixture of experts)
CASES = [
    ("Qwen/Qwen3-32B", "h100_sxm", 10.0, 4000, 500, 1000.0, 50.0, False),
    ("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", 40.0, 2000, 300, 500.0, 30.0, False),
    ("meta-llama/Meta-Llama-3.1-70B", "h100_sxm", 8.0, 3000, 400, 1500.0, 60.0, False),
    ("Qwen/Qwen3-30B-A3B", "h100_sxm", 20.0, 4000, 500, 1000.0, 40.0, True),
]


def peer_plan(model: str, system: str, rate: float, isl: int, osl: int, ttft: float, tpot: float) -> dict:
    """The first row of the peer's aggregated recommendation."""
    folder = Path(tempfile.mkdtemp(prefix="aic-recommend-"))
    command = [shutil.which("aiconfigurator") or "aiconfigurator", "cli", "recommend", "--model-path", model, "--system", system,
               "--backend", "vllm", "--target-request-rate", str(rate), "--isl", str(isl), "--osl", str(osl), "--ttft", str(ttft),
               "--tpot", str(tpot), "--save-dir", str(folder), "--log-level", "ERROR"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    table = pd.read_csv(next(folder.rglob("agg/best_config_topn.csv")))
    shutil.rmtree(folder, ignore_errors=True)
    # optfleet's measured source has tensor and expert parallelism, not data-parallel attention: the first row without it
    top = table[table["dp"] == 1].iloc[0]
    return {"tp": int(top["tp"]), "ep": int(top["moe_ep"]), "replicas": int(top["replicas_needed"]), "gpus": int(top["total_gpus_needed"]),
            "parallel": str(top["parallel"]), "first_choice": str(table.iloc[0]["parallel"]), "first_choice_gpus": int(table.iloc[0]["total_gpus_needed"]),
            "static_ttft_ms": float(top["ttft"]), "static_tpot_ms": float(top["tpot"]), "batch": int(top["bs"])}


def problem_of(model: str, system: str, rate: float, isl: int, osl: int, ttft: float, tpot: float, moe: bool, tp: int, ep: int):
    total = isl + osl
    document = {
        "kind": "fleet", "name": f"peer-{model.split('/')[-1]}",
        "workload": {"rate_rps": rate, "lengths": {"cdf": [[total // 2, 0.0], [total, 0.5], [3 * total // 2, 1.0]]},
                     "split": {"rule": "fixed_output_fraction", "output_fraction": osl / total}},
        "hardware": {"gpu": GPU_OF[system], "config_json": str(bundled_config(model)), "model": model.split("/")[-1], "tp": tp,
                     "engine": {"max_num_batched_tokens": 2048},
                     "performance": {"source": "measured", "model": model, "system": system, "backend": "vllm", **({"ep": ep} if moe else {})}},
        "pools": {"long_window_tokens": 2 * total},
        "compression": {"enabled": False},
        "slo": {"service_model": "batching", "ttft_p99_ms": ttft, "tpot_p99_ms": tpot},
        "solve": {"method": "sweep"},
    }
    return prepare(load_instance(document))


def simulated(problem, plan: Plan, requests: int, reps: int) -> dict:
    metrics = simulate_plan(problem, plan, requests=requests, reps=reps, seed=0, mode="batching").metrics["fleet"]
    return {name: metrics[name][0] for name in ("ttft_p99_ms", "tpot_p99_ms", "slo_attainment", "tpot_attainment")}


def case_rows(case: tuple, requests: int, reps: int) -> dict:
    model, system, rate, isl, osl, ttft, tpot, moe = case
    peer = peer_plan(model, system, rate, isl, osl, ttft, tpot)
    row = {"model": model, "system": system, "rate_rps": rate, "isl": isl, "osl": osl, "ttft_ms": ttft, "tpot_ms": tpot, "moe": moe, "peer": peer}
    peer_problem = problem_of(model, system, rate, isl, osl, ttft, tpot, moe, peer["tp"], peer["ep"])
    window = peer_problem.long_window_tokens
    peer_eval = evaluate(peer_problem, Plan((PoolPlan("long", window, peer["replicas"]),)))
    peer.update(cost_per_hour=peer_eval.cost_per_hour, model_meets_slo=peer_eval.meets_slo, **simulated(peer_problem, peer_eval.plan, requests, reps))
    best = None
    for tp in sorted({1, 2, 4, 8} | {peer["tp"]}):
        try:
            problem = problem_of(model, system, rate, isl, osl, ttft, tpot, moe, tp, tp if moe else 1)
            plan = sweep(problem).plan
        except (InputError, InfeasibleError):
            continue
        evaluation = evaluate(problem, plan)
        if best is None or evaluation.cost_per_hour < best[1].cost_per_hour:
            best = (problem, evaluation, tp)
    if best is None:
        row["optfleet"] = {"note": "no TP meets the targets"}
        return row
    problem, evaluation, tp = best
    row["optfleet"] = {"tp": tp, "instances": evaluation.total_instances, "gpus": evaluation.total_instances * tp, "cost_per_hour": evaluation.cost_per_hour,
                       "pools": " + ".join(f"{p.window_tokens}:{p.instances}" for p in evaluation.plan.pools if p.instances > 0),
                       **simulated(problem, evaluation.plan, requests, reps)}
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=2)
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    rows = []
    for case in CASES:
        row = case_rows(case, args.requests, args.reps)
        rows.append(row)
        print(row, flush=True)

    def line(row: dict, who: str) -> list[str]:
        plan = row[who]
        if "gpus" not in plan:
            return [row["model"], who, plan.get("note", "-")] + ["-"] * 7
        ep = f" EP{plan['ep']}" if who == "peer" and plan["ep"] > 1 else ""
        shape = (f"{plan['replicas']} x TP{plan['tp']}{ep} (one pool)" if who == "peer"
                 else f"{plan['instances']} x TP{plan['tp']} (window:instances {plan['pools']})")
        return [f"{row['model']} ({'MoE' if row['moe'] else 'dense'}, {row['system']}, {row['rate_rps']:g} req/s, ISL {row['isl']} OSL {row['osl']}, "
                f"TTFT {row['ttft_ms']:g} TPOT {row['tpot_ms']:g} ms)", who, shape, str(plan["gpus"]), f"{plan['cost_per_hour']:.2f}",
                f"{plan['ttft_p99_ms']:.0f}", f"{plan['tpot_p99_ms']:.1f}", f"{100 * plan['slo_attainment']:.2f}", f"{100 * plan['tpot_attainment']:.2f}"]

    lines = [line(row, who) for row in rows for who in ("peer", "optfleet")]
    write_results(folder, "peer_recommend", {"aiconfigurator_core": aiconfigurator_version(), "requests": args.requests, "reps": args.reps,
                                             "cases": rows},
                  ["case", "plan by", "plan", "GPUs", "$/h", "P99 TTFT ms (simulated)", "P99 TPOT ms (simulated)", "TTFT met %", "TPOT met %"], lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
