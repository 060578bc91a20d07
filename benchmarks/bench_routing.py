"""Benchmark: token-budget pool routing (kind ``routing``) in one run.

1. **Throughput** of the calibrator + dispatcher (Eq. 3-5, Algorithm 1 without spillover) on one million requests of
   the Azure 2023 routing instance: the vectorised code (optfleet/problems/routing/calibrator.py, dispatcher.py)
   against Algorithm 1 one request at a time in plain Python (sequential.py) on the same requests, for each
   calibrator variant; and the spillover pass (queue-depth rule, a heap per pool) on its own.
2. **Table 4** (calibration convergence): a Monte Carlo of the paper's calibrator (beta 0.95, gamma 1, cold start
   4.0) on each category's bytes per token with the instance's per-request spread: the mean estimate after 50
   observations and its relative error, beside the paper's; and the mis-route rates of the replayed instances
   (calibrators against the static 4.0 ratio).
3. **Tables 2-3 under Appendix A's timing model**: the analytical profiler's fleet sizes
   ``ceil(lambda / mu x beta)``, ``mu = n_slots / E[S]``, ``S = (ceil(L_in / 512) + L_out) (W + H n_slots)`` with the
   paper's headroom factors (1.08 homogeneous, 1.05 short, 1.02 long), on this repository's Azure and LMSYS length
   distributions (the fleet instances' CDFs, lengths uniform within buckets, 20 % output), beside the paper's; and
   the replayed latency (slot and batching modes) of the token-budget fleet so sized, beside Table 3.

Writes benchmarks/out/ (benchmarks/results/ with --publish): routing.json and routing.md.

Run: python benchmarks/bench_routing.py [--requests 1000000] [--baseline-requests 200000] [--publish]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from output import add_output_option, machine_speed, machine_speed_text, output_folder

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances" / "routing"
PAPER_TABLE_4 = {"prose": (4.48, 4.41, 1.6, 0.3), "code": (3.52, 3.47, 1.4, 0.2), "cjk": (2.01, 2.08, 3.5, 0.8), "mixed": (3.81, 3.74, 1.8, 0.4)}
PAPER_STATIC_MISROUTE_PCT = 4.1
PAPER_TABLE_2 = {"azure": (361, 72, 229), "lmsys": (265, 155, 8)}
PAPER_TABLE_3 = {"ttft_p50_s": 0.09, "ttft_p99_s": 1.60, "tpot_p50_ms": 25, "tpot_p99_ms": 29}
HEADROOM = {"homogeneous": 1.08, "short": 1.05, "long": 1.02}


def _best_of(count: int, run) -> float:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def throughput(requests: int, baseline_requests: int) -> list[dict]:
    """Section 1: requests/s of the vectorised calibrator + dispatcher vs the one-by-one loop."""
    import optfleet
    from optfleet.problems.routing.calibrator import calibrate, observed_ratios
    from optfleet.problems.routing.dispatcher import estimated_total, route
    from optfleet.problems.routing.replay import service_s
    from optfleet.problems.routing.sequential import route_one_by_one
    from optfleet.problems.routing.spill import SpillRule, spill

    problem = optfleet.load(INSTANCES / "azure_2023.yaml", stream__requests=requests).problem
    s, rule = problem.stream, problem.rule
    import scipy.signal  # noqa: F401  (imported once, outside the timings)

    def vectorised(calibrator):
        c = calibrate(calibrator, s.category, observed_ratios(s.bytes, s.input_tokens))
        return route(rule, estimated_total(s.bytes, c.route_ratio, s.output_tokens), s.output_tokens, s.category)

    rows = []
    n = baseline_requests
    lists = [a[:n].tolist() for a in (s.bytes, s.input_tokens, s.output_tokens, s.category)]
    for name, calibrator in problem.calibrators.items():
        fast = _best_of(3, lambda: vectorised(calibrator))
        slow = _best_of(1, lambda: route_one_by_one(calibrator, rule, *lists))
        rows.append({"what": f"calibrator {name} + dispatcher", "requests": requests, "vectorised_rps": requests / fast,
                     "loop_requests": n, "loop_rps": n / slow, "speedup": (requests / fast) / (n / slow)})
    d = vectorised(problem.calibrators["paper"])
    services = service_s(problem, np.where(d.compressed, d.compressed_input_tokens, s.input_tokens))
    fits = d.estimated_total_tokens <= rule.short_window_tokens
    seconds = _best_of(1, lambda: spill(SpillRule(queue_limit=16), s.arrival_s, d.pool, fits, services, problem.slots, problem.instances))
    rows.append({"what": "spillover pass (queue-depth rule, live slot state)", "requests": requests, "vectorised_rps": None,
                 "loop_requests": requests, "loop_rps": requests / seconds, "speedup": None})
    return rows


def table_4(spread: float, reps: int, seed: int) -> list[dict]:
    """Section 2a: the paper calibrator's estimate after 50 observations, Monte Carlo over ``reps`` streams."""
    from optfleet.problems.routing.calibrator import PaperCalibrator, calibrate

    calibrator = PaperCalibrator()
    rng = np.random.default_rng(seed)
    rows = []
    for name, (truth, paper_c, paper_err, paper_mis) in PAPER_TABLE_4.items():
        observed = truth * np.exp(spread * rng.standard_normal((reps, 51)) - 0.5 * spread**2)
        codes = np.repeat(np.arange(reps), 51)
        estimate = calibrate(calibrator, codes, observed.ravel()).mean_ratio.reshape(reps, 51)[:, 50]
        bias = (calibrator.cold_start - truth) * calibrator.beta**50
        rows.append({"category": name, "true_c": truth, "c_hat_50_mean": float(estimate.mean()),
                     "rel_error_of_mean_pct": 100 * abs(estimate.mean() - truth) / truth,
                     "mean_rel_error_pct": float(100 * np.mean(np.abs(estimate - truth)) / truth),
                     "cold_start_bias_pct": 100 * bias / truth, "paper_c_hat_50": paper_c, "paper_rel_error_pct": paper_err,
                     "paper_misroute_pct": paper_mis})
    return rows


def misroutes() -> list[dict]:
    """Section 2b: mis-route rates of each calibrator on the replayed instances, overall and per category."""
    import optfleet
    from optfleet.problems.routing.evaluator import evaluate
    from optfleet.problems.routing.replay import replay_router

    rows = []
    for instance in ("azure_2023", "azure_2023_4k", "lmsys_multiturn"):
        problem = optfleet.load(INSTANCES / f"{instance}.yaml").problem
        for name, calibrator in problem.calibrators.items():
            e = evaluate(problem, replay_router(problem, calibrator), needed=False)
            rows.append({"instance": instance, "calibrator": name, "misroute_pct": 100 * e.misroutes / e.requests,
                         **{f"{k}_pct": 100 * v for k, v in e.misroute_rate_by_category.items()}, "wasted_long": e.wasted_long})
    return rows


def appendix_a(trace: str, instance: str) -> tuple[dict, dict | None]:
    """Section 3: the analytical profiler's fleet sizes on this repository's lengths, and the replayed latency of the
    token-budget fleet so sized (Azure only: Table 3 is the Azure trace's)."""
    import optfleet
    from optfleet.problems.fleet.plan import Plan, PoolPlan
    from optfleet.problems.routing.evaluator import evaluate
    from optfleet.problems.routing.replay import replay_router

    problem = optfleet.load(INSTANCES / f"{instance}.yaml").problem
    s, fleet = problem.stream, problem.fleet
    rate = fleet.rate_rps
    homogeneous = fleet.pool(fleet.long_window_tokens)
    short, long = problem.pools
    is_short = s.total_tokens <= 8192
    alpha = float(is_short.mean())

    def size(pool, mine, headroom):
        if not mine.any():
            return 0, 0.0
        mean_service_s = float(pool.service_ms(s.input_tokens[mine], s.output_tokens[mine]).mean()) / 1000.0
        mu = pool.slots_per_instance / mean_service_s
        return math.ceil(rate * float(mine.mean()) / mu * headroom), mu

    g_homo, mu_homo = size(homogeneous, np.ones(len(s), dtype=bool), HEADROOM["homogeneous"])
    g_short, mu_short = size(short, is_short, HEADROOM["short"])
    g_long, mu_long = size(long, ~is_short, HEADROOM["long"])
    paper = PAPER_TABLE_2[trace]
    sizes = {"trace": trace, "alpha": alpha, "mu_homo": mu_homo, "mu_short": mu_short, "mu_long": mu_long, "homogeneous": g_homo,
             "short": g_short, "long": g_long, "total": g_short + g_long, "savings_pct": 100 * (1 - (g_short + g_long) / g_homo),
             "paper_homogeneous": paper[0], "paper_short": paper[1], "paper_long": paper[2],
             "paper_savings_pct": 100 * (1 - (paper[1] + paper[2]) / paper[0])}
    latency = None
    if trace == "azure":
        pools = (PoolPlan("short", 8192, max(g_short, 1)), PoolPlan("long", fleet.long_window_tokens, max(g_long, 1)))
        latency = {"pools": []}
        for mode in ("slots", "batching"):
            spec = problem.spec.model_copy(update={"replay": problem.spec.replay.model_copy(update={"mode": mode})})
            sized = dataclasses.replace(problem, spec=spec, plan=Plan(pools=pools, method="Appendix A sizing"))
            e = evaluate(sized, replay_router(sized, sized.calibrators["paper"]), needed=False)
            latency["pools"] += [{"mode": mode, "pool": p.name, "gpus": p.instances, "requests": p.requests, "ttft_p50_s": _s(p.ttft_p50_ms),
                                  "ttft_p99_s": _s(p.ttft_p99_ms), "tpot_p50_ms": p.tpot_p50_ms, "tpot_p99_ms": p.tpot_p99_ms} for p in e.pools]
    return sizes, latency


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _f(value, fmt: str = ",.4g") -> str:
    return "-" if value is None else format(value, fmt)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--baseline-requests", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=2000, help="Monte Carlo streams per category for Table 4")
    add_output_option(parser)
    args = parser.parse_args()
    speed = throughput(args.requests, args.baseline_requests)
    convergence = table_4(0.10, args.reps, seed=42)
    mis = misroutes()
    sizing = [appendix_a("azure", "azure_2023"), appendix_a("lmsys", "lmsys_multiturn")]
    machine = machine_speed()
    results = output_folder(args)
    (results / "routing.json").write_text(json.dumps({"machine_speed": machine, "throughput": speed, "table_4": convergence, "misroutes": mis,
                                                      "appendix_a": [{"sizes": a, "latency": b} for a, b in sizing]}, indent=2) + "\n")
    lines = ["Token-budget routing: calibrator + dispatcher throughput (one run; vectorised = best of 3, loop = Algorithm 1 one request "
             "at a time in Python, on the first requests of the same stream; speedup = vectorised / loop requests/s; machine speed in this run: "
             f"{machine_speed_text(machine)})", "",
             "| what | requests | vectorised req/s | loop requests | loop req/s | speedup |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['what']} | {r['requests']:,} | {_f(r['vectorised_rps'], ',.3g')} | {r['loop_requests']:,} | {_f(r['loop_rps'], ',.3g')} | "
              f"{_f(r['speedup'], '.3g')} |" for r in speed]
    lines += ["", f"Table 4 reproduction: the paper's calibrator (beta 0.95, gamma 1, cold start 4.0), estimate after 50 observations, "
              f"{args.reps:,} Monte Carlo streams per category, per-request log-spread 0.10; cold-start bias = (4.0 - c) 0.95^50 / c", "",
              "| category | true c | c_hat(50) mean | error of the mean % | mean error % | cold-start bias % | paper c_hat(50) | paper error % |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['category']} | {r['true_c']} | {r['c_hat_50_mean']:.3f} | {r['rel_error_of_mean_pct']:.2f} | {r['mean_rel_error_pct']:.2f} | "
              f"{r['cold_start_bias_pct']:.2f} | {r['paper_c_hat_50']} | {r['paper_rel_error_pct']} |" for r in convergence]
    names = [k for k in PAPER_TABLE_4]
    lines += ["", f"Mis-routes (short-pool requests whose true budget exceeds the window, % of all requests; per category % of its requests) "
              f"on the replayed instances; the paper reports under 1 % per category with the calibrator and {PAPER_STATIC_MISROUTE_PCT} % "
              "for the static ratio", "",
              "| instance | calibrator | mis-route % | " + " | ".join(f"{n} %" for n in names) + " | wasted long |",
              "|---|---|---|" + "---|" * len(names) + "---|"]
    lines += [f"| {r['instance']} | {r['calibrator']} | {r['misroute_pct']:.3f} | " + " | ".join(f"{r.get(n + '_pct', 0):.3f}" for n in names)
              + f" | {r['wasted_long']:,} |" for r in mis]
    lines += ["", "Tables 2-3 under Appendix A's timing model (t_iter = 8 + 0.65 n_slots ms, chunk 512; 16 slots at 64K, 128 at 8K; "
              "headroom 1.08 / 1.05 / 1.02; B_short = 8,192; this repository's length distributions)", "",
              "| trace | alpha | mu homo | mu short | mu long | homogeneous | short | long | total | savings % | paper homo | paper short | paper long | paper savings % |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {a['trace']} | {a['alpha']:.4f} | {a['mu_homo']:.3g} | {a['mu_short']:.3g} | {_f(a['mu_long'] or None, '.3g')} | {a['homogeneous']} | "
              f"{a['short']} | {a['long']} | {a['total']} | {a['savings_pct']:.1f} | {a['paper_homogeneous']} | {a['paper_short']} | "
              f"{a['paper_long']} | {a['paper_savings_pct']:.1f} |" for a, _ in sizing]
    latency = sizing[0][1]
    lines += ["", "Replayed latency of that Azure token-budget fleet (paper calibrator; slot mode: every iteration at full occupancy; "
              "batching mode: continuous batching at the actual occupancy; Table 3's token-budget row: "
              f"TTFT P50 {PAPER_TABLE_3['ttft_p50_s']} s, P99 {PAPER_TABLE_3['ttft_p99_s']} s; TPOT P50 {PAPER_TABLE_3['tpot_p50_ms']} ms, "
              f"P99 {PAPER_TABLE_3['tpot_p99_ms']} ms, over both pools)", "",
              "| mode | pool | GPUs | requests | TTFT P50 s | TTFT P99 s | TPOT P50 ms | TPOT P99 ms |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {p['mode']} | {p['pool']} | {p['gpus']} | {p['requests']:,} | {_f(p['ttft_p50_s'], '.3g')} | {_f(p['ttft_p99_s'], '.3g')} | "
              f"{_f(p['tpot_p50_ms'], '.3g')} | {_f(p['tpot_p99_ms'], '.3g')} |" for p in latency["pools"]]
    (results / "routing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
