"""The CLI's commands, each a thin layer over the Python API (argument parsing lives in __init__)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optfleet import api
from optfleet.errors import EXIT_INFEASIBLE, EXIT_OK, InputError
from optfleet.instance.documents import parse_yaml
from optfleet.progress import progress_display


def dump(data: Any) -> str:
    """One JSON document (no NaN or infinity: results are made JSON-safe before)."""
    return json.dumps(data, indent=2, allow_nan=False)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Instance overrides from the options: ``--preset``, ``--time-limit``, ``--solver`` and every ``--set``."""
    import yaml

    chosen: dict[str, Any] = {"preset": args.preset, "time_limit_s": getattr(args, "time_limit", None), "solver": getattr(args, "solver", None)}
    for item in args.set:
        field, sep, text = item.partition("=")
        if not sep or not field.strip() or not text.strip():
            raise InputError("--set", item, "expected FIELD=VALUE, e.g. --set workload.rate_rps=500")
        if any(not part for part in field.strip().split(".")):
            raise InputError("--set", item, "the field path has an empty part (two dots, or a dot at an end)")
        try:
            chosen[field.strip()] = parse_yaml(text, field.strip())
        except (yaml.YAMLError, RecursionError):
            raise InputError("--set", item, "the value is not valid YAML") from None
    return chosen


def out_folder(option: str, value: str | None) -> Path | None:
    """The ``--out`` folder, refused before any work if it is an existing file or cannot be written."""
    if value is None:
        return None
    folder = Path(value)
    if folder.exists() and not folder.is_dir():
        raise InputError(option, value, "is an existing file; give a folder (it is created if missing)")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not _can_create_in(existing):
        raise InputError(option, value, f"cannot be written here ({existing} is not a writable folder)")
    return folder


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried: permission bits do not tell for root, /proc, read-only mounts)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def write_files(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text.rstrip("\n") + "\n")


def solve_command(args: argparse.Namespace) -> int:
    folder = out_folder("--out", args.out)
    outcome = api.solve(args.file, args.method, progress=progress_display("solve", quiet=args.quiet), **overrides(args))
    text, data = outcome.text(), outcome.to_dict()
    print(dump(data) if args.json else text)
    if folder is not None:
        kind = outcome.loaded.kind
        write_files(folder, {"result.json": dump(data), "report.txt": text, **(kind.solve_files(outcome) if kind.solve_files else {})})
    return EXIT_OK if outcome.has_feasible_plan else EXIT_INFEASIBLE


def gap_command(args: argparse.Namespace) -> int:
    folder = out_folder("--out", args.out)
    methods = None if args.methods is None else [m.strip() for m in args.methods.split(",") if m.strip()]
    if methods is not None and not methods:
        raise InputError("--methods", args.methods, "name at least one method")
    loaded = api.load(args.file, **overrides(args))
    if args.plot is not None:
        _check_plot(loaded, args.plot)
    outcome = api.run_gap(loaded, methods, progress=progress_display("gap", quiet=args.quiet))
    data = outcome.to_dict()
    print(dump(data) if args.json else outcome.text())
    if folder is not None:
        write_files(folder, {"gap.csv": outcome.frame().to_csv(index=False), "gap.json": dump(data)})
    if args.plot is not None:
        loaded.kind.plot(outcome, Path(args.plot))
    return EXIT_OK if outcome.has_feasible_plan else EXIT_INFEASIBLE


def _check_plot(loaded: api.Loaded, path: str) -> None:
    """``--plot`` needs a kind with a plot, a ``.png`` file name and matplotlib (the ``plot`` extra): refused before any work."""
    if loaded.kind.plot is None:
        raise InputError("--plot", path, f"kind {loaded.kind.name} has no plot")
    if Path(path).is_dir() or Path(path).suffix.lower() != ".png":
        raise InputError("--plot", path, "give the name of a .png file to write")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("--plot", path, "plotting needs matplotlib: pip install 'optfleet[plot]'") from None
    out_folder("--plot", str(Path(path).parent))


def validate_command(args: argparse.Namespace) -> int:
    validation = api.validate(args.file, **overrides(args))
    print(dump(validation.to_dict()) if args.json else f"{args.file}: {validation.text}")
    return EXIT_OK


def simulate_command(args: argparse.Namespace) -> int:
    folder = out_folder("--out", args.out)
    outcome = api.simulate(args.file, method=args.method, plan=args.plan, progress=progress_display("simulate", quiet=args.quiet),
                           requests=args.requests, reps=args.reps, seed=args.seed, mode=args.mode, **overrides(args))
    data, text = outcome.to_dict(), outcome.text()
    print(dump(data) if args.json else text)
    if folder is not None:
        write_files(folder, {"simulation.json": dump(data), "report.txt": text})
    return EXIT_OK


def catalog_command(args: argparse.Namespace) -> int:
    import pandas as pd

    from optfleet.hardware import catalog_rows

    rows = catalog_rows()
    if args.json:
        print(dump(rows))
        return EXIT_OK
    for kind in ("gpu", "model"):
        frame = pd.DataFrame([r for r in rows if r["kind"] == kind]).drop(columns=["kind"])
        print(f"{kind.upper()}S")
        print(frame.drop(columns=["source"]).to_string(index=False, float_format=lambda v: f"{v:g}", na_rep="-"))
        print("sources:")
        for name, source in zip(frame["name"], frame["source"], strict=True):
            print(f"  {name}: {source}")
        print()
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "solve": solve_command,
    "gap": gap_command,
    "validate": validate_command,
    "simulate": simulate_command,
    "catalog": catalog_command,
}
