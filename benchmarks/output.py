"""Where a benchmark writes: ``benchmarks/out/`` (untracked) by default, ``benchmarks/results/`` with ``--publish``.

The README quotes the committed files in ``benchmarks/results/``; running a benchmark to look at the
numbers never rewrites them (so it never breaks ``tests/test_readme.py``).  ``--publish`` refreshes them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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


def write_results(folder: Path, stem: str, data: dict[str, Any], columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """``<stem>.json`` (``data``) and ``<stem>.md`` (the Markdown table of ``columns`` and ``rows`` the README quotes)."""
    (folder / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    (folder / f"{stem}.md").write_text("\n".join(lines) + "\n")


def gap_pct(gap: float) -> str:
    """A relative gap as a percentage with two significant digits; rounding noise below 1e-9 reads ``0 %``."""
    return f"{100 * gap:.2g} %" if abs(gap) >= 1e-9 else "0 %"
