"""Benchmark: the reserved kind's exact models against the anchor's exhaustive scans, in one run.

Cases (each in its own subprocess, so its peak resident memory is its own: loading the trace + the method):

* the Azure LLM inference trace 2023 on gemini-2.5-flash at 1-s cost windows (instances/reserved/
  azure_2023_flash.yaml, on the trace that ships with optfleet): the exact hybrid model (Pyomo, per window) and its array form (windows merged between grid points)
  against ``hybrid_scan`` (every grid point's $/h, vectorised), the chance model against the percentile plan;
* the synthetic week (instances/reserved/diurnal_7day.yaml, 604,800 one-second windows, 4.8 million requests):
  the hybrid and robust array models against their scans, and the backlog model (its rows link consecutive
  windows, so it is solved unit count by unit count: optfleet/problems/reserved/backlog.py) against the
  online rule's scan, under a time limit (``--backlog-limit-s``).

Every row gives the method's $/h (or units), the solver's status, bound and gap, the time of the method with its scoring and
the peak RSS of its process.  The ratio column is scan time / exact time in the same run.  Writes benchmarks/out/
(benchmarks/results/ with --publish): reserved.json and reserved.md.

Run: python benchmarks/bench_reserved.py [--backlog-limit-s 300] [--publish]
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
AZURE = ROOT / "instances" / "reserved" / "azure_2023_flash.yaml"
WEEK = ROOT / "instances" / "reserved" / "diurnal_7day.yaml"
# (instance, method, overrides)
CASES = [
    ("azure", "hybrid_scan"), ("azure", "hybrid"), ("azure", "hybrid_arrays"), ("azure", "percentile_p99"), ("azure", "chance_p99"),
    ("week", "hybrid_scan"), ("week", "hybrid"), ("week", "worst_scenario"), ("week", "robust"), ("week", "backlog_scan"),
    ("week", "backlog"),
]


def run_one(case: str, method: str, backlog_limit_s: float) -> dict:
    """One measurement, in this (child) process."""
    import optfleet
    from optfleet.problems.reserved import exact
    from optfleet.progress import silent
    from optfleet.solvers.highs import solve_arrays

    overrides = {}
    if case == "week" and method.startswith("backlog"):
        overrides.update(plans__backlog__max_wait_s=5, solve__time_limit_s=backlog_limit_s)
    start = time.perf_counter()
    loaded = optfleet.load(AZURE if case == "azure" else WEEK, **overrides)
    problem = loaded.problem
    row = {"case": case, "method": method, "windows": problem.cost_windows.n_windows, "requests": len(problem.trace),
           "load_seconds": time.perf_counter() - start}
    start = time.perf_counter()
    if method == "hybrid_arrays":
        windows = exact.spill_windows(problem.cost_windows)
        report, values = solve_arrays(exact.hybrid_arrays(windows, exact.purchase_grid(problem), problem.prices.unit_per_hour), what="hybrid")
        report = exact.per_hour(report, windows.hours)
        row.update(seconds=time.perf_counter() - start, objective=report.objective, units=exact.units_from_columns(values, exact.purchase_grid(problem)))
    else:
        result = loaded.kind.run(problem, method, silent)[0]
        report = result.report
        row.update(seconds=time.perf_counter() - start, objective=result.objective, units=getattr(result.plan, "units", None), note=result.note)
    row.update(status=report.status if report else "heuristic", bound=report.bound if report else None, gap=report.gap if report else None,
               peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
    return row


def measure(case: str, method: str, backlog_limit_s: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", case, method, str(backlog_limit_s)], check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


SCAN_OF = {"hybrid": "hybrid_scan", "hybrid_arrays": "hybrid_scan", "chance_p99": "percentile_p99", "robust": "worst_scenario",
           "backlog": "backlog_scan"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--backlog-limit-s", type=float, default=300.0, help="time limit of the week's backlog model (default 300 s)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child[0], args.child[1], float(args.child[2]))))
        return 0
    rows = []
    for case, method in CASES:
        row = measure(case, method, args.backlog_limit_s)
        rows.append(row)
        print(f"{case:5s} {method:15s} {row['seconds']:8.3f} s  objective {row['objective']}  units {row['units']}  {row['status']}  "
              f"peak {row['peak_rss_gb']:.2f} GB", flush=True)
    times = {(r["case"], r["method"]): r["seconds"] for r in rows}
    for r in rows:
        scan = SCAN_OF.get(r["method"])
        r["scan_over_exact_time"] = times[(r["case"], scan)] / r["seconds"] if scan and (r["case"], scan) in times else None
    results = output_folder(args)
    (results / "reserved.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "Reserved capacity: exact models vs the anchor's scans (one run; each method in its own process; time = the method and its scoring "
        "by the evaluator, after loading the trace; ratio = the scan's time / the exact method's).", "",
        "| case | windows | method | status | objective | units | bound | gap | time s | scan / exact time | peak RSS GB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        objective = "-" if r["objective"] is None else (f"${r['objective']:,.4f}/h" if "hybrid" in r["method"] or r["method"] in
                                                         ("robust", "worst_scenario", "backlog", "backlog_scan") else f"{r['objective']:g}")
        bound = "-" if r["bound"] is None else f"{r['bound']:,.4f}"
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.3g} %"
        ratio = "-" if r["scan_over_exact_time"] is None else f"{r['scan_over_exact_time']:.3g}"
        lines.append(f"| {r['case']} | {r['windows']:,} | {r['method']} | {r['status']} | {objective} | {r['units']} | {bound} | {gap} | "
                     f"{r['seconds']:.3f} | {ratio} | {r['peak_rss_gb']:.2f} |")
    (results / "reserved.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
