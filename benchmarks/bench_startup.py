"""Benchmark: the command line's start-up, against the bare interpreter's, in one run.

Each command runs ``--repeat`` times in a fresh process (``python -m optfleet
...``, the same code as the ``optfleet`` script); the median wall time is
compared with the median of ``python -c pass`` measured in the same run.  The
target (issue "One shape for every problem kind"): ``--help`` and ``validate``
under 0.5 s.  A caching instance reads its conversation trace with pandas,
which alone costs about a quarter of a second here.

Run: python benchmarks/bench_startup.py [--repeat 7] [--publish]
Writes startup.json and startup.md to benchmarks/out/ (benchmarks/results/ with --publish).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from output import add_output_option, output_folder

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5
COMMANDS = (
    ("--help", ["--help"]),
    ("--version", ["--version"]),
    ("validate fleet", ["validate", "instances/fleet/azure_2023.yaml"]),
    ("validate profiled_fleet", ["validate", "instances/profiled/melange_example.yaml"]),
    ("validate caching", ["validate", "instances/caching/tiny.yaml"]),
)


def median_seconds(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_option(parser)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    baseline = median_seconds([sys.executable, "-c", "pass"], args.repeat)
    print(f"{'python -c pass':28s} {baseline:.3f} s (baseline)")
    rows = []
    for label, command in COMMANDS:
        seconds = median_seconds([sys.executable, "-m", "optfleet", *command], args.repeat)
        rows.append({"command": label, "seconds": seconds, "ratio_to_python": seconds / baseline, "meets_target": seconds <= TARGET_S})
        print(f"{'optfleet ' + label:28s} {seconds:.3f} s  {seconds / baseline:5.1f}x python  {'met' if seconds <= TARGET_S else 'MISSED'}")
    results = output_folder(args)
    (results / "startup.json").write_text(json.dumps({"python_seconds": baseline, "target_s": TARGET_S, "rows": rows}, indent=2) + "\n")
    lines = [f"| command | median s | x bare python ({baseline:.3f} s) | under {TARGET_S} s |", "|---|---|---|---|"]
    lines += [f"| optfleet {r['command']} | {r['seconds']:.3f} | {r['ratio_to_python']:.1f} | {'yes' if r['meets_target'] else 'no'} |" for r in rows]
    (results / "startup.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
