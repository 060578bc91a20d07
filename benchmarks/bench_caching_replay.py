"""Benchmark: replay speed of every online caching policy on a million generated turns.

It generates a ShareGPT-like trace (optfleet.problems.caching.generate: conversations
at 1/s, 3.5 turns and a 1/3 s gap on average, lognormal prompts of mean 100
and answers of mean 250 tokens; instances/caching/sharegpt_like.yaml's model)
with about ``--turns`` turns, then, at each capacity, replays it through every
registered online policy (optional caching) and times the replay alone.
Every schedule is scored by ``evaluate_schedule``; Tail-Optimized Belady (the
hindsight greedy) is timed and scored beside them, and so is ET-LRU with a
64-step prompt survival (its default is 16 steps) to back that default.
The target is at least 1e6 turns per minute for every policy.

Writes benchmarks/out/ (benchmarks/results/ with --publish): caching_replay.json and caching_replay.md.

Run: python benchmarks/bench_caching_replay.py [--turns 1000000] [--capacities 2000,8000]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from optfleet.problems.caching.belady import tail_optimized_belady
from optfleet.problems.caching.evaluate import TtftModel, evaluate_schedule
from optfleet.problems.caching.generate import ConversationModel, LengthModel, generate_trace
from optfleet.problems.caching.policies import ETLRU, POLICIES, CachePolicy, make_policy
from optfleet.problems.caching.replay import replay

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
TARGET_TURNS_PER_MIN = 1_000_000
TTFT = TtftModel(0.25, 0.0)
XI_MS = 200.0
MODEL = ConversationModel.from_summary(1.0, 3.5, 1 / 3, LengthModel("lognormal", 100.0, 1.0), LengthModel("lognormal", 250.0, 0.8))


def row(label: str, trace, kept, seconds: float, capacity: int, kind: str) -> dict:
    e = evaluate_schedule(trace, kept, capacity, TTFT, XI_MS, policy=label)
    per_min = 60.0 * len(trace) / seconds
    return {"capacity_tokens": capacity, "policy": label, "kind": kind, "seconds": seconds, "turns_per_min": per_min,
            "meets_target": per_min >= TARGET_TURNS_PER_MIN, "tel_ms": e.tel_ms,
            "p90_ttft_ms": e.percentile_ttft_ms[90], "p95_ttft_ms": e.percentile_ttft_ms[95], "hit_rate": e.hit_rate}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--capacities", default="2000,8000", help="comma-separated capacities in tokens")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    capacities = [int(c) for c in args.capacities.split(",")]

    start = time.perf_counter()
    trace = generate_trace(MODEL, round(args.turns / MODEL.mean_turns), args.seed)
    generate_s = time.perf_counter() - start
    print(f"generated {len(trace):,} turns in {trace.n_conversations:,} conversations in {generate_s:.2f} s", flush=True)

    rows = []
    for capacity in capacities:
        runs: list[tuple[str, CachePolicy]] = [(name, make_policy(name)) for name in POLICIES]
        runs.append(("et-lru (64 steps)", ETLRU(prompt_levels=64)))
        for label, policy in runs:
            result = replay(trace, policy, capacity, TTFT, XI_MS)
            rows.append(row(label, trace, result.kept_tokens, result.seconds, capacity, "online replay"))
            r = rows[-1]
            print(f"C {capacity:6d}  {label:20s} {r['turns_per_min']:14,.0f} turns/min  ({r['seconds']:6.2f} s)  TEL {r['tel_ms']:14,.0f} ms  "
                  f"P90 {r['p90_ttft_ms']:7.1f}  P95 {r['p95_ttft_ms']:7.1f}", flush=True)
        start = time.perf_counter()
        kept = tail_optimized_belady(trace, capacity, TTFT, XI_MS)
        rows.append(row("belady", trace, kept, time.perf_counter() - start, capacity, "hindsight greedy"))
        r = rows[-1]
        print(f"C {capacity:6d}  {'belady':20s} {r['turns_per_min']:14,.0f} turns/min  ({r['seconds']:6.2f} s)  TEL {r['tel_ms']:14,.0f} ms", flush=True)

    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "processor": platform.processor() or "unknown",
            "turns": len(trace), "conversations": trace.n_conversations, "seed": args.seed, "generate_seconds": generate_s,
            "ttft": {"alpha_ms_per_token": TTFT.alpha_ms_per_token, "beta_ms": TTFT.beta_ms}, "xi_ms": XI_MS,
            "target_turns_per_min": TARGET_TURNS_PER_MIN}
    results = output_folder(args)
    (results / "caching_replay.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [f"Replay of {len(trace):,} generated ShareGPT-like turns ({trace.n_conversations:,} conversations, generated in "
             f"{generate_s:.1f} s), TTFT 0.25 ms/token, xi 200 ms, optional caching; one run each, wall time of the replay alone.",
             "",
             "| capacity (tokens) | policy | kind | turns/min | >= 1e6/min | seconds | TEL (ms) | P90 TTFT (ms) | P95 TTFT (ms) | hit rate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['capacity_tokens']:,} | {r['policy']} | {r['kind']} | {r['turns_per_min']:,.0f} | {'yes' if r['meets_target'] else 'NO'} | "
              f"{r['seconds']:.2f} | {r['tel_ms']:,.0f} | {r['p90_ttft_ms']:.1f} | {r['p95_ttft_ms']:.1f} | {r['hit_rate']:.3f} |" for r in rows]
    (results / "caching_replay.md").write_text("\n".join(lines) + "\n")
    default_policies = [r for r in rows if r["kind"] == "online replay" and r["policy"] in POLICIES]
    return 0 if all(r["meets_target"] for r in default_policies) else 1


if __name__ == "__main__":
    sys.exit(main())
