"""Benchmark: the larger capacity-plan study of issue 37 (10 models x 720 hourly periods) through ``optfleet sweep``
on Dask, with one resumable table, interrupted and resumed in the same run.

The instance is instances/capacity_plan/month_ten_models.yaml (10 models, 4 GPU types, reserved / on-demand /
spot).  The grid is the H100's spot confidence x the demand's growth per day (``--set gpus.0.spot.confidence=...
--set demand.growth_per_day=...``), every scenario planned by the rolling horizon and the practitioners' rules and
scored by the one evaluator.  The run has two phases, both the ``optfleet sweep`` command line in a subprocess:

1. the study is started and interrupted (SIGINT, as Ctrl-C) as soon as its table holds ``--interrupt-after``
   scenarios: the table keeps the scenarios solved so far;
2. the same command is run again: it reads the table, solves only the scenarios it does not hold, and reports how
   many it resumed (``--json``: ``resumed``, ``solved``).

Writes benchmarks/out/ (benchmarks/results/ with --publish): capacity_plan_study.csv (the study's table),
capacity_plan_study.json and capacity_plan_study.md (the table by scenario and method, the two phases' timings and
the command).  The full MILP of this size does not run within a scenario's time (the rows' ``gap_pct`` is empty), so
a third step bounds each scenario of the table by the MILP's LP relaxation (exact.lp_bound: ``LP* <= MILP* <= cost``
of every plan the evaluator accepts) and gives the cheapest feasible plan's gap to it; it is written to
capacity_plan_study_bound.json and as a section of capacity_plan_study.md.  ``--bound-only`` runs that step alone on
the table already in the folder (e.g. the published one), without running the study again.

Run: python benchmarks/bench_capacity_plan_study.py [--workers 2] [--interrupt-after 2] [--bound-only] [--publish]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from output import add_output_option, machine_speed, machine_speed_text, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "instances" / "capacity_plan" / "month_ten_models.yaml"
AXES = {"gpus.0.spot.confidence": "0.8,0.95", "demand.growth_per_day": "0,0.01"}
METHODS = "rolling_horizon,static_peak,per_period_on_demand,reserve_percentile,spot_fallback,greedy_packing"
POLL_S = 5.0
BOUND_HEADING = "\n## The LP bound\n"
BOUND_COLUMNS = ("H100 spot confidence", "growth / day", "LP bound $", "LP seconds", "cheapest feasible plan", "cost $", "gap % to the bound")
COLUMNS = ("H100 spot confidence", "growth / day", "method", "status", "feasible", "cost $", "x best rule", "seconds",
           "min / mean SLO met %", "fallback $")


def sweep_command(table: Path, workers: int) -> list[str]:
    """``optfleet sweep`` of the study on a Dask LocalCluster of ``workers``, its table at ``table``."""
    sets = [arg for field, values in AXES.items() for arg in ("--set", f"{field}={values}")]
    return [sys.executable, "-m", "optfleet", "sweep", str(INSTANCE), *sets, "--methods", METHODS, "--engine", "dask",
            "--workers", str(workers), "--out", str(table)]


def scenarios_in(table: Path) -> int:
    """How many scenarios the table file holds (0 before it is written)."""
    import pandas as pd

    return 0 if not table.exists() else int(pd.read_csv(table)["overrides"].nunique())


def interrupted_run(command: list[str], table: Path, after: int) -> dict[str, float]:
    """Phase 1: run ``command`` until ``table`` holds ``after`` scenarios, then SIGINT it; its seconds and scenarios."""
    began = time.perf_counter()
    # SIGINT restored in the child: a shell starts background jobs with it ignored, and Python then never raises
    # KeyboardInterrupt, so the interrupt would be lost
    process = subprocess.Popen([*command, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while process.poll() is None and scenarios_in(table) < after:
        time.sleep(POLL_S)
    interrupted = process.poll() is None
    if interrupted:
        process.send_signal(signal.SIGINT)
    _, err = process.communicate()
    return {"seconds": time.perf_counter() - began, "interrupted": interrupted, "exit_code": process.returncode,
            "scenarios_in_table": scenarios_in(table), "stderr_tail": err.strip().splitlines()[-1:] if err.strip() else []}


def resumed_run(command: list[str]) -> tuple[dict[str, float], dict]:
    """Phase 2: the same command again (``--json``); its seconds, counts and document."""
    began = time.perf_counter()
    done = subprocess.run([*command, "--quiet", "--json"], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode not in (0, 1):
        raise SystemExit(f"the resumed sweep failed (exit {done.returncode}): {done.stderr.strip()}")
    document = json.loads(done.stdout)
    counts = {k: v for k, v in document.items() if k not in ("rows", "out") and not isinstance(v, (list, dict))}
    return {"seconds": seconds, "exit_code": done.returncode, **counts}, document


def table_rows(table: Path) -> list[list[str]]:
    """The study's table by scenario and method, each cost beside the cheapest feasible rule's in its scenario."""
    import pandas as pd

    frame = pd.read_csv(table)
    rules = frame[(frame["method"] != "rolling_horizon") & frame["feasible"].astype(bool)]
    best = rules.groupby("overrides")["objective"].min()
    out = []
    for _, r in frame.iterrows():
        cost = r["objective"]
        ratio = cost / best[r["overrides"]] if r["overrides"] in best and pd.notna(cost) else None
        attained = "-" if pd.isna(r.get("min_attainment_pct")) else f"{r['min_attainment_pct']:.1f} / {r['mean_attainment_pct']:.1f}"
        out.append([f"{r['gpus.0.spot.confidence']:g}", f"{r['demand.growth_per_day']:g}", r["method"], r["status"],
                    "yes" if r["feasible"] else "no", "-" if pd.isna(cost) else f"{cost:,.1f}", "-" if ratio is None else f"{ratio:.3f}",
                    f"{r['seconds']:.1f}", attained,
                    "-" if pd.isna(r.get("expected_fallback_cost")) else f"{r['expected_fallback_cost']:,.2f}"])
    return out


def scenario_bounds(table: Path) -> list[dict]:
    """Each scenario of the study's table: the LP relaxation's bound (exact.lp_bound, no time limit), its seconds, and
    the cheapest plan the evaluator accepted in the table with its gap to the bound."""
    import pandas as pd

    from optfleet.instance import load_instance
    from optfleet.problems.capacity_plan.exact import lp_bound
    from optfleet.problems.capacity_plan.problem import prepare
    from optfleet.solvers.report import relative_gap

    frame = pd.read_csv(table)
    out = []
    for overrides, rows in frame.groupby("overrides", sort=False):
        began = time.perf_counter()
        bound = lp_bound(prepare(load_instance(INSTANCE, **json.loads(overrides))))
        seconds = time.perf_counter() - began
        feasible = rows[rows["feasible"].astype(bool)]
        best = feasible.loc[feasible["objective"].idxmin()] if len(feasible) else None
        cost = None if best is None else float(best["objective"])
        gap = relative_gap(cost, bound)
        out.append({"overrides": json.loads(overrides), "lp_bound": bound, "lp_seconds": seconds,
                    "best_method": None if best is None else best["method"], "best_cost": cost, "gap_pct": None if gap is None else 100 * gap})
        print(f"bound {out[-1]}", flush=True)
    return out


def write_bounds(folder: Path, bounds: list[dict], speed: dict[str, float]) -> None:
    """capacity_plan_study_bound.json and the bound section of capacity_plan_study.md (replacing an earlier one)."""
    (folder / "capacity_plan_study_bound.json").write_text(json.dumps({"scenarios": bounds, "machine_speed": speed}, indent=2) + "\n")
    lines = ["| " + " | ".join(BOUND_COLUMNS) + " |", "|" + "---|" * len(BOUND_COLUMNS)]
    for b in bounds:
        cells = [f"{b['overrides']['gpus.0.spot.confidence']:g}", f"{b['overrides']['demand.growth_per_day']:g}",
                 "-" if b["lp_bound"] is None else f"{b['lp_bound']:,.1f}", f"{b['lp_seconds']:.0f}", b["best_method"] or "-",
                 "-" if b["best_cost"] is None else f"{b['best_cost']:,.1f}", "-" if b["gap_pct"] is None else f"{b['gap_pct']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    md = folder / "capacity_plan_study.md"
    kept = md.read_text().split(BOUND_HEADING)[0]
    md.write_text(kept + BOUND_HEADING + "\n" + "\n".join(lines) + "\n\n" + (
        "Each scenario's bound is the optimum of its full MILP's LP relaxation (HiGHS simplex, no time limit), a lower "
        "bound on the cost of every plan the evaluator accepts; the gap is the cheapest feasible plan's, in the table "
        f"above.  Machine: {machine_speed_text(speed)}.\n"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="Dask LocalCluster workers (default 2)")
    parser.add_argument("--interrupt-after", type=int, default=2, help="scenarios in the table before phase 1 is interrupted")
    parser.add_argument("--bound-only", action="store_true", help="only bound the scenarios of the table already in the folder")
    add_output_option(parser)
    args = parser.parse_args()
    folder = output_folder(args)
    table = folder / "capacity_plan_study.csv"
    if args.bound_only:
        if not table.exists():
            raise SystemExit(f"--bound-only: no study table at {table}; run the study first")
        write_bounds(folder, scenario_bounds(table), machine_speed())
        return
    table.unlink(missing_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    speed = machine_speed()
    command = sweep_command(table, args.workers)
    first = interrupted_run(command, table, args.interrupt_after)
    print(f"phase 1: {first}", flush=True)
    second, document = resumed_run(command)
    print(f"phase 2: {second}", flush=True)
    rows = table_rows(table)
    for row in rows:
        print("  ".join(row))
    shown = " ".join(part if part.startswith("-") or "=" not in part else f"'{part}'" for part in
                     ["optfleet", *command[3:]]).replace(str(ROOT) + "/", "")
    data = {"instance": str(INSTANCE.relative_to(ROOT)), "axes": AXES, "methods": METHODS.split(","), "command": shown,
            "phase_1_interrupted": first, "phase_2_resumed": second, "machine_speed": speed, "rows": document.get("rows", [])}
    write_results(folder, "capacity_plan_study", data, COLUMNS, rows)
    md = folder / "capacity_plan_study.md"
    md.write_text(md.read_text() + (
        f"\nCommand (run twice; the table is `capacity_plan_study.csv` beside this file): `{shown}`.\n\n"
        f"Phase 1, interrupted (SIGINT) once the table held {first['scenarios_in_table']} scenario(s): {first['seconds']:.0f} s, "
        f"exit code {first['exit_code']}.  Phase 2, the same command: {second['seconds']:.0f} s, "
        f"{second.get('resumed', '?')} scenario(s) resumed from the table, {second.get('solved', '?')} solved, "
        f"{second.get('failed', '?')} failed.  Machine: {machine_speed_text(speed)}.\n"))
    write_bounds(folder, scenario_bounds(table), speed)


if __name__ == "__main__":
    main()
