"""``optfleet gap`` and ``optfleet validate`` on ``kind: caching`` instances (dispatched from commands.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from optfleet.caching.gap import Progress, gap_rows, gap_to_dict, run_caching_gap
from optfleet.caching.problem import prepare_caching, select_policies
from optfleet.errors import EXIT_OK, InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.report.caching_plot import plot_ttft_cdf, require_matplotlib
from optfleet.report.caching_text import render_gap, render_problem

# Progress lines start once a run has taken this long (short runs stay quiet).
PROGRESS_AFTER_S = 2.0


def caching_gap_command(args: argparse.Namespace, loaded: LoadedInstance) -> int:
    """Every policy at every capacity, with the hindsight optimum; tables, JSON, files, plot."""
    if args.methods is not None:
        raise InputError("--methods", args.methods, "selects fleet methods; for a caching instance use --policies")
    if args.plot is not None:
        require_matplotlib("--plot", args.plot)
    problem = prepare_caching(loaded)
    policies = select_policies(problem, args.policies)
    comparisons = run_caching_gap(problem, policies, hindsight=False if args.no_hindsight else None, progress=_progress_after(PROGRESS_AFTER_S))
    result = gap_to_dict(problem, comparisons)
    print(json.dumps(result, indent=2, default=float) if args.json else render_gap(problem, comparisons))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(gap_rows(comparisons)).to_csv(args.out / "gap.csv", index=False)
        (args.out / "gap.json").write_text(json.dumps(result, indent=2, default=float) + "\n")
    if args.plot is not None:
        plot_ttft_cdf(problem, comparisons, Path(args.plot))
    return EXIT_OK


def caching_validate_command(args: argparse.Namespace, loaded: LoadedInstance) -> int:
    """Load (or generate) the trace and summarise the instance."""
    problem = prepare_caching(loaded)
    print(f"{args.file}: valid caching instance '{problem.name}'")
    print(render_problem(problem))
    return EXIT_OK


def _progress_after(delay_s: float) -> Progress:
    """A progress printer for stderr that stays silent until ``delay_s`` has passed."""
    start = time.perf_counter()
    tty = sys.stderr.isatty()

    def show(label: str, done: int, total: int) -> None:
        if time.perf_counter() - start < delay_s:
            return
        line = f"gap: {done}/{total} schedules; {label}"
        if tty:
            print(f"\r\x1b[K{line}", end="\n" if done == total else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return show
