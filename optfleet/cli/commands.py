"""Implementations of the CLI sub-commands (argument parsing lives in __init__)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from optfleet.cli.caching_commands import caching_gap_command, caching_validate_command
from optfleet.cli.profiled_commands import profiled_gap_command, profiled_solve_command, profiled_validate_command
from optfleet.errors import EXIT_INFEASIBLE, EXIT_OK, InfeasibleError, InputError
from optfleet.fleet.evaluator import evaluate
from optfleet.fleet.plan import Plan
from optfleet.fleet.problem import FleetProblem, prepare
from optfleet.hardware import catalog_rows
from optfleet.heuristics.sweep import sweep
from optfleet.instance import load_instance
from optfleet.instance.loader import LoadedInstance, read_document
from optfleet.report.fleet_text import render_gap, render_run, render_simulation
from optfleet.simulate import simulate_plan
from optfleet.simulate.compare import comparison_table
from optfleet.runs import METHODS, FleetRun, gap_rows, run_fleet, run_method, run_to_dict


def _dump(data: object) -> str:
    return json.dumps(data, indent=2, default=float)


def _fleet_only(loaded: LoadedInstance, command: str) -> None:
    """``simulate`` (and ``solve`` for caching) apply to queueing fleets; say what to run instead."""
    if loaded.spec.kind != "fleet":
        instead = "optfleet gap FILE" if loaded.spec.kind == "caching" else "optfleet solve FILE or optfleet gap FILE"
        raise InputError("kind", loaded.spec.kind, f"optfleet {command} applies to kind fleet; for this kind run {instead}")


def solve_command(args: argparse.Namespace) -> int:
    loaded = load_instance(args.file, preset=args.preset)
    if loaded.spec.kind == "profiled_fleet":
        return profiled_solve_command(args, loaded)
    _fleet_only(loaded, "solve")
    problem = prepare(loaded)
    method = args.method or loaded.spec.solve.method
    run = run_fleet(problem, method)
    result = run_to_dict(run)
    text = render_run(run)
    print(_dump(result) if args.json else text)
    if args.out is not None:
        _write_outputs(args.out, problem, run, result, text)
    return EXIT_OK if run.main.evaluation is not None else EXIT_INFEASIBLE


def _write_outputs(folder: Path, problem: FleetProblem, run: FleetRun, result: dict, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(_dump(result) + "\n")
    (folder / "report.txt").write_text(text + "\n")
    if run.main.evaluation is not None:
        (folder / "plan.json").write_text(_dump(run.main.evaluation.plan.to_dict()) + "\n")
    if run.chosen == "sweep":
        sweep(problem).candidates.to_csv(folder / "candidates.csv", index=False)


def gap_command(args: argparse.Namespace) -> int:
    loaded = load_instance(args.file, preset=args.preset)
    if loaded.spec.kind == "caching":
        return caching_gap_command(args, loaded)
    if loaded.spec.kind == "profiled_fleet":
        return profiled_gap_command(args, loaded)
    if args.plot is not None or args.policies is not None:
        raise InputError("--plot" if args.plot is not None else "--policies", str(args.plot or args.policies), "applies to caching instances only")
    method_list = ",".join(METHODS) if args.methods is None else args.methods
    methods = [m.strip() for m in method_list.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise InputError("--methods", args.methods, f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    problem = prepare(loaded)
    run = run_fleet(problem, methods[0], methods)
    rows = gap_rows(run)
    milp = run.results.get("milp")
    header = f"instance {problem.name}: gap = (cost - MILP bound) / MILP bound"
    if milp is not None and milp.solve_report is not None:
        header += f"; MILP {milp.solve_report.summary}"
        if milp.iterations and milp.iterations > 1:
            header += f" (the last of {milp.iterations} solves, after Erlang-table refreshes)"
    elif milp is not None:
        header += f"; MILP: {milp.infeasible_reason}"
    else:
        header += " (no MILP run: gap to the best plan found)"
    print(_dump({"instance": problem.name, "rows": rows}) if args.json else header + "\n\n" + render_gap(rows))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "gap.csv", index=False)
        (args.out / "gap.json").write_text(_dump({"instance": problem.name, "rows": rows}) + "\n")
    return EXIT_OK if any(r.evaluation is not None for r in run.results.values()) else EXIT_INFEASIBLE


def simulate_command(args: argparse.Namespace) -> int:
    loaded = load_instance(args.file, preset=args.preset)
    _fleet_only(loaded, "simulate")
    problem = prepare(loaded)
    if args.plan is not None:
        plan = Plan.from_dict(read_document(args.plan).get("plan", read_document(args.plan)))
    else:
        outcome = run_method(problem, args.method or "sweep")
        if outcome.evaluation is None:
            raise InfeasibleError(f"{outcome.method}: {outcome.infeasible_reason}")
        plan = outcome.evaluation.plan
    evaluation = evaluate(problem, plan)
    progress = _progress_printer("simulating") if sys.stderr.isatty() and not args.json else None
    result = simulate_plan(problem, plan, requests=args.requests, reps=args.reps, seed=args.seed, mode=args.mode, progress=progress)
    table = comparison_table(evaluation, result)
    if args.json:
        print(_dump({
            "instance": problem.name, "plan": plan.to_dict(), "mode": result.mode, "requests": result.requests,
            "reps": result.reps, "seed": result.seed, "warmup_share": result.warmup_share,
            "metrics": {scope: {m: {"mean": v[0], "ci95": v[1]} for m, v in values.items()} for scope, values in result.metrics.items()},
            "comparison": table.to_dict(orient="records"),
        }))
        return EXIT_OK
    print(f"instance {problem.name}: plan {plan.to_dict()}")
    print(f"{result.mode} mode, {result.requests} requests x {result.reps} replications (seed {result.seed}); mean +- 95 % half-width")
    print()
    print(render_simulation(result))
    print()
    print("analytic (evaluator) vs simulated:")
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    return EXIT_OK


def _progress_printer(label: str):
    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\r{label}: replication {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show


def validate_command(args: argparse.Namespace) -> int:
    loaded = load_instance(args.file, preset=args.preset)
    if loaded.spec.kind == "caching":
        return caching_validate_command(args, loaded)
    if loaded.spec.kind == "profiled_fleet":
        return profiled_validate_command(args, loaded)
    problem = prepare(loaded)
    mix = problem.mix
    long_pool = problem.pool(problem.long_window_tokens)
    print(f"{args.file}: valid {loaded.spec.kind} instance '{problem.name}' (preset {loaded.spec.preset})")
    print(f"  workload: {problem.rate_rps:g} req/s, {len(mix.prob)} exact (L_in, L_out) atoms, "
          f"mean L_total {mix.mean_total_tokens():,.0f}, max {mix.max_total_tokens:,} tokens")
    print(f"  hardware: {long_pool.gpu}, {long_pool.slots_per_gpu} slots/GPU at the long window {problem.long_window_tokens}, "
          f"${long_pool.cost_per_gpu_hour:g}/instance-hour")
    print(f"  sweep: {len(problem.boundary_candidates)} boundaries x {len(problem.gammas)} gammas; "
          f"boundaries {', '.join(str(b) for b in problem.boundary_candidates)}")
    if problem.heterogeneous:
        print(f"  gpu catalog: {len(problem.options)} configurations ({', '.join(o.label for o in problem.options)}) "
              f"at windows {', '.join(str(w) for w in problem.option_windows)}")
        for reason in problem.skipped_options:
            print(f"    left out: {reason}")
    return EXIT_OK


def catalog_command(args: argparse.Namespace) -> int:
    rows = catalog_rows()
    if args.json:
        print(_dump(rows))
        return EXIT_OK
    for kind in ("gpu", "model"):
        frame = pd.DataFrame([r for r in rows if r["kind"] == kind]).drop(columns=["kind"])
        print(f"{kind.upper()}S")
        print(frame.drop(columns=["source"]).to_string(index=False, float_format=lambda v: f"{v:g}"))
        print("sources:")
        for name, source in zip(frame["name"], frame["source"], strict=True):
            print(f"  {name}: {source}")
        print()
    return EXIT_OK
