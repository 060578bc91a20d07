"""Benchmark: the hindsight caching LP (highspy path) against Tail-Optimized Belady, in one run.

Traces come from optfleet.problems.caching.generate with ShareGPT-like settings:
conversations born at 1/s, 3.5 turns and 3 s between turns on average,
lognormal prompts (mean 100 tokens) and answers (mean 300 tokens), sigma 1;
TTFT = 0.5 ms/token x uncached tokens, xi = 100 ms (200 tokens).

Each (size, capacity, method) runs in its own subprocess so that its peak
resident memory (``ru_maxrss``) is its own: trace generation + the method.
Methods: ``greedy`` (tail_optimized_belady), ``lp`` (solve_hindsight, highspy
path, block by block) and ``lp-whole`` (the same LP passed to HiGHS in one
piece, ``decompose=False``).  The LP's phases are timed separately (prepare +
arrays, HiGHS, total including the evaluator's re-scoring).  The run prints
LP time / greedy time and checks that the LP's TEL equals the greedy's
(Theorem 1: xi_tokens here is a whole number).  Writes
benchmarks/out/ (benchmarks/results/ with --publish): caching_lp.json and caching_lp.md.

Run: python benchmarks/bench_caching_lp.py [--whole-at-largest]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
ALPHA_MS_PER_TOKEN, XI_MS, SEED = 0.5, 100.0, 7
# (turns, capacity tokens, methods)
PLAN_DEFAULT = [
    (100_000, 1_000, ("greedy", "lp", "lp-whole")),
    (100_000, 3_000, ("greedy", "lp", "lp-whole")),
    (100_000, 10_000, ("greedy", "lp", "lp-whole")),
    (1_000_000, 3_000, ("greedy", "lp")),
]


def run_one(turns: int, capacity: int, method: str) -> dict:
    """One measurement, in this (child) process; returns a JSON-able row."""
    import numpy as np

    from optfleet.problems.caching.belady import tail_optimized_belady
    from optfleet.problems.caching.evaluate import TtftModel, evaluate_schedule
    from optfleet.problems.caching.generate import ConversationModel, LengthModel, generate_trace
    from optfleet.problems.caching.hindsight import solve_hindsight

    model = ConversationModel.from_summary(1.0, 3.5, 3.0, LengthModel("lognormal", 100, 1.0), LengthModel("lognormal", 300, 1.0))
    trace = generate_trace(model, round(turns / model.mean_turns), seed=SEED)
    ttft = TtftModel(ALPHA_MS_PER_TOKEN)
    row = {"turns": len(trace), "capacity_tokens": capacity, "method": method}
    start = time.perf_counter()
    if method == "greedy":
        kept = tail_optimized_belady(trace, capacity, ttft, XI_MS)
        row["seconds"] = time.perf_counter() - start
        row["tel_ms"] = evaluate_schedule(trace, kept, capacity, ttft, XI_MS).tel_ms
        row["status"] = "heuristic"
    else:
        result = solve_hindsight(trace, capacity, ttft, XI_MS, path="highspy", decompose=(method == "lp"))
        row.update(seconds=result.seconds, build_seconds=result.build_seconds, solve_seconds=result.solve_seconds,
                   tel_ms=result.objective, bound_ms=result.bound, gap=result.gap, status=result.status,
                   integral=result.integral, columns=result.n_columns, rows=result.n_rows, nonzeros=result.n_nonzeros)
    row["kept_tokens_sum"] = int(np.sum(kept)) if method == "greedy" else int(result.kept_tokens.sum())
    row["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: kilobytes
    return row


def measure(turns: int, capacity: int, method: str) -> dict:
    """Run :func:`run_one` in a fresh interpreter and read its JSON line."""
    out = subprocess.run([sys.executable, __file__, "--child", str(turns), str(capacity), method],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--whole-at-largest", action="store_true", help="also pass the 1e6-turn LP to HiGHS in one piece (slow)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(int(args.child[0]), int(args.child[1]), args.child[2])))
        return 0
    plan = [(n, c, m + ("lp-whole",) if args.whole_at_largest and n == 1_000_000 else m) for n, c, m in PLAN_DEFAULT]
    rows, summary = [], []
    for turns, capacity, methods in plan:
        by_method = {}
        for method in methods:
            row = measure(turns, capacity, method)
            by_method[method] = row
            rows.append(row)
            print(f"{row['turns']:>9,} turns  C={capacity:>6,}  {method:9s} {row['seconds']:7.2f} s  TEL {row['tel_ms']:,.1f} ms  "
                  f"peak {row['peak_rss_gb']:.2f} GB  {row['status']}", flush=True)
        greedy = by_method["greedy"]
        for method in ("lp", "lp-whole"):
            if method in by_method:
                lp_row = by_method[method]
                equal = abs(lp_row["tel_ms"] - greedy["tel_ms"]) <= 1e-9 * max(1.0, abs(greedy["tel_ms"]))
                summary.append({"turns": greedy["turns"], "capacity_tokens": capacity, "method": method,
                                "lp_over_greedy_time": lp_row["seconds"] / greedy["seconds"], "tel_equal": equal})
                print(f"    {method}: time / greedy time = {lp_row['seconds'] / greedy['seconds']:.1f}; TEL equal to greedy's: {equal}")
    results = output_folder(args)
    (results / "caching_lp.json").write_text(json.dumps({"runs": rows, "comparison": summary}, indent=2) + "\n")
    lines = [
        f"Hindsight caching LP vs Tail-Optimized Belady (alpha {ALPHA_MS_PER_TOKEN} ms/token, xi {XI_MS:g} ms, seed {SEED}; "
        "peak RSS per subprocess includes trace generation).", "",
        "| turns | capacity (tokens) | method | status | total s | build s | HiGHS s | TEL (ms) | TEL = greedy | LP / greedy time | columns | rows | nonzeros | peak RSS GB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    compare = {(s["turns"], s["capacity_tokens"], s["method"]): s for s in summary}
    for r in rows:
        s = compare.get((r["turns"], r["capacity_tokens"], r["method"]))
        equal = "-" if s is None else ("yes" if s["tel_equal"] else "NO")
        ratio = "-" if s is None else f"{s['lp_over_greedy_time']:.1f}"
        phases = [f"{r[k]:.2f}" if k in r else "-" for k in ("build_seconds", "solve_seconds")]
        sizes = [f"{r[k]:,}" if k in r else "-" for k in ("columns", "rows", "nonzeros")]
        lines.append(
            f"| {r['turns']:,} | {r['capacity_tokens']:,} | {r['method']} | {r['status']} | {r['seconds']:.2f} | {phases[0]} | {phases[1]} | "
            f"{r['tel_ms']:,.1f} | {equal} | {ratio} | {sizes[0]} | {sizes[1]} | {sizes[2]} | {r['peak_rss_gb']:.2f} |"
        )
    (results / "caching_lp.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
