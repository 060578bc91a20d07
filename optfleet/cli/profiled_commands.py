"""``optfleet solve``, ``gap`` and ``validate`` on ``kind: profiled_fleet`` instances (dispatched from commands.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from optfleet.errors import EXIT_INFEASIBLE, EXIT_OK, InfeasibleError, InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.profiled.gap import gap_rows, savings_vs_best_single
from optfleet.profiled.problem import prepare_profiled
from optfleet.profiled.solve import solve_profiled
from optfleet.report.profiled_text import render_gap, render_plan


def _dump(data: object) -> str:
    return json.dumps(data, indent=2, default=float)


def profiled_solve_command(args: argparse.Namespace, loaded: LoadedInstance) -> int:
    """The exact mixed fleet (the profiled model has one method: its MILP)."""
    if args.method not in (None, "milp"):
        raise InputError("--method", args.method, "a profiled_fleet instance is solved by its MILP; use optfleet gap for the baselines")
    problem = prepare_profiled(loaded.spec)
    try:
        result = solve_profiled(problem)
    except InfeasibleError as exc:
        print(f"infeasible: {exc}")
        return EXIT_INFEASIBLE
    e = result.evaluation
    body = {
        "instance": problem.name, "kind": "profiled_fleet", "solver": result.report.to_dict(), "plan": e.plan.to_dict(problem),
        "cost_per_hour": e.cost_per_hour, "served_rps": e.served_rps, "demand_rps": e.demand_rps, "feasible": e.feasible, "violations": list(e.violations),
    }
    text = render_plan(problem, result.evaluation, result.report)
    print(_dump(body) if args.json else text)
    if args.out is not None:
        _write(args.out, {"result.json": _dump(body), "report.txt": text})
    return EXIT_OK


def profiled_gap_command(args: argparse.Namespace, loaded: LoadedInstance) -> int:
    """The mixed MILP, the exact best fleet of each single type and the greedy rule, side by side."""
    if args.methods is not None or args.policies is not None or args.plot is not None:
        raise InputError("--methods", args.methods, "a profiled_fleet gap always runs milp, every single type and the greedy rule")
    problem = prepare_profiled(loaded.spec)
    rows = gap_rows(problem)
    savings = savings_vs_best_single(rows)
    body = {"instance": problem.name, "kind": "profiled_fleet", "rows": rows, "mixed_vs_best_single": savings}
    print(_dump(body) if args.json else f"instance {problem.name}: gap = (cost - MILP bound) / MILP bound\n\n" + render_gap(rows, savings))
    if args.out is not None:
        _write(args.out, {"gap.csv": pd.DataFrame(rows).to_csv(index=False), "gap.json": _dump(body)})
    return EXIT_OK if any(r["cost_per_hour"] is not None for r in rows) else EXIT_INFEASIBLE


def profiled_validate_command(args: argparse.Namespace, loaded: LoadedInstance) -> int:
    problem = prepare_profiled(loaded.spec)
    print(f"{args.file}: valid profiled_fleet instance '{problem.name}': {problem.rate_rps:g} req/s, "
          f"{len(problem.demand_buckets)} buckets, GPU types {', '.join(problem.gpu_names)}, {problem.splitting}")
    return EXIT_OK


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text.rstrip("\n") + "\n")
