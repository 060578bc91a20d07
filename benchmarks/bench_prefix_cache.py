"""Benchmark: prefix-cache policies against the hindsight LP bound on full Mooncake traces, at five capacities.

For each trace and capacity (in 512-token blocks) it scores, with the one
evaluator, vLLM's LRU (all capacities from one stack-distance pass),
SGLang's leaf LRU, LFU, T-LRU and its end-aware and length-aware oracle
variants (one replay per capacity), and solves the LP relaxation of the
hindsight MILP (models/prefix_cache.py, array path, ``leaves`` closure
relaxed to the parent's gap in the same request: a valid bound,
optfleet/problems/prefix_cache/hindsight.py) for two objectives: total hit
tokens (an upper bound) and TEL (a lower bound).  Each policy's gap to the
bound is an upper bound on its gap to the optimum.  Each LP's point, rounded
(``y > 1/2``) and repaired to a feasible schedule, is scored too (rows
``lp-rounded (hit)`` and ``lp-rounded (TEL)``): the optimum lies between the
bound and the best of them.

Two service models (``SERVICES``): ``instant`` (TTFT = prefill, 0.1 ms a
missed token + 20 ms, xi 1,500 ms) and ``fcfs`` (one FCFS prefill server for
the whole trace, TTFT = wait + prefill; 0.012 ms a missed token + 20 ms, so
that the server's load with nothing cached is 0.56 on the conversation trace
and 0.80 on the synthetic one; xi 300 ms).  The TEL bound of ``fcfs`` has the
server's wait rows, (9) of models/prefix_cache.py; the hit-token bound does
not depend on the service model and is solved once per capacity.

The target is each bound at each capacity within 120 s on one core (run it
under ``taskset -c 0``).  It also times the one-pass LRU curve against
separate LRU replays at the same capacities, in the same process (the ratio).

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
from optfleet.problems.prefix_cache.hindsight import LpBound, lp_bound
from optfleet.problems.prefix_cache.plot import Curve, draw_capacity_curves
from optfleet.problems.prefix_cache.policies import POLICIES
from optfleet.problems.prefix_cache.readers import read_block_trace
from optfleet.problems.prefix_cache.replay import replay

from output import add_output_option, output_folder, write_results

SERVICES = {  # name: (prefill model, xi in ms, one FCFS prefill server)
    "instant": (TtftModel(0.1, 20.0), 1500.0, False),
    "fcfs": (TtftModel(0.012, 20.0), 300.0, True),
}
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
        ttft, xi_ms, _ = SERVICES["instant"]
        hit = lp_bound(trace, c, "leaves", "hit_tokens", ttft, xi_ms)
        _say(c, "hit_tokens", "any", hit)
        for service, (ttft, xi_ms, fcfs) in SERVICES.items():
            tel = lp_bound(trace, c, "leaves", "tel", ttft, xi_ms, fcfs_server=fcfs)
            _say(c, "tel", service, tel)
            schedules = {"lru": distances.kept(c)}
            schedules.update({p: replay(trace, make(), c, "leaves", ttft, xi_ms).kept for p, make in POLICIES.items() if p != "lru"})
            # hindsight schedules: each LP's point rounded and repaired (feasible, so the optimum is at least as good)
            schedules.update({f"lp-rounded ({label})": b.kept for label, b in (("hit", hit), ("TEL", tel)) if b.kept is not None})
            for policy, kept in schedules.items():
                e = evaluate_schedule(trace, kept, c, "leaves", ttft, xi_ms, policy=policy, fcfs_server=fcfs)
                rows.append({"trace": path.name, "service": service, "capacity_blocks": c, "policy": policy, "hit_rate": e.hit_rate,
                             "p99_ttft_ms": e.percentile_ttft_ms[99], "mean_wait_ms": float(e.wait_ms.mean()), "tel_ms": e.tel_ms,
                             "hit_bound_rate": hit.bound / info["input_tokens"] if hit.bound is not None else None,
                             "hit_gap_pct": 100 * (hit.bound - e.hit_tokens_total) / hit.bound if hit.bound else None,
                             "tel_bound_ms": tel.bound, "tel_gap_pct": 100 * (e.tel_ms - tel.bound) / tel.bound if tel.bound else None,
                             "hit_bound_s": hit.build_seconds + hit.solve_seconds, "tel_bound_s": tel.build_seconds + tel.solve_seconds})
    return info, rows


def _say(capacity: int, objective: str, service: str, bound: LpBound) -> None:
    total = bound.build_seconds + bound.solve_seconds
    value = "-" if bound.bound is None else f"{bound.bound:,.1f}"
    print(f"  C {capacity:6,d}  LP bound {objective:10s} {service:7s} {bound.status:8s} {value:>16s}  {total:6.1f} s  "
          f"({bound.n_columns:,} cols, {bound.n_rows:,} rows)", flush=True)


def plot(rows: list[dict], path: Path) -> None:
    """Hit rate and P99 TTFT against capacity per policy, the LP bound on the hit rate dashed, one pair of panels per
    trace and service model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((r["trace"], r["service"]) for r in rows))
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 3.6 * len(panels)), squeeze=False)
    for (hit_ax, p99_ax), (name, service) in zip(axes, panels, strict=True):
        mine = [r for r in rows if (r["trace"], r["service"]) == (name, service)]
        curves = []
        for policy in dict.fromkeys(r["policy"] for r in mine):
            pr = [r for r in mine if r["policy"] == policy]
            curves.append(Curve(policy, [r["capacity_blocks"] for r in pr], [r["hit_rate"] for r in pr], [r["p99_ttft_ms"] for r in pr]))
        lru = [r for r in mine if r["policy"] == "lru"]
        bound = Curve("LP bound (hindsight)", [r["capacity_blocks"] for r in lru], [r["hit_bound_rate"] for r in lru], None)
        draw_capacity_curves(hit_ax, p99_ax, curves, bound, f"{name}, {service} service", 512)
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
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "eviction": "leaves", "target_s": TARGET_S, "traces": infos,
            "services": {name: {"alpha_ms_per_token": t.alpha_ms_per_token, "beta_ms": t.beta_ms, "xi_ms": xi, "fcfs_server": fcfs}
                         for name, (t, xi, fcfs) in SERVICES.items()}}
    folder = output_folder(args)

    def pct(v):
        return "-" if v is None else f"{v:.1f}"

    write_results(folder, "prefix_cache", {"meta": meta, "rows": rows},
                  ["trace", "service", "capacity (blocks)", "policy", "hit %", "hit bound %", "hit gap %", "mean wait ms", "P99 TTFT ms",
                   "TEL ms", "TEL bound ms", "TEL gap %", "bound s (hit / TEL)"],
                  [[r["trace"], r["service"], f"{r['capacity_blocks']:,}", r["policy"], f"{100 * r['hit_rate']:.1f}",
                    pct(None if r["hit_bound_rate"] is None else 100 * r["hit_bound_rate"]), pct(r["hit_gap_pct"]), f"{r['mean_wait_ms']:,.0f}",
                    f"{r['p99_ttft_ms']:,.0f}", f"{r['tel_ms']:,.0f}", "-" if r["tel_bound_ms"] is None else f"{r['tel_bound_ms']:,.0f}",
                    pct(r["tel_gap_pct"]), f"{r['hit_bound_s']:.1f} / {r['tel_bound_s']:.1f}"] for r in rows])
    plot(rows, folder / "prefix_cache.png")
    slowest = max(max(r["hit_bound_s"], r["tel_bound_s"]) for r in rows)
    print(f"slowest bound {slowest:.1f} s (target {TARGET_S:.0f} s)")
    return 0 if slowest <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
