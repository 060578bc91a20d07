"""Benchmark: the placement kind's simulator, scorers and MILP, and the shipped scenarios' tables, in one run.

* Simulator: requests per second of the evaluator (a fixed round-robin placement replayed, servers independent)
  on both engines (engines.py: the Python reference and the compiled one, numba) and of online routing with the
  predicted-latency scorer and the oracle predictor, three ways: the reference forward run (a copy of every server
  stepped by the simulator, per request), the fast one in Python (forecast.OracleBoard) and the compiled engine,
  on the ShareGPT-like workload over ``--servers`` servers, then the compiled one at ``--large`` requests; ratios
  are against online round-robin routing (Python) at the same size in the same run, and the run checks that the
  three oracles place every request alike.  The time for 1e6 requests is extrapolated linearly from the rate
  measured (the issue's target: 1e6 requests over 100 servers with the oracle in <= 60 s); with ``--large
  1000000`` the larger run is that size itself.  "µs per decision" for the oracle rows is (its time - the same
  engine's evaluator's) / requests: the signals, the forecast on every server and the choice, per request.  The
  compiled engine's first call (numba compiles, or loads its on-disk cache) is timed in its own row.
* Scorer decision: microseconds per request of the predicted-latency choice (affinity gate + headroom scoring)
  and of the load+prefix scores over 100 candidates, against ``np.argmin`` over 100 values in the same run.
* MILP: the largest hindsight MILP (requests x 4 servers, tiny.yaml's workload at 4 servers) proven optimal
  within 60 s, trying 25, 50, 100, 150, 200 requests and stopping at the first not proven.
* Scenarios: ``optfleet gap`` on every shipped scenario (policies, look-ahead MILP, hindsight search with
  :data:`SEARCH_EVALUATIONS` evaluations, relaxation bound): each
  policy's mean TTFT by the simulator, its gap to the bound and its excess over the best known schedule, with
  P90 TTFT, P50 NTPOT, throughput, prefix hit rate and the predictor's MAPE (predicted-latency policies); beside the
  bound and the gap, the bound and the gap of benchmarks/results/placement_scenarios.json as it stood before the run
  (the previously published bound: before/after when the bound changes).
* Where the bound's gap is (placement_kv_bound): per scenario, the KV-hold part of the bound (kv_bound.py) at its
  floors, then recomputed with the best policy's realised decode times and with whole request blocks (no sharing
  credit), and the busiest step's KV load both ways (:func:`kv_hold_decomposition`).
* How close a valid bound can come (placement_bound_reach): per scenario, the best policy, the bound and its gap,
  and the best known placement (the best row, or the shipped certificate instances/placement/plans/<scenario>_best_known.json
  when it is better, scored here by the simulator): every valid lower bound is at most that placement's mean TTFT,
  so no bound can put the best policy closer than ``best policy / best known - 1`` (:func:`bound_reach`).

Writes benchmarks/out/ (benchmarks/results/ with --publish): placement.{md,json} (simulator, scorer, MILP),
placement_scenarios.{md,json}, placement_kv_bound.{md,json} and placement_bound_reach.{md,json}.

Run: python benchmarks/bench_placement.py [--servers 100] [--requests 2000] [--large 100000] [--milp-limit-s 60] [--scenarios-only]
[--publish] (``--scenarios-only``: the scenarios' tables alone, placement_scenarios, placement_kv_bound and placement_bound_reach)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import json

from output import PUBLISHED, add_output_option, machine_speed, machine_speed_text, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances" / "placement"
SEARCH_EVALUATIONS = 10_000  # hindsight_search's budget on each scenario (ends on its count, not on the time limit, here)
PLANS = INSTANCES / "plans"
SCENARIOS = ("scenario_a", "scenario_b", "scenario_c", "scenario_c_llama70b", "scenario_d", "sharegpt_like")


def sharegpt(servers: int, requests: int):
    import optfleet

    rate = 2.5 * servers  # about the ShareGPT-like instance's middle step per server
    return optfleet.load(INSTANCES / "sharegpt_like.yaml", servers__0__count=servers,
                         workload__arrivals={"process": "poisson", "rate_rps": rate, "requests": requests}).problem


def _timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def simulator(servers: int, requests: int, large: int) -> list[dict]:
    """Round robin (the baseline), the evaluator on both engines and online predicted latency with the oracle three
    ways (the reference forward run on a copy of every server; forecast.OracleBoard in Python; the compiled
    engine), at ``requests`` x ``servers``, checking that the three place every request alike; then round robin,
    both evaluators and the compiled oracle at ``large`` x ``servers`` (0: skipped).  The compiled engine is warmed
    up first on the small problem, both of its runs (numba compiles, or loads its cache), and that time is its own
    row."""
    from optfleet.problems.placement.evaluate import evaluate
    from optfleet.problems.placement.policies import OraclePredictor, PredictedLatency, make_policy, route

    def oracle(problem, engine: str, exact: bool = False):
        factory = (lambda: OraclePredictor(exact=True)) if exact else OraclePredictor
        return lambda: route(problem, PredictedLatency(problem, factory, seed=problem.seed), engine=engine)

    problem = sharegpt(servers, requests)
    baseline, placement = _timed(lambda: route(problem, make_policy(problem, "round_robin", {}, "bench")))
    warm_up, _ = _timed(lambda: (oracle(problem, "compiled")(), evaluate(problem, placement, engine="compiled")))
    rows = [{"what": "compiled engine warm-up (numba compiles or loads its cache; first calls)", "requests": requests, "servers": servers,
             "seconds": warm_up, "baseline": baseline, "warm_up": True},
            {"what": "online round robin (baseline)", "requests": requests, "servers": servers, "seconds": baseline, "baseline": baseline}]
    for engine in ("python", "compiled"):
        seconds, _ = _timed(lambda engine=engine: evaluate(problem, placement, engine=engine))
        rows.append({"what": f"evaluator (fixed placement), {engine}", "requests": requests, "servers": servers, "seconds": seconds,
                     "baseline": baseline})
    plans = {}
    for label, engine, exact in (("exact forward run, python", "python", True), ("OracleBoard, python", "python", False),
                                 ("compiled", "compiled", False)):
        seconds, plans[label] = _timed(oracle(problem, engine, exact))
        rows.append({"what": f"online predicted latency, oracle {label}", "requests": requests, "servers": servers, "seconds": seconds,
                     "baseline": baseline})
    same = all(np.array_equal(plan, plans["compiled"]) for plan in plans.values())
    print(f"  the three oracles place the {requests:,} requests alike: {same}")
    rows[-1]["same_placement_as_python"] = same
    if large:
        problem = sharegpt(servers, large)
        big_baseline, big_placement = _timed(lambda: route(problem, make_policy(problem, "round_robin", {}, "bench")))
        rows.append({"what": "online round robin (baseline)", "requests": large, "servers": servers, "seconds": big_baseline,
                     "baseline": big_baseline})
        for engine in ("python", "compiled"):
            seconds, _ = _timed(lambda engine=engine: evaluate(problem, big_placement, engine=engine))
            rows.append({"what": f"evaluator (fixed placement), {engine}", "requests": large, "servers": servers, "seconds": seconds,
                         "baseline": big_baseline})
        seconds, _ = _timed(oracle(problem, "compiled"))
        rows.append({"what": "online predicted latency, oracle compiled", "requests": large, "servers": servers, "seconds": seconds,
                     "baseline": big_baseline})
    for row in rows:
        if row.pop("warm_up", False):  # compiling is no rate: its time alone is reported
            row.update(requests_per_s=None, ratio_to_baseline=None, extrapolated_1e6_s=None)
            del row["baseline"]
            continue
        row["requests_per_s"] = row["requests"] / row["seconds"]
        row["ratio_to_baseline"] = row["seconds"] / row.pop("baseline")
        row["extrapolated_1e6_s"] = 1e6 / row["requests_per_s"]
        if "oracle" in row["what"]:  # the decision's cost beyond replaying a fixed placement on the same engine
            engine = "compiled" if row["what"].endswith("compiled") else "python"
            base = next(r for r in rows if r["requests"] == row["requests"] and r["what"] == f"evaluator (fixed placement), {engine}")
            row["decision_us"] = 1e6 * (row["seconds"] - base["seconds"]) / row["requests"]
    return rows


def scorer(candidates: int = 100, repeats: int = 20_000) -> list[dict]:
    from optfleet.problems.placement.policies import LoadPrefix, affinity_candidates, pick_by_latency

    rng = np.random.default_rng(0)
    ttft, tpot = rng.uniform(50, 5000, candidates), rng.uniform(5, 80, candidates)
    prefix, idle = rng.uniform(0, 1, candidates), np.zeros(candidates, dtype=bool)
    state = {"prefix": prefix, "queue": rng.integers(0, 20, candidates).astype(float), "kv": rng.uniform(0, 1, candidates)}
    load_prefix = LoadPrefix(1, 1, 1, 0)

    def predicted() -> int:
        chosen = affinity_candidates(prefix, ttft, 0.8, 5000.0, False)
        return pick_by_latency(ttft[chosen], tpot[chosen], idle[chosen], 2000.0, 40.0, 1.0, 0.8)

    cases = {"np.argmin over 100 (baseline)": lambda: np.argmin(ttft), "predicted-latency choice (SLOs)": predicted,
             "predicted-latency choice (no SLO)": lambda: pick_by_latency(ttft, tpot, idle, None, None, 1.0, 0.8),
             "load+prefix scores (1,1,1)": lambda: np.argmax(load_prefix.scores(state))}
    rows = []
    for what, call in cases.items():
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        rows.append({"what": what, "candidates": candidates, "microseconds": 1e6 * (time.perf_counter() - start) / repeats})
    for row in rows:
        row["ratio_to_baseline"] = row["microseconds"] / rows[0]["microseconds"]
    return rows


def milp_sizes(limit_s: float) -> list[dict]:
    import optfleet
    from optfleet.problems.placement.exact import hindsight

    rows = []
    for n in (25, 50, 100, 150, 200):
        problem = optfleet.load(INSTANCES / "tiny.yaml", servers__0__count=4, solve__time_limit_s=limit_s, solve__max_milp_requests=n,
                                workload__arrivals={"process": "poisson", "rate_rps": 16, "requests": n}).problem
        start = time.perf_counter()
        _, report = hindsight(problem)
        rows.append({"requests": n, "servers": 4, "status": report.status, "objective_ms": report.objective, "bound_ms": report.bound,
                     "gap": report.gap, "seconds": time.perf_counter() - start})
        print(f"  MILP {n} x 4: {report.summary}")
        if not report.proven_optimal:
            break
    return rows


def scenarios() -> list[dict]:
    import optfleet

    rows = []
    for name in SCENARIOS:
        loaded = optfleet.load(INSTANCES / f"{name}.yaml", solve__search_evaluations=SEARCH_EVALUATIONS)
        methods = [p.label for p in loaded.problem.policies] + ["lookahead_milp", "hindsight_search", "relaxation_bound"]
        outcome = optfleet.run_gap(loaded, methods=methods)
        summary = outcome.summary
        for row in outcome.rows:
            if row["objective"] is None:
                continue
            rows.append({"scenario": name, "method": row["method"], "mean_ttft_ms": row["objective"], "bound_ms": row["bound"],
                         "gap_pct": row["gap_pct"], "excess_over_best_pct": summary["excess_over_best_pct"][row["method"]],
                         "p90_ttft_ms": row["p90_ttft_ms"], "p50_ntpot_ms": row["p50_ntpot_ms"],
                         "throughput_tokens_per_s": row["throughput_tokens_per_s"], "prefix_hit_rate": row["prefix_hit_rate"],
                         "ttft_mape_pct": row.get("ttft_mape_pct"), "tpot_mape_pct": row.get("tpot_mape_pct"), "seconds": row["seconds"]})
        print(f"  {name}: best known {summary['best_known_method']} ({summary['best_known_objective_ms']:,.1f} ms)")
    return rows


def kv_hold_decomposition(name: str, scenario_rows: list[dict]) -> dict:
    """Where the bound's gap is on ``name`` (kv_bound.py): the KV-hold part at its floors, then with the best
    policy's realised decode times (first token to completion) in place of the lone-decoder floors, then also with
    whole request blocks ``T_r`` in place of the blocks no earlier request names (no credit for sharing), and the KV
    load of the busiest QPS step, ``rate x mean(height x hold) / sum_k C_k`` (Little's law: the blocks in use if
    nobody waited), at the floors and as realised.  The last two values are no bounds: they show how long holds
    and how many blocks a bound would have to prove to see the policies' queue."""
    import optfleet
    from optfleet.problems.placement.bounds import prefill_floors_ms, relaxation_bound
    from optfleet.problems.placement.evaluate import evaluate
    from optfleet.problems.placement.kv_bound import hold_floor_ms, kv_wait_bound_ms, own_blocks
    from optfleet.problems.placement.policies import make_policy, route

    problem = optfleet.load(INSTANCES / f"{name}.yaml").problem
    entries = {p.label: p for p in problem.policies}
    best = min((r for r in scenario_rows if r["method"] in entries), key=lambda r: r["mean_ttft_ms"])
    entry = entries[best["method"]]
    run = evaluate(problem, route(problem, make_policy(problem, entry.name, entry.params, "bench")))
    floors = prefill_floors_ms(problem)
    decode_ms = run.timeline.done_ms - run.timeline.first_token_ms
    own, whole = own_blocks(problem).astype(float), problem.total_blocks.astype(float)
    q = problem.requests
    capacity = sum(e.kv_capacity_blocks for e in problem.engines)
    busiest = int(np.argmax(q.step_rates_rps))
    in_step = q.step == busiest
    rate_per_ms = q.step_rates_rps[busiest] / 1000.0

    def load(height, hold):
        return 100.0 * rate_per_ms * float((height * hold)[in_step].mean()) / capacity

    _, parts = relaxation_bound(problem)
    realised_hold = floors.min(axis=1) + decode_ms
    return {"scenario": name, "best_policy": best["method"], "mean_ttft_ms": best["mean_ttft_ms"], "bound_ms": best["bound_ms"],
            "kv_hold_ms": parts.get("kv_hold_ms"), "kv_hold_realised_decode_ms": kv_wait_bound_ms(problem, floors, decode_ms),
            "kv_hold_realised_decode_whole_blocks_ms": kv_wait_bound_ms(problem, floors, decode_ms, problem.total_blocks),
            "kv_load_floors_pct": load(own, hold_floor_ms(problem, floors)), "kv_load_realised_pct": load(whole, realised_hold),
            "mean_decode_floor_ms": float((hold_floor_ms(problem, floors) - floors.min(axis=1)).mean()),
            "mean_decode_realised_ms": float(decode_ms.mean()), "mean_own_blocks": float(own.mean()), "mean_blocks": float(whole.mean())}


def bound_reach(name: str, scenario_rows: list[dict]) -> dict:
    """How close any valid bound can come to the best policy on ``name``: the best known placement is the best row of
    the run or the shipped certificate (``PLANS / <name>_best_known.json``, scored here), whichever is lower; the
    simulator's best placement is at most it and every valid lower bound at most that, so the best policy's gap to
    any valid bound is at least ``best policy / best known - 1``."""
    import optfleet
    from optfleet.problems.placement.evaluate import evaluate

    problem = optfleet.load(INSTANCES / f"{name}.yaml").problem
    labels = {p.label for p in problem.policies}
    best = min((r for r in scenario_rows if r["method"] in labels), key=lambda r: r["mean_ttft_ms"])
    known = min(scenario_rows, key=lambda r: r["mean_ttft_ms"])
    known_ms, source = known["mean_ttft_ms"], known["method"]
    certificate = PLANS / f"{name}_best_known.json"
    if certificate.exists():
        value = evaluate(problem, np.array(json.loads(certificate.read_text())["placement"])).objective_ms
        if value < known_ms:
            known_ms, source = value, f"instances/placement/plans/{certificate.name}"
    return {"scenario": name, "best_policy": best["method"], "best_policy_ms": best["mean_ttft_ms"], "bound_ms": best["bound_ms"],
            "gap_pct": best["gap_pct"], "best_known_ms": known_ms, "best_known_from": source,
            "least_gap_any_bound_pct": 100.0 * (best["mean_ttft_ms"] / known_ms - 1.0)}


def write_bound_reach(folder: Path, table: list[dict]) -> None:
    """placement_bound_reach.{md,json}: :func:`bound_reach` per scenario (the least gap to two decimals: it decides
    whether a scenario is settled at 50 %)."""
    write_results(folder, "placement_bound_reach", {"rows": table},
                  ["scenario", "best policy", "mean TTFT ms", "bound ms", "gap to bound %", "best known placement ms", "from",
                   "least gap to any valid bound %"],
                  [(r["scenario"], r["best_policy"], f"{r['best_policy_ms']:,.1f}", f"{r['bound_ms']:,.1f}", f"{r['gap_pct']:,.1f}",
                    f"{r['best_known_ms']:,.1f}", r["best_known_from"], f"{r['least_gap_any_bound_pct']:,.2f}") for r in table])


def write_kv_decomposition(folder: Path, table: list[dict]) -> None:
    """placement_kv_bound.{md,json}: :func:`kv_hold_decomposition` per scenario."""
    write_results(folder, "placement_kv_bound", {"rows": table},
                  ["scenario", "best policy", "mean TTFT ms", "bound ms", "KV-hold part ms", "+ realised decode ms",
                   "+ whole blocks ms", "decode ms floor / realised", "blocks own / whole", "KV load % floors / realised"],
                  [(r["scenario"], r["best_policy"], f"{r['mean_ttft_ms']:,.1f}", f"{r['bound_ms']:,.1f}", _cell(r["kv_hold_ms"], ",.1f"),
                    _cell(r["kv_hold_realised_decode_ms"], ",.1f"), _cell(r["kv_hold_realised_decode_whole_blocks_ms"], ",.1f"),
                    f"{r['mean_decode_floor_ms']:,.0f} / {r['mean_decode_realised_ms']:,.0f}", f"{r['mean_own_blocks']:.0f} / {r['mean_blocks']:.0f}",
                    f"{r['kv_load_floors_pct']:.0f} / {r['kv_load_realised_pct']:.0f}") for r in table])


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--large", type=int, default=100_000, help="requests of the larger run (round robin, the evaluators and the compiled oracle; 0: none)")
    parser.add_argument("--milp-limit-s", type=float, default=60.0)
    parser.add_argument("--scenarios-only", action="store_true", help="run and write the shipped scenarios' tables only")
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    if args.scenarios_only:
        write_scenario_tables(folder, scenarios())
        return
    print("simulator ...")
    sim = simulator(args.servers, args.requests, args.large)
    print("scorers ...")
    scores = scorer()
    print("MILP sizes ...")
    milp = milp_sizes(args.milp_limit_s)
    print("scenarios ...")
    write_scenario_tables(folder, scenarios())
    proven = [r["requests"] for r in milp if r["status"] == "optimal"]
    lines = [(r["what"], f"{r['requests']:,} x {r['servers']}", f"{r['seconds']:.2f} s",
              "-" if r["requests_per_s"] is None else f"{r['requests_per_s']:,.0f} req/s", _cell(r["ratio_to_baseline"], ".2f") + "x" * (r["ratio_to_baseline"] is not None),
              "-" if r["extrapolated_1e6_s"] is None else f"{r['extrapolated_1e6_s']:,.0f} s", _cell(r.get("decision_us"), ",.0f")) for r in sim]
    lines += [(r["what"], f"{r['candidates']} candidates", f"{r['microseconds']:.1f} µs", "-", f"{r['ratio_to_baseline']:.1f}x", "-",
               f"{r['microseconds']:.1f}") for r in scores]
    lines += [(f"hindsight MILP ({r['status']}, gap {_cell(r['gap'], '.2%')})", f"{r['requests']} x {r['servers']}", f"{r['seconds']:.1f} s",
               "-", "-", "-", "-") for r in milp]
    speed = machine_speed()
    lines.append(("machine speed in this run (reference workloads)", "-", machine_speed_text(speed), "-", "-", "-", "-"))
    write_results(folder, "placement", {"machine_speed": speed, "simulator": sim, "scorer": scores, "milp": milp,
                                        "largest_milp_proven_optimal_requests": max(proven) if proven else None},
                  ["measurement", "size", "time", "rate", "ratio to baseline", "1e6 requests (extrapolated)", "µs per decision"], lines)
    print((folder / "placement.md").read_text())


def write_scenario_tables(folder: Path, table: list[dict]) -> None:
    """placement_scenarios.{md,json}, placement_kv_bound.{md,json} and placement_bound_reach.{md,json}, printed."""
    write_scenarios(folder, table)
    write_kv_decomposition(folder, [kv_hold_decomposition(name, [r for r in table if r["scenario"] == name]) for name in SCENARIOS])
    write_bound_reach(folder, [bound_reach(name, [r for r in table if r["scenario"] == name]) for name in SCENARIOS])
    for part in ("placement_scenarios", "placement_kv_bound", "placement_bound_reach"):
        print((folder / f"{part}.md").read_text())


def previously_published() -> dict[tuple[str, str], dict]:
    """The published scenario rows before this run, by (scenario, method) (empty when there are none)."""
    path = PUBLISHED / "placement_scenarios.json"
    if not path.exists():
        return {}
    return {(r["scenario"], r["method"]): r for r in json.loads(path.read_text())["rows"]}


def write_scenarios(folder: Path, table: list[dict]) -> None:
    """placement_scenarios.{md,json}: one row per scenario and method, with the published bound and gap it replaces."""
    before = previously_published()
    for r in table:
        old = before.get((r["scenario"], r["method"]), {})
        same_bound = old.get("bound_ms") == r["bound_ms"] and "bound_before_ms" in old  # a re-run of the same bound keeps the older pair
        r["bound_before_ms"] = old.get("bound_before_ms" if same_bound else "bound_ms")
        r["gap_before_pct"] = old.get("gap_before_pct" if same_bound else "gap_pct")
    write_results(folder, "placement_scenarios", {"rows": table},
                  ["scenario", "method", "mean TTFT ms", "bound ms (before)", "gap to bound % (before)", "excess over best %", "P90 TTFT ms",
                   "P50 NTPOT ms", "tok/s", "hit %", "MAPE TTFT / TPOT %"],
                  [(r["scenario"], r["method"], f"{r['mean_ttft_ms']:,.1f}", f"{_cell(r['bound_ms'], ',.1f')} ({_cell(r['bound_before_ms'], ',.1f')})",
                    f"{_cell(r['gap_pct'], ',.1f')} ({_cell(r['gap_before_pct'], ',.1f')})", _cell(r["excess_over_best_pct"], ",.1f"),
                    _cell(r["p90_ttft_ms"], ",.1f"), _cell(r["p50_ntpot_ms"], ".2f"), _cell(r["throughput_tokens_per_s"], ",.0f"),
                    _cell(None if r["prefix_hit_rate"] is None else 100 * r["prefix_hit_rate"], ".1f"),
                    "-" if r["ttft_mape_pct"] is None else f"{r['ttft_mape_pct']:.1f} / {_cell(r['tpot_mape_pct'], '.1f')}") for r in table])


if __name__ == "__main__":
    main()
