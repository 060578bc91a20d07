"""The ``optfleet`` command line: ``solve | gap | explain | sweep | plot | simulate | validate | catalog``, generic over every problem kind,
``compress`` (the Compress-and-Route prompt compressor, optfleet.compress) and ``data list | fetch`` (public datasets
by name, optfleet.datasets).

A thin layer over the Python API (optfleet/api.py): the same functions, the
same answers.  Start-up imports only argparse; a command imports what it needs.

Exit codes: 0 success; 1 a valid instance with no feasible plan; 2 bad input
(one line naming the field or option and the value on stderr, nothing
written); 3 an internal error (one line; ``--debug`` shows the traceback).
With ``--json`` stdout is exactly one JSON document.  Text for people fits 120
columns (or a narrower terminal): a table hides its least important columns
and says which, long lines wrap; ``--wide`` shows every column unwrapped
(optfleet/tables.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from optfleet import __version__
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_OK, InfeasibleError, InputError


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad option reported as the CLI's other input errors are: one line on stderr, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="optfleet", description="Exact models and literature heuristics for LLM fleets and prompt caches.",
        epilog="exit codes: 0 ok, 1 no feasible plan, 2 bad input, 3 internal error",
    )
    parser.add_argument("--version", action="version", version=f"optfleet {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def instance_command(name: str, help_text: str, set_metavar: str = "FIELD=VALUE",
                         set_help: str = "override an instance field by its dotted path, e.g. --set workload.rate_rps=500 (repeatable; FIELD=null removes it)",
                         ) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("file", help="instance file (YAML or JSON); its kind decides the methods")
        command.add_argument("--preset", default=None, help="fleet instances: service-model preset (engine, the default; paper; or fleetsim_compatible)")
        command.add_argument("--set", action="append", default=[], metavar=set_metavar, help=set_help)
        command.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of tables")
        wide_option(command)
        command.add_argument("--quiet", action="store_true", help="no progress display on stderr")
        command.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
        return command

    def solver_options(command: argparse.ArgumentParser) -> None:
        command.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                             help="time limit of each exact solve (default: the instance's)")
        command.add_argument("--solver", default=None, help="solver of the exact models: highs (default) or an installed Pyomo solver")

    solve = instance_command("solve", "solve an instance: the chosen method and the kind's baselines, scored by one evaluator")
    solve.add_argument("--method", default=None, help="the method to run (default: the instance's solve.method, else the kind's; "
                       "validate --json lists an instance's methods)")
    solver_options(solve)
    solve.add_argument("--out", default=None, metavar="DIR", help="folder to write result.json and report.txt (and the kind's files)")

    gap = instance_command("gap", "every method's result and its gap to the exact method's proven bound")
    gap.add_argument("--methods", default=None, help="comma-separated methods (default: the kind's comparison set; "
                     "validate --json lists an instance's methods)")
    solver_options(gap)
    gap.add_argument("--out", default=None, metavar="DIR", help="folder to write gap.csv and gap.json")
    gap.add_argument("--plot", default=None, metavar="PNG", help="write a plot of the results, for kinds that have one (needs the plot extra)")

    explain = instance_command("explain", "sensitivity of the exact plan: binding constraints, shadow prices, ranges, "
                               "break-even prices, parametric curves and near-optimal alternatives")
    explain.add_argument("--curve", action="append", default=[], metavar="PARAMETER=START:STOP:N",
                         help="the exact optimum at N evenly spaced values from START to STOP, ends included (or at "
                              "PARAMETER=V1,V2,...), repeatable; parameters: fleet: rate_growth (x the request rate), "
                              "ttft_ms, percentile (of the TTFT target, in (0, 1)), rho_max, price:<GPU type> ($ per "
                              "GPU-hour); profiled_fleet: rate_growth, max_utilisation, price:<GPU type>; reserved: "
                              "percentile, rate_growth, unit_price ($ per unit-hour); pd_fleet: rate_growth, ttft_ms, "
                              "tpot_ms, rho_max, link_gb_per_s (the default KV link, GB/s), price:<GPU type>; routing "
                              "(threshold design): rate_growth, ttft_ms, percentile, epsilon, price:<GPU type>; caching "
                              "(hindsight LP): capacity_tokens, xi_ms; capacity_plan: rate_growth, price:<type>:reserved|"
                              "on_demand|spot ($ per GPU-hour), confidence:<type> (spot, in (0, 1]); prefix_cache (hindsight MILP): "
                              "capacity_blocks, xi_ms (TEL) or slo_ms (violations); placement (hindsight MILP): rate_growth, "
                              "prefill_ms_per_token:<server name>, slo_ttft_ms (objective ttft_excess)")
    explain.add_argument("--break-even", action="append", default=None, metavar="PARAMETER",
                         help="the value of PARAMETER (a --curve parameter) at which the exact plan changes, found by "
                              "re-solving (default: the kind's: fleet, profiled_fleet, routing, pd_fleet: the "
                              "second-cheapest GPU type's price; capacity_plan: the first reserved option's price; "
                              "reserved: the unit price; caching, prefix_cache, placement: none), repeatable")
    explain.add_argument("--within", type=float, default=5.0, metavar="PCT",
                         help="near-optimal alternatives (the plan without one GPU type, or with one pool fewer): "
                              "mark those costing at most PCT %% more than the optimum (default 5)")
    explain.add_argument("--no-alternatives", action="store_true", help="skip the near-optimal alternatives (each is an exact solve)")
    solver_options(explain)
    explain.add_argument("--plot", default=None, metavar="PNG", help="write the curves as a PNG (needs the plot extra)")

    sweep = instance_command(
        "sweep", "a scenario study: solve the instance for every combination of swept field values, one tidy table of results",
        set_metavar="FIELD=VALUES",
        set_help="sweep an instance field by its dotted path (repeatable; scenarios are the product of the fields' values): "
                 "a comma-separated list of YAML scalars, e.g. --set workload.rate_rps=100,1000,10000, or a range "
                 "start:stop:step, stop included when it lands on the grid, e.g. --set slo.ttft_p99_ms=200:1000:100")
    sweep.add_argument("--zip", action="store_true", help="pair the fields' values (the i-th of each) instead of their product")
    sweep.add_argument("--methods", default=None, help="comma-separated methods run on every scenario (default: the instance's gap set)")
    solver_options(sweep)
    sweep.add_argument("--engine", default="local", help="local (a process pool, default), serial (this process) or dask")
    sweep.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes of the local pool or the Dask LocalCluster (default: min(cores, scenarios)); local with 1 runs in this process; "
                            "a running --scheduler has its own")
    sweep.add_argument("--scheduler", default=None, metavar="ADDRESS", help="with --engine dask: a running scheduler, e.g. tcp://host:8786 (default: a LocalCluster)")
    sweep.add_argument("--connect-timeout-s", type=float, default=None, metavar="S",
                       help="with --scheduler: seconds to wait for the scheduler before giving up (default 10)")
    sweep.add_argument("--out", default=None, metavar="FILE",
                       help="results table, .parquet or .csv; a rerun with the same file skips the scenarios it holds")

    plot = sub.add_parser("plot", help="plot a sweep's results: a result column against a swept one",
                          description="plot a sweep's results: a result column against a swept one (needs the plot extra)")
    plot.add_argument("file", help="results table of optfleet sweep --out (.parquet or .csv)")
    plot.add_argument("--x", required=True, metavar="COLUMN", help="the column on the x axis, e.g. workload.rate_rps")
    plot.add_argument("--y", required=True, metavar="COLUMN", help="the column on the y axis, e.g. objective or gap_pct")
    plot.add_argument("--hue", default=None, metavar="COLUMN", help="one line per value of this column, e.g. method")
    plot.add_argument("--title", default=None, help="the plot's title (default: Y vs X)")
    plot.add_argument("--out", default=None, metavar="PNG", help="the PNG to write (default: the results file's name with .png)")
    plot.add_argument("--debug", action="store_true", help="show the traceback of an internal error")

    validate = instance_command("validate", "check an instance file and summarise it")
    del validate  # no options beyond the common ones

    simulate = instance_command("simulate", "simulate a plan (discrete events) and compare it with the evaluator, for kinds with a simulator")
    source = simulate.add_mutually_exclusive_group()
    source.add_argument("--plan", default=None, help="a plan file: plan.json (fleet, placement) or result.json of solve --out, or solve "
                                                     "--json output (placement: also a JSON list of server indices, request i -> server)")
    source.add_argument("--method", default=None, help="simulate this method's plan (default: the instance's solve.method)")
    simulate.add_argument("--requests", type=int, default=None, help="fleet: arrivals per replication (default 200000); pd_fleet: "
                                                                     "arrivals per replication and pool (default 40000); placement replays the instance's own workload")
    simulate.add_argument("--reps", type=int, default=None, help="replications, for 95 %% confidence intervals (default 3; a --plan "
                                                                 "of a placement instance is scored once)")
    simulate.add_argument("--seed", type=int, default=None, help="seed of the first replication (default 0; placement: replication i redraws the workload with this seed + i, in place of workload.seed)")
    simulate.add_argument("--mode", choices=["slots", "batching"], default=None,
                          help="fleet: slot servers, or continuous batching (default: the instance's slo.service_model)")
    simulate.add_argument("--out", default=None, metavar="DIR", help="folder to write simulation.json and report.txt")

    compress = sub.add_parser(
        "compress", help="compress a prompt to a token budget (Compress-and-Route's extractive compressor)",
        description="compress a prompt so that prompt + output tokens fit the budget B: the prompt is cut to T_c = B - L_out tokens "
                    "(needs the compress extra). Prints the text sent on stdout (a summary on stderr); exit 1 when a request "
                    "that does not fit is of a category never compressed (code, mixed)")
    compress.add_argument("file", help="the prompt, a UTF-8 text file")
    compress.add_argument("--budget-tokens", type=int, required=True, metavar="B", help="the short pool's token budget B per request")
    compress.add_argument("--output-tokens", type=int, default=0, metavar="L_OUT", help="the request's output tokens L_out (default 0)")
    compress.add_argument("--category", default="prose", help="the prompt's content category: prose (default), rag, cjk (compressed), "
                          "code or mixed (never compressed)")
    compress.add_argument("--exact", action="store_true", help="select the sentences with the knapsack MILP (HiGHS) instead of "
                          "the greedy fill, and report the greedy selection's gap to its bound")
    compress.add_argument("--time-limit", type=float, default=10.0, metavar="SECONDS", help="time limit of the MILP (default 10)")
    compress.add_argument("--json", action="store_true", help="print one JSON document on stdout (the text, its token accounts, fidelity)")
    compress.add_argument("--quiet", action="store_true", help="no summary on stderr")
    compress.add_argument("--debug", action="store_true", help="show the traceback of an internal error")

    catalog = sub.add_parser("catalog", help="list what each performance source knows (the GPU and model catalog first)",
                             description="list what each performance source (hardware.performance.source) knows: the GPU "
                                         "and model catalog with sources (roofline), aiconfigurator's database (measured), "
                                         "the files a fit reads (fit), the coefficients given directly (affine), the published "
                                         "profiles read (profile)")
    # optfleet.engine.sources.SOURCES and "all", spelled out: start-up imports only argparse (tests/test_catalog_sources.py runs each)
    catalog.add_argument("--source", choices=("roofline", "measured", "fit", "affine", "profile", "all"), default="all",
                         help="list one source only (default: all)")
    catalog.add_argument("--json", action="store_true", help="print one JSON document on stdout, keyed by source, instead of tables")
    wide_option(catalog)
    catalog.add_argument("--debug", action="store_true", help="show the traceback of an internal error")

    data = sub.add_parser("data", help="public datasets by name: list them, fetch one into the cache",
                          description="public LLM-serving traces by name: the one that ships with optfleet and those fetched "
                                      "into the user's cache (sha256-checked; the datasets extra); an instance's file field "
                                      "names one as dataset:NAME or dataset:NAME/PART")
    actions = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every dataset, file by file: size, licence, shipped / cached / not fetched",
                                 description="every dataset, file by file: size, licence, shipped / cached / not fetched, "
                                             "then each dataset's source and what to cite")
    fetch = actions.add_parser("fetch", help="download a dataset into the cache, each file checked against its sha256",
                               description="download a dataset into the cache (OPTFLEET_CACHE_DIR, else the user's cache "
                                           "folder), each file checked against its recorded sha256; a file that does not "
                                           "match is refused and nothing is kept (needs the datasets extra)")
    fetch.add_argument("name", metavar="NAME", help="a dataset (every file) or NAME/PART (one file), as optfleet data list names them")
    fetch.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    for action in (listing, fetch):
        action.add_argument("--json", action="store_true", help="print one JSON document on stdout")
        action.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    return parser


def wide_option(command: argparse.ArgumentParser) -> None:
    """``--wide``, for every command that prints tables."""
    command.add_argument("--wide", action="store_true",
                         help="show every table column and leave long lines whole (default: fit 120 columns, or a narrower terminal, "
                              "hiding the least important columns and naming them)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from optfleet.cli.commands import COMMANDS
        from optfleet.tables import display_width, output_width

        with output_width(display_width(getattr(args, "wide", False), sys.stdout)):
            return COMMANDS[args.command](args)
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
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal error: one line, the traceback with --debug
        if getattr(args, "debug", False):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback; please report it)", file=sys.stderr)
        return EXIT_INTERNAL
