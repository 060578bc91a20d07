"""Benchmark: fleets over models NVIDIA's measured database bundles (the ``measured`` extra).

For each model below (dense and mixture-of-experts, BF16 and FP8), the fleet kind is solved with iteration times from
aiconfigurator-core's per-operation database (``hardware.performance.source: measured``) and the model read from the
``config.json`` aiconfigurator ships for it (``hardware.config_json``): the LMSYS-Chat-1M multi-turn length CDF
(20 % output split), a 64K long pool, P99 TTFT 2 s and P99 TPOT 200 ms, the slot model, at the smallest tensor-parallel
degree (1, 2, 4, 8; for a mixture of experts the same expert-parallel degree) whose long window holds a sequence.
Reported per model: the configuration, the MILP's status, cost, bound and gap, GPUs, the plan and the seconds, with
the table building (cached after the first run under $OPTFLEET_CACHE_DIR or ~/.cache/optfleet/measured) timed apart.

Needs the extra (pip install 'optfleet[measured]'); reads aiconfigurator's bundled configs from its installed package.
Writes benchmarks/out/ (benchmarks/results/ with --publish): measured_models.json/.md.
Run: python benchmarks/bench_measured_models.py [--rate 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from optfleet.engine.measured import aiconfigurator_version
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.problem import prepare

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
# (Hugging Face id, GPU, mixture of experts)
MODELS = [
    ("Qwen/Qwen3-0.6B", "H100-SXM", False),
    ("Qwen/Qwen3-8B", "H100-SXM", False),
    ("Qwen/Qwen3-32B", "H100-SXM", False),
    ("Qwen/Qwen3-32B-FP8", "H100-SXM", False),
    ("meta-llama/Meta-Llama-3.1-8B", "H100-SXM", False),
    ("meta-llama/Meta-Llama-3.1-70B", "H100-SXM", False),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "H100-SXM", False),
    ("meta-llama/Meta-Llama-3.1-405B", "H200", False),
    ("Qwen/Qwen3-30B-A3B", "H100-SXM", True),
    ("Qwen/Qwen3-235B-A22B", "H200", True),
    ("openai/gpt-oss-20b", "H100-SXM", True),
    ("openai/gpt-oss-120b", "H100-SXM", True),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "H200", True),
    ("MiniMaxAI/MiniMax-M2.5", "H200", True),
    ("deepseek-ai/DeepSeek-V3", "H200", True),
]


def bundled_config(model_id: str) -> Path:
    """The config.json aiconfigurator-core ships for ``model_id`` (its package data)."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or spec.origin is None:
        raise SystemExit("this benchmark needs the measured extra: pip install 'optfleet[measured]'")
    return Path(spec.origin).parent / "model_configs" / f"{model_id.replace('/', '--')}_config.json"


def instance(model_id: str, gpu: str, moe: bool, tp: int, rate_rps: float) -> dict:
    performance = {"source": "measured", "model": model_id, **({"ep": tp} if moe else {})}
    return {
        "kind": "fleet", "name": f"measured-{model_id.split('/')[-1]}",
        "workload": {"rate_rps": rate_rps, "lengths": {"cdf_file": str(ROOT / "instances/fleet/data/lmsys_multiturn_cdf.json")},
                     "split": {"rule": "fixed_output_fraction", "output_fraction": 0.2}},
        "hardware": {"gpu": gpu, "config_json": str(bundled_config(model_id)), "model": model_id.split("/")[-1], "tp": tp,
                     "engine": {"max_num_batched_tokens": 2048}, "performance": performance},
        "pools": {"long_window_tokens": 65536},
        "compression": {"enabled": False},
        "slo": {"ttft_p99_ms": 2000, "tpot_p99_ms": 200},
        "solve": {"method": "milp"},
    }


def solved(model_id: str, gpu: str, moe: bool, rate_rps: float) -> dict:
    row = {"model": model_id, "gpu": gpu, "moe": moe}
    for tp in (1, 2, 4, 8):
        try:
            start = time.perf_counter()
            problem = prepare(load_instance(instance(model_id, gpu, moe, tp, rate_rps)))
            row["build_seconds"] = time.perf_counter() - start
        except InputError as error:
            row["refused"] = f"tp {tp}: {error}"
            continue
        start = time.perf_counter()
        try:
            result = solve_milp(problem)
        except InfeasibleError as error:  # e.g. its longest iteration above the TPOT target at this TP: try the next
            row["refused"] = f"tp {tp}: {error}"
            continue
        report, evaluation = result.report, result.evaluation
        row.update(tp=tp, status=report.status, cost_per_hour=evaluation.cost_per_hour, bound=report.bound, gap=report.gap,
                   gpus=sum(p.instances * problem.configuration(p.gpu).tp for p in evaluation.pools), meets_slo=evaluation.meets_slo,
                   plan=" + ".join(f"{p.window_tokens}:{p.instances}" for p in evaluation.pools), seconds=time.perf_counter() - start,
                   engine=problem.pool(problem.long_window_tokens).step.label)
        row.pop("refused", None)
        return row
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    rows = []
    for model_id, gpu, moe in MODELS:
        row = solved(model_id, gpu, moe, args.rate)
        rows.append(row)
        print({k: v for k, v in row.items() if k != "engine"}, flush=True)
    lines = [[r["model"], ("MoE " if r["moe"] else "dense ") + r["gpu"] + (f" TP{r['tp']}" + (f" EP{r['tp']}" if r["moe"] else "") if "tp" in r else ""),
              r.get("status", "refused: " + r.get("refused", "")[:80]), f"{r['cost_per_hour']:.2f}" if "tp" in r else "-",
              f"{r['bound']:.2f}" if "tp" in r and r["bound"] is not None else "-", f"{100 * r['gap']:.1f}" if "tp" in r and r["gap"] is not None else "-",
              str(r.get("gpus", "-")), r.get("plan", "-"), "yes" if r.get("meets_slo") else "no", f"{r.get('build_seconds', 0):.1f}",
              f"{r['seconds']:.2f}" if "tp" in r else "-"] for r in rows]
    write_results(folder, "measured_models", {"rate_rps": args.rate, "aiconfigurator_core": aiconfigurator_version(), "models": rows},
                  ["model", "configuration", "status", "$/h", "bound", "gap %", "GPUs", "plan (window:instances)", "meets SLO",
                   "tables s", "MILP s"], lines)
    print(f"{sum('tp' in r for r in rows)} of {len(rows)} models solved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
