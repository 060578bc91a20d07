"""The CLI's commands, each a thin layer over the Python API (argument parsing lives in __init__)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optfleet import api
from optfleet.cli.data import data_command
from optfleet.errors import EXIT_INFEASIBLE, EXIT_OK, InputError
from optfleet.instance.loader import REMOVE
from optfleet.progress import progress_display
from optfleet.studies.overrides import split_assignment, yaml_value


def dump(data: Any) -> str:
    """One JSON document (no NaN or infinity: results are made JSON-safe before)."""
    return json.dumps(data, indent=2, allow_nan=False)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Instance overrides from the options: ``--preset``, ``--time-limit``, ``--solver`` and every ``--set``
    (``--set FIELD=null`` removes the field, so its default applies)."""
    chosen: dict[str, Any] = option_overrides(args)
    for item in args.set:
        field, text = split_assignment(item, "FIELD=VALUE, e.g. --set workload.rate_rps=500")
        value = yaml_value(text, field, item)
        chosen[field] = REMOVE if value is None else value
    return chosen


def option_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Instance overrides from the generic options ``--preset``, ``--time-limit`` and ``--solver`` (None when not given)."""
    return {"preset": args.preset, "time_limit_s": getattr(args, "time_limit", None), "solver": getattr(args, "solver", None)}


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
    chosen = overrides(args)
    method = args.method if args.method is not None else chosen.pop("method", None)  # --set method=M (the kind's default-method field) chooses as --method does
    outcome = api.solve(args.file, method, progress=progress_display("solve", quiet=args.quiet), **chosen)
    text, data = outcome.text(), outcome.to_dict()
    print(dump(data) if args.json else text)
    if folder is not None:
        kind = outcome.loaded.kind
        write_files(folder, {"result.json": dump(data), "report.txt": text, **(kind.solve_files(outcome) if kind.solve_files else {})})
    return EXIT_OK if outcome.has_feasible_plan else EXIT_INFEASIBLE


def gap_command(args: argparse.Namespace) -> int:
    folder = out_folder("--out", args.out)
    methods = methods_option(args.methods)
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


def explain_command(args: argparse.Namespace) -> int:
    """``optfleet explain FILE``: optfleet/sensitivity (every option is checked before any solve)."""
    from optfleet.sensitivity import report
    from optfleet.sensitivity.api import explain, explainer_of

    loaded = api.load(args.file, **overrides(args))
    if args.plot is not None:
        png_file("--plot", args.plot)
        if not args.curve and not explainer_of(loaded).default_curves:
            raise InputError("--plot", args.plot, f"plots the curves, and this {loaded.kind.name} instance has none by default: give at least one --curve")
    result = explain(loaded, curves=args.curve, break_even_of=args.break_even, within_pct=args.within, near_optimal=not args.no_alternatives,
                     progress=progress_display("explain", quiet=args.quiet))
    print(dump(report.to_dict(result)) if args.json else report.text(result))
    if args.plot is not None:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)  # png_file checked that it can be created
        report.plot(result, Path(args.plot))
    return EXIT_OK


def methods_option(value: str | None) -> list[str] | None:
    """``--methods M1,M2``: the names (None when not given; naming none is refused)."""
    if value is None:
        return None
    methods = [m.strip() for m in value.split(",") if m.strip()]
    if not methods:
        raise InputError("--methods", value, "name at least one method")
    return methods


def _check_plot(loaded: api.Loaded, path: str) -> None:
    """``--plot`` needs a kind with a plot and a PNG it can write: refused before any work."""
    if loaded.kind.plot is None:
        raise InputError("--plot", path, f"kind {loaded.kind.name} has no plot")
    png_file("--plot", path)


def png_file(option: str, path: str) -> Path:
    """A ``.png`` file name in a writable folder, with matplotlib (the ``plot`` extra) installed: refused before any work."""
    if Path(path).is_dir() or Path(path).suffix.lower() != ".png":
        raise InputError(option, path, "give the name of a .png file to write")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(option, path, "plotting needs matplotlib: pip install 'optfleet[plot]'") from None
    folder = Path(path).parent
    try:
        out_folder(option, str(folder))
    except InputError as exc:
        raise InputError(option, path, f"its folder {folder} {exc.problem}") from None
    return Path(path)


def sweep_command(args: argparse.Namespace) -> int:
    from optfleet.studies.overrides import parse_axis
    from optfleet.studies.study import plan_study, run_study

    axes: dict[str, list[Any]] = {}
    for item in args.set:
        field, values = parse_axis(item)
        if field in axes:
            raise InputError("--set", item, f"{field} is swept twice; give all its values in one --set")
        axes[field] = values
    if args.out is not None:
        out_folder("--out", str(Path(args.out).parent))
    study = plan_study(args.file, axes, methods_option(args.methods), zipped=args.zip, engine=args.engine, workers=args.workers,
                       scheduler=args.scheduler, connect_timeout_s=args.connect_timeout_s, out=args.out, **option_overrides(args))
    frame = run_study(study, progress_display("sweep", quiet=args.quiet, unit="scenarios"))
    print(dump(_sweep_json(frame, list(axes), args.out)) if args.json else _sweep_text(frame, list(axes), args.out))
    return EXIT_OK if frame["feasible"].fillna(False).any() else EXIT_INFEASIBLE  # as gap: 1 when no row has a plan


def _sweep_json(frame: Any, fields: list[str], out: str | None) -> dict[str, Any]:
    from optfleet.studies.table import records

    return {**frame.attrs, "fields": fields, "out": out, "rows": records(frame)}


SWEEP_ROWS_SHOWN = 60  # a longer study shows its first and last half of this many rows


def _sweep_text(frame: Any, fields: list[str], out: str | None) -> str:
    """A summary line and the table's main columns: the swept fields, the core columns and the error of a failed
    scenario (the middle rows elided in a long study)."""
    from optfleet import tables
    from optfleet.studies.table import records

    facts = frame.attrs
    head = (f"{facts['instance']}: {facts['scenarios']} scenarios of {', '.join(fields)}, methods {', '.join(facts['methods'])}: "
            f"{facts['solved']} solved, {facts['resumed']} resumed from the results file, {facts['failed']} failed"
            + (f"; table in {out}" if out else ""))
    rows = records(frame)
    elided = len(rows) - SWEEP_ROWS_SHOWN
    if elided > 0:
        half = SWEEP_ROWS_SHOWN // 2
        rows = [*rows[:half], dict.fromkeys([*fields, "method", "status"], "..."), *rows[-half:]]
    lead = [tables.Column(field, heading, tables.value, tables.KEY) for field, heading in zip(fields, _short_names(fields), strict=True)]
    errors = [tables.Column("error", "error", tables.text, tables.LOW)] if any(row.get("error") for row in rows) else []
    blocks: list[tables.Block] = [head, "", tables.comparison_table(rows, errors, lead)]
    if elided > 0:
        blocks.append(f"({elided:,} rows elided in the middle; --json or --out has every row)")
    return tables.page(blocks)


def _short_names(fields: list[str]) -> list[str]:
    """Each swept field's column heading: the last part of its dotted path (``rate_rps``), the whole path where two
    fields share that last part."""
    last = [field.rsplit(".", 1)[-1] for field in fields]
    return [short if last.count(short) == 1 else field for field, short in zip(fields, last, strict=True)]


def plot_command(args: argparse.Namespace) -> int:
    from optfleet.studies.plot import plot_study
    from optfleet.studies.table import read_table

    path = png_file("--out", args.out or str(Path(args.file).with_suffix(".png")))
    frame = read_table(args.file)
    plot_study(frame, args.x, args.y, path, hue=args.hue, title=args.title)
    print(f"wrote {path}")
    return EXIT_OK


def validate_command(args: argparse.Namespace) -> int:
    from optfleet.tables import page

    validation = api.validate(args.file, **overrides(args))
    print(dump(validation.to_dict()) if args.json else page([f"{args.file}: {validation.summary}"]))
    return EXIT_OK


def simulate_command(args: argparse.Namespace) -> int:
    folder = out_folder("--out", args.out)
    given = {name: getattr(args, name) for name in api.SIMULATOR_OPTIONS if getattr(args, name) is not None}  # else the kind's defaults
    outcome = api.simulate(args.file, method=args.method, plan=args.plan, progress=progress_display("simulate", quiet=args.quiet),
                           **given, **overrides(args))
    data, text = outcome.to_dict(), outcome.text()
    print(dump(data) if args.json else text)
    if folder is not None:
        write_files(folder, {"simulation.json": dump(data), "report.txt": text})
    return EXIT_OK


def catalog_command(args: argparse.Namespace) -> int:
    """``optfleet catalog [--source S]``: what each performance source knows (optfleet.engine.sources), one section
    per source under a ``SOURCE: about`` heading (optfleet/cli/catalog_text.py), or ``--json``: one document keyed
    by source."""
    from optfleet.cli.catalog_text import catalog_text
    from optfleet.engine.sources import source_catalog

    catalog = source_catalog(args.source)
    print(dump(catalog) if args.json else catalog_text(catalog))
    return EXIT_OK


_COMPRESS_OPTIONS = {"budget_tokens": "--budget-tokens", "output_tokens": "--output-tokens", "category": "--category",
                     "time_limit_s": "--time-limit"}


def compress_command(args: argparse.Namespace) -> int:
    """``optfleet compress FILE --budget-tokens B``: the library's :func:`optfleet.compress.compress` on the file's text;
    its InputErrors name the option (or FILE) they come from."""
    import importlib.util
    import sys

    from optfleet.compress import compress
    from optfleet.compress.fidelity import fidelity
    from optfleet.instance.documents import read_text

    packages = {"sklearn": "scikit-learn", "rouge_score": "rouge-score"}
    missing = [package for module, package in packages.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise InputError("extra", "compress", f"the compressor needs {', '.join(missing)}: pip install 'optfleet[compress]'")
    text = read_text(Path(args.file), "FILE")
    try:
        result = compress(text, args.budget_tokens, args.output_tokens, category=args.category,
                          method="exact" if args.exact else "greedy", time_limit_s=args.time_limit)
    except InputError as exc:
        if exc.field == "text":
            raise InputError("FILE", args.file, exc.problem) from None
        raise InputError(_COMPRESS_OPTIONS.get(exc.field, exc.field), exc.value, exc.problem) from None
    kept = fidelity(text, result.text) if result.compressed else None
    if args.json:
        print(dump({"file": args.file, **result.to_dict(), "fidelity": None if kept is None else kept.to_dict()}))
    else:
        print(result.text)
    if not args.quiet:
        print(_compress_summary(args.file, result, kept), file=sys.stderr)
    return EXIT_OK if result.fits else EXIT_INFEASIBLE


def _compress_summary(path: str, result: Any, kept: Any) -> str:
    """One line: the token accounts, the method (and the greedy gap with --exact), the fidelity."""
    from optfleet.numbers import gap_percent, significant

    head = (f"{path}: {result.original_tokens:,} -> {result.compressed_tokens:,} prompt tokens + {result.output_tokens:,} output "
            f"<= B = {result.budget_tokens:,}" if result.fits else
            f"{path}: {result.original_tokens:,} prompt tokens + {result.output_tokens:,} output > B = {result.budget_tokens:,}")
    parts = [head, result.reason]
    if result.compressed:
        parts.append(f"{result.method}: {len(result.kept_sentences)} of {result.sentences} sentences, value {significant(result.value)}")
        if result.report is not None:
            gap = "no bound" if result.greedy_gap_pct is None else f"gap {gap_percent(result.greedy_gap_pct)} % of the bound"
            proof = "MILP (optimum by the knapsack's dynamic program, checked by HiGHS)" if result.report.counts.get("bound_by_dynamic_program") else "MILP"
            parts.append(f"{proof} {result.report.summary}; greedy value {significant(result.greedy_value)}, {gap}")
        cosine = "undefined (no terms)" if kept.tfidf_cosine is None else f"{kept.tfidf_cosine:.3f}"
        recall = "not computed" if kept.rouge_l_recall is None else f"{kept.rouge_l_recall:.3f}"
        parts.append(f"ROUGE-L recall {recall}, TF-IDF cosine {cosine}, token reduction {100 * kept.token_reduction:.1f} %")
        parts += kept.notes
    return "; ".join(parts)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "solve": solve_command,
    "gap": gap_command,
    "explain": explain_command,
    "sweep": sweep_command,
    "plot": plot_command,
    "validate": validate_command,
    "simulate": simulate_command,
    "catalog": catalog_command,
    "compress": compress_command,
    "data": data_command,
}
