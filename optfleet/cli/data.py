"""``optfleet data list`` and ``optfleet data fetch NAME``: the public datasets by name (optfleet.datasets)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from optfleet.errors import EXIT_OK

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
    """The table of files, what a status means, the cache folder, and each dataset's source and citation, fitted to
    the output width by the one renderer (optfleet/tables.py)."""
    from optfleet.tables import HIGH, KEY, LOW, Block, Column, Table, page

    rows = [{"dataset": d["name"], "part": f["part"], "file": f["file"],
             "size": "-" if f["size_bytes"] is None else f"{f['size_bytes'] / 1e6:,.2f}", "licence": d["licence"],
             "status": f["status"]} for d in datasets for f in d["files"]]
    columns = [Column("dataset", "dataset", keep=KEY), Column("part", "part", keep=KEY), Column("file", "file", keep=LOW),
               Column("size", "size MB", keep=HIGH), Column("licence", "licence", keep=HIGH), Column("status", "status", keep=KEY)]
    blocks: list[Block] = [Table(columns, rows), "", f"status: {STATUS_MEANINGS}",
                           f"cache: {cache_dir} (OPTFLEET_CACHE_DIR moves it); an instance's file field names a dataset as "
                           "dataset:NAME (every part) or dataset:NAME/PART", "sources (cite them when you use the data):"]
    blocks += [f"  {d['name']}: {d['title']}; {d['source_url']}; cite: {d['citation']}" for d in datasets]
    return page(blocks)


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
