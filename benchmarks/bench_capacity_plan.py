"""Benchmark: capacity plans over time (kind ``capacity_plan``) on the shipped week instance, in one run.

Every method of the kind (the MILP, the rolling horizon, the five practitioners' rules) plans the week instance
(3 models x 168 hourly periods x 4 GPU types x reserved / on-demand / spot); the one evaluator scores each plan.
The table gives each method's planned cost, its ratio to the MILP's cost in the same run, its gap to the MILP's
bound, its seconds, its SLO attainment under the seeded preemption replay, its expected on-demand fallback and
whether the evaluator accepts it.  The MILP's time limit is the instance's (60 s); what HiGHS reaches within it
depends on the machine's load, which the machine-speed line records.

Writes benchmarks/out/ (benchmarks/results/ with --publish): capacity_plan.json and capacity_plan.md.

Run: python benchmarks/bench_capacity_plan.py [--time-limit 60] [--publish]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "instances" / "capacity_plan" / "week_three_models.yaml"
COLUMNS = ("method", "status", "feasible", "cost $", "x MILP cost", "gap % to the bound", "seconds", "min / mean SLO met %",
           "fallback $")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=None, help="the MILP's time limit, s (default: the instance's)")
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    import optfleet

    speed = machine_speed()
    outcome = optfleet.run_gap(INSTANCE, time_limit_s=args.time_limit)
    rows = [dict(r) for r in outcome.rows]
    milp = next(r for r in rows if r["method"] == "milp")
    (reference,) = outcome.references.values()
    table = []
    for r in rows:
        ratio = None if r["objective"] is None or milp["objective"] is None else r["objective"] / milp["objective"]
        table.append([r["method"], r["status"], "yes" if r["feasible"] else "no", "-" if r["objective"] is None else f"{r['objective']:,.1f}",
                      "-" if ratio is None else f"{ratio:.3f}", "-" if r["gap_pct"] is None else f"{r['gap_pct']:.2f}", f"{r['seconds']:.1f}",
                      "-" if r.get("min_attainment_pct") is None else f"{r['min_attainment_pct']:.1f} / {r['mean_attainment_pct']:.1f}",
                      "-" if r.get("expected_fallback_cost") is None else f"{r['expected_fallback_cost']:,.2f}"])
        print("  ".join(table[-1]))
    print(f"bound: {reference.reason} = {reference.bound}; machine: {machine_speed_text(speed)}")
    data = {"instance": str(INSTANCE.relative_to(ROOT)), "bound": reference.bound, "bound_reason": reference.reason, "machine_speed": speed,
            "rows": [{k: v for k, v in r.items() if k in ("method", "status", "feasible", "objective", "gap_pct", "seconds", "min_attainment_pct",
                                                        "mean_attainment_pct", "expected_fallback_cost", "note")} for r in rows]}
    write_results(folder, "capacity_plan", data, COLUMNS, table)
    md = folder / "capacity_plan.md"
    md.write_text(md.read_text() + f"\nBound: {reference.reason}, ${reference.bound:,.2f}. Machine: {machine_speed_text(speed)}.\n")


if __name__ == "__main__":
    main()
