"""Benchmark: the engine model's continuous-batching service model against the batching simulator.

For every shipped fleet instance that uses it (preset engine, slo.service_model batching), the sweep's plan is
scored by the model (optfleet/queueing/batching_engine.py) and simulated in batching mode (--requests x --reps
replications, Poisson arrivals, lengths drawn from the instance's mix, the simulator's own dispatcher); per pool:
utilisation (slot occupancy), P99 TTFT and P99 TPOT, model against the simulated mean, with the targets of issue 33
(utilisation within 5 %, P99 TTFT and P99 TPOT within 10 %; a pool too lightly loaded for the run to pin its value
down counts as within when the model lies inside the simulation's 95 % confidence interval, and the table shows the
interval and the requests measured), and the SLO attainment the simulator measures.

Writes benchmarks/out/ (benchmarks/results/ with --publish): batching_engine.json/.md.
Run: python benchmarks/bench_batching_engine.py [--requests 400000] [--reps 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.simulate import simulate_plan

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"utilisation": 0.05, "ttft_p99_ms": 0.10, "tpot_p99_ms": 0.10}


def engine_batching_instances() -> list[Path]:
    """The shipped fleet instances that use the engine's batching model."""
    found = []
    for path in sorted((ROOT / "instances" / "fleet").glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if document.get("slo", {}).get("service_model") == "batching" and document.get("preset", "engine") == "engine":
            found.append(path)
    return found


def rows_of(path: Path, requests: int, reps: int) -> list[dict]:
    problem = optfleet.load(path).problem
    start = time.perf_counter()
    plan = sweep(problem).plan
    sweep_s = time.perf_counter() - start
    evaluation = evaluate(problem, plan)
    simulated = simulate_plan(problem, plan, requests=requests, reps=reps, seed=0, mode="batching").metrics
    rows = []
    for pool in evaluation.pools:
        sim = simulated.get(pool.name)
        if sim is None:
            continue
        model = {"utilisation": pool.utilisation, "ttft_p99_ms": pool.ttft_p99_ms, "tpot_p99_ms": pool.tpot_p99_ms}
        row = {"instance": path.stem, "pool": pool.name, "window": pool.window_tokens, "gpus": pool.gpus, "sweep_seconds": sweep_s,
               "requests": sim["requests"][0], "ttft_attainment": sim["slo_attainment"][0], "tpot_attainment": sim["tpot_attainment"][0]}
        for metric, value in model.items():
            mean, half = sim[metric]
            row[metric] = {"model": value, "simulated": mean, "ci95": half, "error": value / mean - 1.0,
                           "within": abs(value / mean - 1.0) <= TARGETS[metric] or abs(value - mean) <= half}
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400_000)
    parser.add_argument("--reps", type=int, default=3)
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    rows = [row for path in engine_batching_instances() for row in rows_of(path, args.requests, args.reps)]

    def cell(row: dict, metric: str, digits: int) -> list[str]:
        m = row[metric]
        return [f"{m['model']:.{digits}f}", f"{m['simulated']:.{digits}f} +- {m['ci95']:.{digits}f}",
                f"{100 * m['error']:+.1f} %" + ("" if m["within"] else " (out)")]

    lines = [[r["instance"], r["pool"], str(r["window"]), str(r["gpus"]), f"{r['requests']:,.0f}", *cell(r, "utilisation", 3),
              *cell(r, "ttft_p99_ms", 0), *cell(r, "tpot_p99_ms", 1), f"{100 * r['ttft_attainment']:.2f} / {100 * r['tpot_attainment']:.2f}"]
             for r in rows]
    within = sum(all(r[m]["within"] for m in TARGETS) for r in rows)
    for line in lines:
        print(" | ".join(line))
    print(f"{within} of {len(rows)} pools within every target")
    write_results(folder, "batching_engine", {"requests": args.requests, "reps": args.reps, "targets": TARGETS, "pools": rows,
                                              "within": within},
                  ["instance", "pool", "window", "GPUs", "requests measured", "utilisation model", "simulated", "error",
                   "P99 TTFT model ms", "simulated ms", "error", "P99 TPOT model ms", "simulated ms", "error",
                   "attainment TTFT / TPOT %"], lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
