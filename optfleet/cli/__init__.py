"""The ``optfleet`` command line: solve, gap, simulate, validate, catalog.

Exit codes: 0 success; 1 a valid problem with no feasible plan; 2 bad input
(one line naming the field and value on stderr, nothing written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from optfleet.caching.policies import POLICIES as CACHING_POLICIES
from optfleet.caching.problem import HINDSIGHT_POLICIES
from optfleet.cli.commands import catalog_command, gap_command, simulate_command, solve_command, validate_command
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK, InfeasibleError, InputError
from optfleet.runs import METHODS
from optfleet.instance.presets import PRESETS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optfleet", description="Exact models and literature heuristics for LLM fleets and caches.")
    sub = parser.add_subparsers(dest="command", required=True)

    solve = sub.add_parser("solve", help="solve an instance file and compare every baseline")
    solve.add_argument("file", type=Path, help="instance file (YAML or JSON)")
    solve.add_argument("--method", choices=sorted(METHODS), default=None, help="method to run (default: the instance's solve.method, else sweep)")
    solve.add_argument("--preset", choices=sorted(PRESETS), default=None, help="service-model preset, overriding the instance's")
    solve.add_argument("--json", action="store_true", help="print a machine-readable result instead of tables")
    solve.add_argument("--out", type=Path, default=None, help="folder to write result.json, plan.json, report.txt (and candidates.csv for the sweep)")

    gap = sub.add_parser("gap", help="every method's plan (fleet) or caching policy (caching) and its gap to the exact optimum")
    gap.add_argument("file", type=Path)
    gap.add_argument("--methods", default=None, help=f"fleet instances: comma-separated, from {', '.join(METHODS)} (default: all)")
    gap.add_argument("--policies", default=None, help="caching instances: comma-separated labels of the instance's policies or policy names "
                     f"({', '.join([*CACHING_POLICIES, *HINDSIGHT_POLICIES])}; default: the instance's list)")
    gap.add_argument("--no-hindsight", action="store_true", help="caching instances: skip the hindsight LP (gaps then refer to Tail-Optimized Belady)")
    gap.add_argument("--plot", type=Path, default=None, help="caching instances: write a PNG of each policy's TTFT CDF (needs matplotlib, the 'plot' extra)")
    gap.add_argument("--preset", choices=sorted(PRESETS), default=None, help="fleet instances: service-model preset")
    gap.add_argument("--json", action="store_true")
    gap.add_argument("--out", type=Path, default=None, help="folder to write gap.csv and gap.json")

    validate = sub.add_parser("validate", help="check an instance file and summarise it")
    validate.add_argument("file", type=Path)
    validate.add_argument("--preset", choices=sorted(PRESETS), default=None)

    simulate = sub.add_parser("simulate", help="simulate a plan (discrete events) and compare it with the evaluator")
    simulate.add_argument("file", type=Path, help="instance file (YAML or JSON)")
    source = simulate.add_mutually_exclusive_group()
    source.add_argument("--plan", type=Path, default=None, help="plan.json written by `optfleet solve --out`")
    source.add_argument("--method", choices=sorted(METHODS), default=None, help="plan to simulate (default: sweep)")
    simulate.add_argument("--preset", choices=sorted(PRESETS), default=None)
    simulate.add_argument("--requests", type=int, default=200_000, help="arrivals per replication (default 200000)")
    simulate.add_argument("--reps", type=int, default=3, help="replications, for 95 %% confidence intervals (default 3)")
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--mode", choices=["slots", "batching"], default="slots")
    simulate.add_argument("--json", action="store_true")

    catalog = sub.add_parser("catalog", help="list the GPU and model catalog with sources")
    catalog.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "solve":
            return solve_command(args)
        if args.command == "validate":
            return validate_command(args)
        if args.command == "simulate":
            return simulate_command(args)
        if args.command == "gap":
            return gap_command(args)
        return catalog_command(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except InfeasibleError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INFEASIBLE
    except BrokenPipeError:
        # The reader (e.g. `| head`) closed the pipe: stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK

