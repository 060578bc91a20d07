"""Benchmark: aggregated vs disaggregated cost, every method's, with its simulated attainment (issue 36's table).

On the shipped RAG instance (instances/pd_fleet/rag_long_prompt.yaml, whose answer flips between aggregated and
disaggregated with the rate and the targets) at 3 arrival rates x 2 SLO pairs, every method of the kind (milp,
best_aggregated, splitwise_grid, dynamo_sla, xpyd_ratio) is run and its plan scored by the one evaluator; then every
pool of the plan is simulated (optfleet simulate's per-pool simulator, optfleet/problems/pd_fleet/simulate/outcome.py:
disaggregated pools by stage, aggregated ones by the fleet's batching simulator) and the plan's attainment is the
share of all requests meeting both targets, ``sum_j rate_j attainment_j / sum_j rate_j`` (a busy pool without
instances attains 0).  Small runs, to keep the benchmark to a few minutes: 10,000 arrivals per pool x 2 replications
(so each attainment is within about +-0.5 % points; the text gives the 95 % half-widths in the JSON).

Columns: the method's cost ($/h), its ratio to the MILP's cost, the evaluator's verdict, the number of disaggregated
pools, and the simulated attainment.  The mean-based rules (dynamo_sla, xpyd_ratio) are sized without a queue: their
attainment is the point.
Writes benchmarks/out/ (benchmarks/results/ with --publish): pd_compare.json and .md (quoted by the documentation).

Run: python benchmarks/bench_pd_compare.py
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import yaml

from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.kind import KIND
from optfleet.problems.pd_fleet.problem import prepare
from optfleet.problems.pd_fleet.simulate.outcome import simulate_choice
from optfleet.progress import silent

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "instances" / "pd_fleet" / "rag_long_prompt.yaml"
RATES_RPS = (2.0, 4.0, 8.0)
SLOS_MS = ((3000.0, 40.0), (2000.0, 30.0))
"""(P99 TTFT, P99 TPOT) pairs: the shipped instance's, and a tighter one."""
REQUESTS, REPS = 10_000, 2


def case(document: dict, rate_rps: float, ttft_ms: float, tpot_ms: float) -> list[dict]:
    data = copy.deepcopy(document)
    data["workload"]["rate_rps"] = rate_rps
    data["slo"].update(ttft_p99_ms=ttft_ms, tpot_p99_ms=tpot_ms)
    problem = prepare(load_instance(data))
    rows = []
    for method in KIND.methods(problem):
        (result,) = KIND.run(problem, method, silent)
        row = {"rate_rps": rate_rps, "ttft_p99_ms": ttft_ms, "tpot_p99_ms": tpot_ms, "method": method,
               "assumes": result.columns.get("assumes"), "cost_per_hour": result.objective, "feasible": result.feasible,
               "note": result.note, "disaggregated_pools": result.columns.get("disaggregated_pools"),
               "plan": None if result.plan is None else result.plan.to_dict(), "attainment": None, "pools": []}
        if result.plan is not None:
            met = 0.0
            for pool, choice in zip(problem.pools, result.plan.pools, strict=True):
                if not pool.busy:
                    continue
                sim = {} if choice is None else simulate_choice(problem, pool, choice, requests=REQUESTS, reps=REPS, seed=0)
                attained, half = sim.get("attainment", (0.0, 0.0))
                met += pool.rate_rps * attained
                row["pools"].append({"pool": pool.index, "attainment": attained, "ci95": half})
            row["attainment"] = met / problem.rate_rps
        rows.append(row)
    milp = next(r for r in rows if r["method"] == "milp")["cost_per_hour"]
    for row in rows:
        row["ratio_to_milp"] = None if row["cost_per_hour"] is None or not milp else row["cost_per_hour"] / milp
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    document = yaml.safe_load(INSTANCE.read_text())
    began = time.perf_counter()
    rows = [row for ttft, tpot in SLOS_MS for rate in RATES_RPS for row in case(document, rate, ttft, tpot)]
    table = []
    for r in rows:
        cells = [f"{r['rate_rps']:g}", f"{r['ttft_p99_ms']:g} / {r['tpot_p99_ms']:g}", r["method"],
                 "-" if r["cost_per_hour"] is None else f"{r['cost_per_hour']:,.2f}",
                 "-" if r["ratio_to_milp"] is None else f"{r['ratio_to_milp']:.3f}",
                 "no plan" if r["plan"] is None else ("yes" if r["feasible"] else "no"),
                 "-" if r["disaggregated_pools"] is None else str(r["disaggregated_pools"]),
                 "-" if r["attainment"] is None else f"{100 * r['attainment']:.2f} %"]
        table.append(cells)
        print(" | ".join(cells))
    seconds = time.perf_counter() - began
    print(f"{len(rows)} rows in {seconds:.0f} s ({REQUESTS:,} arrivals per pool x {REPS} replications)")
    columns = ["req/s", "P99 TTFT / TPOT ms", "method", "$/h", "cost / MILP", "evaluator feasible", "disagg. pools",
               "simulated attainment"]
    write_results(folder, "pd_compare", {"instance": INSTANCE.stem, "requests_per_pool": REQUESTS, "reps": REPS,
                                         "seconds": seconds, "rows": rows}, columns, table)


if __name__ == "__main__":
    main()
