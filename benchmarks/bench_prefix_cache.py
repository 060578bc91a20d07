"""Benchmark: prefix-cache policies against the hindsight LP bound on full Mooncake traces, at five capacities.

For each trace and capacity (in 512-token blocks) it scores, with the one
evaluator, vLLM's LRU (all capacities from one stack-distance pass),
SGLang's leaf LRU, LFU and T-LRU (one replay per capacity), and solves the
LP relaxation of the hindsight MILP (models/prefix_cache.py, array path,
``leaves`` closure relaxed to the parent's gap in the same request: a valid
bound, optfleet/problems/prefix_cache/hindsight.py) for two objectives: total
hit tokens (an upper bound) and TEL (a lower bound).  Each policy's gap to the
bound is an upper bound on its gap to the optimum.  Each LP's point, rounded
(``y > 1/2``) and repaired to a feasible schedule, is scored too (rows
``lp-rounded (hit)`` and ``lp-rounded (TEL)``): the optimum lies between the
bound and the best of them.  The target is the bound
of each objective at each capacity within 120 s on one core (run it under
``taskset -c 0``).  It also times the one-pass LRU curve against separate
LRU replays at the same capacities, in the same process (the ratio).

Traces: ``--traces`` takes files or datasets (``dataset:mooncake-fast25/conversation``
after ``optfleet data fetch mooncake-fast25``); the sha256 of each file read
is printed and written.

Writes benchmarks/out/ (benchmarks/results/ with --publish): prefix_cache.json, prefix_cache.md and prefix_cache.png.

Run: taskset -c 0 python benchmarks/bench_prefix_cache.py [--traces dataset:mooncake-fast25/conversation,dataset:mooncake-fast25/synthetic]
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import time
from pathlib import Path

from optfleet.datasets.store import DATASET_PREFIX, reference_files
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.prefix_cache.curve import stack_distances
from optfleet.problems.prefix_cache.evaluate import evaluate_schedule
from optfleet.problems.prefix_cache.hindsight import lp_bound
from optfleet.problems.prefix_cache.plot import Curve, draw_capacity_curves
from optfleet.problems.prefix_cache.policies import POLICIES
from optfleet.problems.prefix_cache.readers import read_block_trace
from optfleet.problems.prefix_cache.replay import replay

from output import add_output_option, output_folder, write_results

TTFT = TtftModel(0.1, 20.0)     # ms per missed prompt token, ms
XI_MS = 1500.0
TARGET_S = 120.0
DEFAULT_TRACES = "dataset:mooncake-fast25/conversation,dataset:mooncake-fast25/synthetic"


def trace_path(name: str) -> Path:
    return reference_files(name, "--traces", one=True)[0][1] if name.startswith(DATASET_PREFIX) else Path(name)


def bench_trace(name: str, capacities: list[int]) -> tuple[dict, list[dict]]:
    path = trace_path(name)
    trace = read_block_trace(path, "mooncake")
    info = {"trace": name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "requests": len(trace), "blocks": trace.n_blocks,
            "reuses": trace.reuse_occurrences, "input_tokens": int(trace.input_tokens.sum())}
    print(f"{name}: {len(trace):,} requests, {trace.n_blocks:,} blocks, sha256 {info['sha256']}", flush=True)
    start = time.perf_counter()
    distances = stack_distances(trace)
    info["one_pass_s"] = time.perf_counter() - start
    info["separate_lru_replays_s"] = sum(replay(trace, POLICIES["lru"](), c).seconds for c in capacities)
    info["one_pass_speedup"] = info["separate_lru_replays_s"] / info["one_pass_s"]
    print(f"  LRU curve: one pass {info['one_pass_s']:.2f} s, {len(capacities)} replays {info['separate_lru_replays_s']:.2f} s "
          f"({info['one_pass_speedup']:.1f}x)", flush=True)
    rows = []
    for c in capacities:
        bounds = {obj: lp_bound(trace, c, "leaves", obj, TTFT, XI_MS) for obj in ("hit_tokens", "tel")}
        for obj, b in bounds.items():
            total = b.build_seconds + b.solve_seconds
            print(f"  C {c:6,d}  LP bound {obj:10s} {b.status:8s} {b.bound:16,.1f}  {total:6.1f} s  ({b.n_columns:,} cols, {b.n_rows:,} rows)",
                  flush=True)
        schedules = {"lru": distances.kept(c)}
        schedules.update({name: replay(trace, make(), c, "leaves", TTFT, XI_MS).kept for name, make in POLICIES.items() if name != "lru"})
        # hindsight schedules: each LP's point rounded and repaired (feasible, so the optimum is at least as good)
        schedules.update({f"lp-rounded ({'hit' if obj == 'hit_tokens' else 'TEL'})": b.kept for obj, b in bounds.items() if b.kept is not None})
        for policy, kept in schedules.items():
            e = evaluate_schedule(trace, kept, c, "leaves", TTFT, XI_MS, policy=policy)
            hit_bound, tel_bound = bounds["hit_tokens"].bound, bounds["tel"].bound
            rows.append({"trace": path.name, "capacity_blocks": c,
                         "policy": policy, "hit_rate": e.hit_rate, "p99_ttft_ms": e.percentile_ttft_ms[99], "tel_ms": e.tel_ms,
                         "hit_bound_rate": hit_bound / info["input_tokens"] if hit_bound is not None else None,
                         "hit_gap_pct": 100 * (hit_bound - e.hit_tokens_total) / hit_bound if hit_bound else None,
                         "tel_bound_ms": tel_bound, "tel_gap_pct": 100 * (e.tel_ms - tel_bound) / tel_bound if tel_bound else None,
                         "hit_bound_s": bounds["hit_tokens"].build_seconds + bounds["hit_tokens"].solve_seconds,
                         "tel_bound_s": bounds["tel"].build_seconds + bounds["tel"].solve_seconds})
    return info, rows


def plot(rows: list[dict], path: Path) -> None:
    """Hit rate and P99 TTFT against capacity per policy, the LP bound on the hit rate dashed, one pair of panels per trace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(r["trace"] for r in rows))
    fig, axes = plt.subplots(len(traces), 2, figsize=(10, 3.6 * len(traces)), squeeze=False)
    for (hit_ax, p99_ax), name in zip(axes, traces, strict=True):
        mine = [r for r in rows if r["trace"] == name]
        curves = []
        for policy in dict.fromkeys(r["policy"] for r in mine):
            pr = [r for r in mine if r["policy"] == policy]
            curves.append(Curve(policy, [r["capacity_blocks"] for r in pr], [r["hit_rate"] for r in pr], [r["p99_ttft_ms"] for r in pr]))
        lru = [r for r in mine if r["policy"] == "lru"]
        bound = Curve("LP bound (hindsight)", [r["capacity_blocks"] for r in lru], [r["hit_bound_rate"] for r in lru], None)
        draw_capacity_curves(hit_ax, p99_ax, curves, bound, name, 512)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--traces", default=DEFAULT_TRACES, help="comma-separated Mooncake-format files or dataset:NAME/PART")
    parser.add_argument("--capacities", default="500,1000,2000,4000,8000", help="comma-separated capacities in blocks")
    args = parser.parse_args()
    capacities = [int(c) for c in args.capacities.split(",")]
    infos, rows = [], []
    for name in args.traces.split(","):
        info, trace_rows = bench_trace(name, capacities)
        infos.append(info)
        rows += trace_rows
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "ttft": {"alpha_ms_per_token": TTFT.alpha_ms_per_token,
            "beta_ms": TTFT.beta_ms}, "xi_ms": XI_MS, "eviction": "leaves", "target_s": TARGET_S, "traces": infos}
    folder = output_folder(args)

    def pct(v):
        return "-" if v is None else f"{v:.1f}"

    write_results(folder, "prefix_cache", {"meta": meta, "rows": rows},
                  ["trace", "capacity (blocks)", "policy", "hit %", "hit bound %", "hit gap %", "P99 TTFT ms", "TEL ms", "TEL bound ms",
                   "TEL gap %", "bound s (hit / TEL)"],
                  [[r["trace"], f"{r['capacity_blocks']:,}", r["policy"], f"{100 * r['hit_rate']:.1f}", pct(100 * r["hit_bound_rate"]),
                    pct(r["hit_gap_pct"]), f"{r['p99_ttft_ms']:,.0f}", f"{r['tel_ms']:,.0f}", f"{r['tel_bound_ms']:,.0f}", pct(r["tel_gap_pct"]),
                    f"{r['hit_bound_s']:.1f} / {r['tel_bound_s']:.1f}"] for r in rows])
    plot(rows, folder / "prefix_cache.png")
    slowest = max(max(r["hit_bound_s"], r["tel_bound_s"]) for r in rows)
    print(f"slowest bound {slowest:.1f} s (target {TARGET_S:.0f} s)")
    return 0 if slowest <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
