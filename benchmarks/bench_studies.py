"""Benchmark: a scenario study (``optfleet sweep``) on each engine, against the serial engine in the same run.

Two studies: ``--fleet-scenarios`` arrival rates of the Azure 2023 fleet solved
by the sweep heuristic (tens of ms a scenario), and ``--milp-scenarios`` arrival
rates of a MILP instance (``--milp-instance``) solved by the fleet MILP.  Each
runs on the serial engine (this process: the baseline), the local process pool
and a Dask LocalCluster, each with ``--workers`` workers; the wall time
includes starting the pool or the cluster.  Reported per engine: wall time,
scenarios per second, the speed-up over serial, the start-up (the wall time
of a study of one scenario a worker, less one scenario's serial time: starting
the pool or the cluster and the workers' first imports), and the overhead per
task, ``(wall x workers - serial wall) / scenarios``: the worker time a
scenario costs beyond its serial time (start-up, sending tasks and results,
idle tails, and here time waiting for a busy core).
Every engine must give the serial engine's objectives.

The whole run uses single-threaded BLAS/OpenMP (set below, before numpy is
imported, unless already set), as the pool's and Dask's workers do: with
OpenBLAS's default threads the serial baseline itself ran 3x slower on this
2-core machine while another process held a core, which would flatter the
parallel engines.

Run: python benchmarks/bench_studies.py [--fleet-scenarios 1000] [--milp-scenarios 100] [--workers 2] [--publish]
Writes studies.json and studies.md to benchmarks/out/ (benchmarks/results/ with --publish).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from optfleet.studies.engines import SINGLE_THREADED, available_cores

for _name in SINGLE_THREADED:  # before numpy is imported (optfleet imports it when a study first runs)
    os.environ.setdefault(_name, "1")

import optfleet  # noqa: E402

from output import add_output_option, output_folder, write_results

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("serial", "local", "dask")


def run_study(instance: Path, method: str, rates: list[float], engine: str, workers: int) -> tuple[float, list]:
    """Wall seconds of one study and its objectives in scenario order."""
    start = time.perf_counter()
    frame = optfleet.sweep(instance, {"workload.rate_rps": rates}, method, engine=engine, workers=workers)
    return time.perf_counter() - start, frame["objective"].tolist()


def bench(label: str, instance: Path, method: str, rates: list[float], workers: int) -> list[dict]:
    rows, serial_s, serial_objectives = [], None, None
    for engine in ENGINES:
        seconds, objectives = run_study(instance, method, rates, engine, 1 if engine == "serial" else workers)
        if engine == "serial":
            serial_s, serial_objectives = seconds, objectives
        n = len(rates)
        used = 1 if engine == "serial" else workers
        startup_s = 0.0 if engine == "serial" else run_study(instance, method, rates[:used], engine, used)[0] - serial_s / n
        row = {"study": label, "engine": engine, "workers": used, "scenarios": n, "wall_s": seconds, "scenarios_per_s": n / seconds,
               "speedup": serial_s / seconds, "startup_s": startup_s, "overhead_ms_per_task": 1000 * (seconds * used - serial_s) / n,
               "same_objectives": objectives == serial_objectives}
        rows.append(row)
        print(f"{label:28s} {engine:6s} x{used}  {seconds:8.2f} s  {n / seconds:7.1f}/s  {row['speedup']:5.2f}x serial  "
              f"start-up {startup_s:5.2f} s  overhead {row['overhead_ms_per_task']:7.1f} ms/task  same: {row['same_objectives']}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--fleet-scenarios", type=int, default=1000, help="scenarios of the sweep-heuristic study (default 1000)")
    parser.add_argument("--milp-scenarios", type=int, default=100, help="scenarios of the MILP study (default 100)")
    parser.add_argument("--milp-instance", default="instances/fleet/toy_hetero.yaml", help="the MILP study's instance")
    parser.add_argument("--workers", type=int, default=available_cores(), help="workers of the pool and the cluster (default: cores)")
    args = parser.parse_args()
    fleet = ROOT / "instances/fleet/azure_2023.yaml"
    milp = ROOT / args.milp_instance
    rows = bench(f"azure_2023 sweep x{args.fleet_scenarios}", fleet, "sweep", [100.0 + 5 * i for i in range(args.fleet_scenarios)], args.workers)
    rows += bench(f"{milp.stem} milp x{args.milp_scenarios}", milp, "milp", [10.0 + i for i in range(args.milp_scenarios)], args.workers)
    machine = f"{platform.machine()}, {available_cores()} cores, Python {platform.python_version()}"
    columns = ["study", "engine", "workers", "wall s", "scenarios/s", "speed-up vs serial", "start-up s", "overhead ms/task", "same objectives"]
    cells = [[r["study"], r["engine"], str(r["workers"]), f"{r['wall_s']:.2f}", f"{r['scenarios_per_s']:.1f}", f"{r['speedup']:.2f}x",
              f"{r['startup_s']:.2f}", f"{r['overhead_ms_per_task']:.1f}", "yes" if r["same_objectives"] else "no"] for r in rows]
    write_results(output_folder(args), "studies", {"machine": machine, "rows": rows}, columns, cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
