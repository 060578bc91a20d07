"""Where a benchmark writes: ``benchmarks/out/`` (untracked) by default, ``benchmarks/results/`` with ``--publish``.

The README quotes the committed files in ``benchmarks/results/``; running a benchmark to look at the
numbers never rewrites them (so it never breaks ``tests/test_readme.py``).  ``--publish`` refreshes them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "benchmarks" / "results"
SCRATCH = ROOT / "benchmarks" / "out"


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--publish", action="store_true",
                        help="write benchmarks/results/ (the files the README quotes) instead of benchmarks/out/")


def output_folder(args: argparse.Namespace) -> Path:
    """The folder to write to (created), announced on stdout."""
    folder = PUBLISHED if args.publish else SCRATCH
    folder.mkdir(parents=True, exist_ok=True)
    print(f"writing results to {folder.relative_to(ROOT)}/" + ("" if args.publish else " (use --publish to refresh benchmarks/results/)"))
    return folder
