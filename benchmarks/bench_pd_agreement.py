"""Benchmark: the analytic pool models against the pd_fleet simulators, on the shipped plans.

For every shipped instance of instances/pd_fleet/, the MILP's plan is solved and each pool it serves is simulated
(3 replications of 40,000 Poisson arrivals, the first 10 % left out, with the pool's own request mix; simulate/outcome.py
``simulate_choice``, as ``optfleet simulate``): a disaggregated pool by its prefill, link and decode stages
(optfleet/problems/pd_fleet/simulate), an aggregated one by the fleet's continuous-batching simulator.  The table
gives the analytic figure, the simulated one and their ratio for P99 TTFT, P99 TPOT, mean TPOT, the utilisation
(a disaggregated pool's prefill instances; an aggregated pool's slots), the link utilisation and the mean decode batch
(disaggregated pools only), and the simulated attainment of both targets.  The issue's targets: within 10 % on P99 TTFT and TPOT, 5 % on utilisation, attainment at
least 99 %.
Writes benchmarks/out/ (benchmarks/results/ with --publish): pd_agreement.json and .md (quoted by the documentation).

Run: python benchmarks/bench_pd_agreement.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.exact import solve_pd
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan
from optfleet.problems.pd_fleet.problem import prepare
from optfleet.problems.pd_fleet.simulate.outcome import simulate_choice
from optfleet.problems.pd_fleet.sizing import aggregated_states, disaggregated_pool

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = sorted((ROOT / "instances" / "pd_fleet").glob("*.yaml"))
FIGURES = (("P99 TTFT", "ttft_p99_ms", "ttft_p99_ms"), ("P99 TPOT", "tpot_p99_ms", "tpot_p99_ms"),
           ("mean TPOT", "tpot_mean_ms", "tpot_mean_ms"), ("utilisation", "prefill_utilisation", "prefill_busy_share"),
           ("link util", "link_utilisation", "link_busy_share"), ("decode batch", "decode_batch_mean", "decode_mean_occupancy"))
"""``(column, analytic field, simulated figure)`` of a disaggregated pool."""
AGGREGATED_FIGURES = {"P99 TTFT": ("ttft_p99_ms", "ttft_p99_ms"), "P99 TPOT": ("tpot_p99_ms", "tpot_p99_ms"),
                      "mean TPOT": ("tpot_mean_ms", "tpot_mean_ms"), "utilisation": ("utilisation", "slot_occupancy")}
"""``column -> (analytic field, simulated figure)`` of an aggregated pool (the fleet's batching state)."""


def compare(path: Path) -> list[dict]:
    problem = prepare(load_instance(path))
    plan = solve_pd(problem).plan
    rows = []
    for pool, choice in zip(problem.pools, plan.pools, strict=True):
        if isinstance(choice, DisaggregatedPoolPlan):
            prefill, decode = problem.option(choice.prefill), problem.option(choice.decode)
            metrics = disaggregated_pool(problem, pool, prefill, decode).metrics(choice.prefill_instances, choice.decode_instances)
            fields = {label: (ours, theirs) for label, ours, theirs in FIGURES}
        elif isinstance(choice, AggregatedPoolPlan):
            metrics = aggregated_states(problem, pool, problem.option(choice.option), [choice.instances])[0]
            fields = AGGREGATED_FIGURES
        else:
            continue
        sim = simulate_choice(problem, pool, choice, requests=40_000, reps=3, seed=0)
        simulated = {name: mean for name, (mean, _) in sim.items()}
        rows.append({"instance": path.stem, "pool": pool.label, "plan": choice.describe(),
                     "figures": {label: {"analytic": float(getattr(metrics, ours)), "simulated": simulated[theirs]}
                                 for label, (ours, theirs) in fields.items()},
                     "attainment": simulated["attainment"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    rows = [row for path in INSTANCES for row in compare(path)]
    table = []
    for r in rows:
        cells = [f"{r['instance']}: {r['pool']}, {r['plan']}"]
        for label, _, _ in FIGURES:
            f = r["figures"].get(label)
            cells.append("-" if f is None else f"{f['analytic']:.4g} / {f['simulated']:.4g} = {f['analytic'] / f['simulated']:.3f}")
        cells.append(f"{100 * r['attainment']:.2f} %")
        table.append(cells)
        print(" | ".join(cells))
    columns = ["pool (MILP plan)", *(f"{label}: analytic / simulated" for label, _, _ in FIGURES), "simulated attainment"]
    write_results(folder, "pd_agreement", {"rows": rows}, columns, table)


if __name__ == "__main__":
    main()
