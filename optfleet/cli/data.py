"""``optfleet data list`` and ``optfleet data fetch NAME``: the public datasets by name (optfleet.datasets)."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from typing import Any

from optfleet.errors import EXIT_OK

WIDTH = 118  # the text fits a 120-column terminal
STATUS_MEANINGS = ("shipped: in the package; cached: fetched, sha256 checked; not fetched: optfleet data fetch NAME; "
                   "sha256 unknown: optfleet does not fetch it, download it from its URL yourself")


def data_command(args: argparse.Namespace) -> int:
    return _ACTIONS[args.data_command](args)


def list_command(args: argparse.Namespace) -> int:
    """Every dataset, one row per file, with its status here; ``--json``: one document with every fact."""
    from optfleet.cli.commands import dump
    from optfleet.datasets.store import datasets_cache, listing

    datasets = listing()
    print(dump({"cache_dir": str(datasets_cache()), "datasets": datasets}) if args.json else _list_text(datasets, str(datasets_cache())))
    return EXIT_OK


def _list_text(datasets: list[dict[str, Any]], cache_dir: str) -> str:
    """The table of files, what a status means, the cache folder, and each dataset's source and citation."""
    import pandas as pd

    from optfleet.tables import render

    rows = [{"dataset": d["name"], "part": f["part"], "file": f["file"],
             "size MB": "-" if f["size_bytes"] is None else f"{f['size_bytes'] / 1e6:,.2f}", "licence": d["licence"],
             "status": f["status"]} for d in datasets for f in d["files"]]
    lines = [render(pd.DataFrame(rows)), ""]
    lines += textwrap.wrap(f"status: {STATUS_MEANINGS}", WIDTH, subsequent_indent="  ")
    lines += textwrap.wrap(f"cache: {cache_dir} (OPTFLEET_CACHE_DIR moves it); an instance's file field names a dataset as "
                           "dataset:NAME (every part) or dataset:NAME/PART", WIDTH, subsequent_indent="  ")
    lines.append("sources (cite them when you use the data):")
    for d in datasets:
        lines += textwrap.wrap(f"{d['name']}: {d['title']}; {d['source_url']}; cite: {d['citation']}", WIDTH,
                               initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def fetch_command(args: argparse.Namespace) -> int:
    """Fetch NAME (or NAME/PART) into the cache; one line per file (``--json``: one document)."""
    from optfleet.cli.commands import dump
    from optfleet.datasets.fetch import fetch
    from optfleet.progress import progress_display

    fetched = fetch(args.name, progress=progress_display("data fetch", quiet=args.quiet, unit="kB"))
    if args.json:
        print(dump({"name": args.name, "files": [f.to_dict() for f in fetched]}))
        return EXIT_OK
    what = {"shipped": "ships with optfleet, nothing to fetch", "cached": "already in the cache, sha256 checked",
            "downloaded": "downloaded, sha256 checked"}
    for f in fetched:
        print(f"{f.dataset}/{f.part}: {what[f.action]}, {f.size_bytes:,} bytes: {f.path}")
    return EXIT_OK


_ACTIONS: dict[str, Callable[[argparse.Namespace], int]] = {"list": list_command, "fetch": fetch_command}
