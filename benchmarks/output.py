"""Where a benchmark writes: ``benchmarks/out/`` (untracked) by default, ``benchmarks/results/`` with ``--publish``.

The documentation quotes the committed files in ``benchmarks/results/``; running a benchmark to look at the
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
                        help="write benchmarks/results/ (the files the documentation quotes) instead of benchmarks/out/")


def output_folder(args: argparse.Namespace) -> Path:
    """The folder to write to (created), announced on stdout."""
    folder = PUBLISHED if args.publish else SCRATCH
    folder.mkdir(parents=True, exist_ok=True)
    print(f"writing results to {folder.relative_to(ROOT)}/" + ("" if args.publish else " (use --publish to refresh benchmarks/results/)"))
    return folder


def write_results(folder: Path, stem: str, data: dict[str, Any], columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """``<stem>.json`` (``data``) and ``<stem>.md`` (the Markdown table of ``columns`` and ``rows`` the documentation quotes)."""
    (folder / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    (folder / f"{stem}.md").write_text("\n".join(lines) + "\n")


def machine_speed() -> dict[str, float]:
    """This machine's speed in the same run, so that results of different days compare (on this 2-core machine the
    same code has run 2.7x slower on some days): a pure-Python loop of 10^6 integer additions (ms) and
    ``np.argmin`` over 100 values (us), each the best of five."""
    import timeit

    import numpy as np

    values = np.random.default_rng(0).random(100)
    loop_s = min(timeit.repeat("total = 0\nfor i in range(1_000_000): total += i", number=1, repeat=5))
    argmin_s = min(timeit.repeat(lambda: np.argmin(values), number=10_000, repeat=5)) / 10_000
    return {"python_loop_1e6_ms": 1e3 * loop_s, "np_argmin_100_us": 1e6 * argmin_s}


def machine_speed_text(speed: dict[str, float]) -> str:
    return (f"a pure-Python loop of 10^6 additions {speed['python_loop_1e6_ms']:.1f} ms, np.argmin over 100 values "
            f"{speed['np_argmin_100_us']:.2f} us")


def gap_pct(gap: float) -> str:
    """A relative gap as a percentage with two significant digits; rounding noise below 1e-9 reads ``0 %``."""
    return f"{100 * gap:.2g} %" if abs(gap) >= 1e-9 else "0 %"
