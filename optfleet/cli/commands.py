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
    out_folder(option, str(Path(path).parent))
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


def _sweep_text(frame: Any, fields: list[str], out: str | None) -> str:
    """A summary line and the table's main columns (the middle rows elided in a long study)."""
    facts = frame.attrs
    shown = [c for c in [*fields, "method", "status", "objective", "objective_unit", "bound", "gap_pct", "seconds", "error"] if c in frame.columns]
    if "error" in shown and frame["error"].isna().all():
        shown.remove("error")
    head = (f"{facts['instance']}: {facts['scenarios']} scenarios, methods {', '.join(facts['methods'])}: "
            f"{facts['solved']} solved, {facts['resumed']} resumed from the results file, {facts['failed']} failed"
            + (f"; table in {out}" if out else ""))
    table = frame[shown].astype(object).where(frame[shown].notna(), "-")
    return head + "\n\n" + table.to_string(index=False, max_rows=60)


def plot_command(args: argparse.Namespace) -> int:
    from optfleet.studies.plot import plot_study
    from optfleet.studies.table import read_table

    path = png_file("--out", args.out or str(Path(args.file).with_suffix(".png")))
    frame = read_table(args.file)
    plot_study(frame, args.x, args.y, path, hue=args.hue, title=args.title)
    print(f"wrote {path}")
    return EXIT_OK


def validate_command(args: argparse.Namespace) -> int:
    validation = api.validate(args.file, **overrides(args))
    print(dump(validation.to_dict()) if args.json else f"{args.file}: {validation.text}")
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
    per source under a ``SOURCE: about`` heading, or ``--json``: one document keyed by source."""
    from optfleet.engine.sources import source_catalog

    catalog = source_catalog(args.source)
    if args.json:
        print(dump(catalog))
        return EXIT_OK
    for name, section in catalog.items():
        print(f"{name.upper()}: {section['about']}")
        _CATALOG_SECTIONS[name](section)
        print()
    return EXIT_OK


def _print_roofline(section: dict[str, Any]) -> None:
    """The GPU and model tables with their sources, the efficiencies and what a config.json may hold."""
    _print_spec_table("GPUS", section["gpus"])
    _print_spec_table("MODELS", section["models"])
    efficiencies = ", ".join(f"{name} {value:g}" for name, value in section["efficiencies"].items())
    print(f"  efficiencies (defaults; override under hardware.performance): {efficiencies}")
    for what, names in section["config_json"].items():
        _print_wrapped(f"hardware.config_json {what.replace('_', ' ')}", names)


def _print_spec_table(title: str, rows: list[dict[str, Any]]) -> None:
    """A catalog table without its ``source`` column, then one ``name: source`` line per row."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    print(title)
    print(frame.drop(columns=["source"]).to_string(index=False, float_format=lambda v: f"{v:g}", na_rep="-"))
    print("sources:")
    for name, source in zip(frame["name"], frame["source"], strict=True):
        print(f"  {name}: {source}")
    print()


def _print_measured(section: dict[str, Any]) -> None:
    """One row per system and backend with its versions (slot names in brackets) and the bundled models; or why the
    database is unavailable."""
    if not section["installed"]:
        print(f"  not available: {section['problem']}")
        print("  catalog GPUs it times: " + ", ".join(f"{gpu} ({system})" for gpu, system in section["gpu_systems"].items()))
        return
    import pandas as pd

    print(f"  database: {section['database']}")
    rows = [{"system": system, "gpu": entry["gpu"], "backend": backend,
             "versions": ", ".join(f"{v} ({', '.join(slots)})" if slots else v for v, slots in versions.items())}
            for system, entry in section["systems"].items() for backend, versions in entry["backends"].items()]
    print(pd.DataFrame(rows).to_string(index=False, na_rep="-"))
    _print_wrapped(f"bundled models ({len(section['models'])})", section["models"])


def _print_fit(section: dict[str, Any]) -> None:
    """The file formats with their columns or tools, and what identifies each coefficient."""
    table, benchmarks = section["iteration_table"], section["serving_benchmarks"]
    _print_named(f"iteration tables ({', '.join(table['suffixes'])}): {table['note']}; columns", table["columns"])
    _print_named(f"serving benchmark results ({', '.join(benchmarks['suffixes'])})", benchmarks["formats"])
    _print_named("what identifies each coefficient", section["identified_by"])


def _print_affine(section: dict[str, Any]) -> None:
    """Each coefficient with its meaning."""
    _print_named("coefficients (hardware.performance.<name>)", section["coefficients"])


def _print_named(title: str, meanings: dict[str, str]) -> None:
    """``  title:`` then one ``    name: meaning`` line per entry."""
    print(f"  {title}:")
    for name, meaning in meanings.items():
        print(f"    {name}: {meaning}")


def _print_wrapped(label: str, names: list[str]) -> None:
    """``  label: a, b, c`` wrapped at 110 columns, continuation lines indented."""
    import textwrap

    print(textwrap.fill(", ".join(names), width=110, initial_indent=f"  {label}: ", subsequent_indent="    ",
                        break_on_hyphens=False))


_CATALOG_SECTIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "roofline": _print_roofline, "measured": _print_measured, "fit": _print_fit, "affine": _print_affine,
}


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
    head = (f"{path}: {result.original_tokens} -> {result.compressed_tokens} prompt tokens + {result.output_tokens} output "
            f"<= B = {result.budget_tokens}" if result.fits else
            f"{path}: {result.original_tokens} prompt tokens + {result.output_tokens} output > B = {result.budget_tokens}")
    parts = [head, result.reason]
    if result.compressed:
        parts.append(f"{result.method}: {len(result.kept_sentences)} of {result.sentences} sentences, value {result.value:.4g}")
        if result.report is not None:
            gap = "no bound" if result.greedy_gap_pct is None else f"gap {result.greedy_gap_pct:.3g} % of the bound"
            proof = "MILP (optimum by the knapsack's dynamic program, checked by HiGHS)" if result.report.counts.get("bound_by_dynamic_program") else "MILP"
            parts.append(f"{proof} {result.report.summary}; greedy value {result.greedy_value:.4g}, {gap}")
        cosine = "undefined (no terms)" if kept.tfidf_cosine is None else f"{kept.tfidf_cosine:.3f}"
        recall = "not computed" if kept.rouge_l_recall is None else f"{kept.rouge_l_recall:.3f}"
        parts.append(f"ROUGE-L recall {recall}, TF-IDF cosine {cosine}, token reduction {100 * kept.token_reduction:.1f} %")
        parts += kept.notes
    return "; ".join(parts)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "solve": solve_command,
    "gap": gap_command,
    "sweep": sweep_command,
    "plot": plot_command,
    "validate": validate_command,
    "simulate": simulate_command,
    "catalog": catalog_command,
    "compress": compress_command,
    "data": data_command,
}
