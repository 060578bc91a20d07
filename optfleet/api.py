"""The Python API, generic over the problem-kind registry; the CLI is a thin layer over it.

    import optfleet
    problem = optfleet.load("instances/fleet/azure_2023.yaml")
    outcome = optfleet.solve("instances/fleet/azure_2023.yaml", method="milp", time_limit_s=30)
    table = optfleet.gap("instances/caching/tiny.yaml")            # a pandas DataFrame
    print(optfleet.validate("instances/profiled/melange_example.yaml").text)

Every function takes a file path, a document mapping or a loaded instance,
and keyword overrides of instance fields (``preset="fleetsim_compatible"``,
``time_limit_s=30``, ``solver="highs"``, or any field as a dotted path with
``__``: ``solve__max_pools=3``).  They honour the instance's ``solve:`` block
exactly as the CLI does: the same method by default, the same options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance, load_instance
from optfleet.progress import Progress, silent
from optfleet.registry import ProblemKind
from optfleet.registry import kind as registered_kind
from optfleet.results import MethodResult, Reference, comparison_rows, json_safe

if TYPE_CHECKING:
    import pandas as pd

Source = str | Path | Mapping[str, Any] | LoadedInstance


@dataclass(frozen=True)
class Loaded:
    """An instance made ready: its kind, the validated file and the prepared problem."""

    kind: ProblemKind
    instance: LoadedInstance
    problem: Any


def load(source: "Source | Loaded", **overrides: Any) -> Loaded:
    """Load, validate and prepare ``source`` (module docstring); an already loaded source without overrides is
    returned as it is."""
    if isinstance(source, Loaded):
        if not any(v is not None for v in overrides.values()):
            return source
        source = source.instance
    instance = load_instance(source, **overrides)
    kind = registered_kind(instance.kind)
    return Loaded(kind, instance, kind.prepare(instance))


@dataclass(frozen=True)
class SolveOutcome:
    """``solve``'s answer: the chosen method's result first, then what ran beside it (the kind's baselines)."""

    loaded: Loaded
    method: str
    results: tuple[MethodResult, ...]
    rows: tuple[dict[str, Any], ...]
    references: Mapping[tuple, Reference]

    @property
    def main(self) -> list[MethodResult]:
        """The chosen method's results (one per group, e.g. per cache capacity)."""
        return [r for r in self.results if r.method == self.method]

    @property
    def has_feasible_plan(self) -> bool:
        """Whether the chosen method found a plan that meets every rule (the CLI's exit 0; else 1)."""
        return any(r.has_plan and r.feasible for r in self.main)

    def to_dict(self) -> dict[str, Any]:
        kind, problem = self.loaded.kind, self.loaded.problem
        main = [_row_json(kind, problem, row, r) for row, r in zip(self.rows, self.results, strict=True) if r.method == self.method]
        baselines = [_row_json(kind, problem, row, r) for row, r in zip(self.rows, self.results, strict=True) if r.method != self.method]
        summary = None if kind.gap_summary is None else kind.gap_summary(problem, self.results)
        return json_safe({**_head(self.loaded), "method": self.method, "results": main, "baselines": baselines,
                          "references": _references_json(self.references), "summary": summary})

    def text(self) -> str:
        """The report for people, fitted to the output width (optfleet.tables.output_width: 120 characters unless
        set; None shows every column); ``to_dict`` is always complete."""
        return self.loaded.kind.render_solve(self)


@dataclass(frozen=True)
class GapOutcome:
    """``gap``'s answer: every method's rows with the core columns, and each group's reference bound."""

    loaded: Loaded
    results: tuple[MethodResult, ...]
    rows: tuple[dict[str, Any], ...]
    references: Mapping[tuple, Reference]
    methods: tuple[str, ...] = field(default=())

    @property
    def has_feasible_plan(self) -> bool:
        """Whether some method found a plan that meets every rule (the CLI's exit 0; else 1)."""
        return any(r.has_plan and r.feasible for r in self.results)

    def frame(self) -> "pd.DataFrame":
        """The rows as a DataFrame: core columns first, missing values as pandas NA."""
        import pandas as pd

        return pd.DataFrame(list(self.rows)).convert_dtypes()  # nullable dtypes: counts stay integers, gaps floats with NA

    def to_dict(self) -> dict[str, Any]:
        kind, problem = self.loaded.kind, self.loaded.problem
        rows = [_row_json(kind, problem, row, r) for row, r in zip(self.rows, self.results, strict=True)]
        return json_safe({**_head(self.loaded), "methods": list(self.methods), "references": _references_json(self.references),
                          "summary": self.summary, "rows": rows})

    @property
    def summary(self) -> dict[str, Any] | None:
        """The kind's comparison across the rows (e.g. mixed fleet vs best single GPU type), if it has one."""
        kind = self.loaded.kind
        return None if kind.gap_summary is None else kind.gap_summary(self.loaded.problem, self.results)

    def text(self) -> str:
        """The report for people, fitted to the output width (as :meth:`SolveOutcome.text`)."""
        return self.loaded.kind.render_gap(self)


def solve(source: "Source | Loaded", method: str | None = None, *, progress: Progress = silent, **overrides: Any) -> SolveOutcome:
    """Run ``method`` (default: the instance's ``solve.method``, else the kind's default) and what the kind runs
    beside it as baselines; every plan scored by the kind's evaluator."""
    loaded = load(source, **overrides)
    kind, problem = loaded.kind, loaded.problem
    chosen = method if method is not None else kind.default_method(problem)  # an empty name is refused, not the default
    check_methods(kind, problem, [chosen], "--method" if method is not None else kind.overrides.get("method", "--method"))
    check_solver(loaded)
    names = list(dict.fromkeys([chosen, *kind.solve_methods(problem, chosen)]))
    results = _run_all(kind, problem, names[:1], progress, "solve", total=len(names), finish=False)
    if not all(r.available for r in results):
        raise InputError("--method", chosen, next(r.note for r in results if not r.available))
    results = _by_group(results + _run_all(kind, problem, names[1:], progress, "solve", offset=1, total=len(names)))
    rows, references = comparison_rows(results, lambda group: kind.reference(problem, group))
    return SolveOutcome(loaded, chosen, tuple(results), tuple(rows), references)


def run_gap(source: "Source | Loaded", methods: Sequence[str] | str | None = None, *, progress: Progress = silent,
            **overrides: Any) -> GapOutcome:
    """Every method of ``methods`` (a list or a comma-separated string; default: the kind's gap set) with its gap to
    the exact method's bound."""
    loaded = load(source, **overrides)
    kind, problem = loaded.kind, loaded.problem
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    names = list(dict.fromkeys(methods)) if methods else list(kind.gap_methods(problem))
    if not names:
        raise InputError("--methods", methods, f"no method named; known: {', '.join(kind.methods(problem))}")
    check_default_method(loaded)  # the file's own method must be known, even when gap runs others
    check_methods(kind, problem, names, "--methods")
    check_solver(loaded)
    results = _by_group(_run_all(kind, problem, names, progress, "gap"))
    rows, references = comparison_rows(results, lambda group: kind.reference(problem, group))
    return GapOutcome(loaded, tuple(results), tuple(rows), references, tuple(names))


def gap(source: "Source | Loaded", methods: Sequence[str] | str | None = None, *, progress: Progress = silent, **overrides: Any) -> "pd.DataFrame":
    """:func:`run_gap` as a DataFrame (one row per method and group; core columns first).  ``frame.attrs``
    holds the instance name, the kind and each group's reference bound and reason."""
    outcome = run_gap(source, methods, progress=progress, **overrides)
    frame = outcome.frame()
    frame.attrs.update(instance=outcome.loaded.instance.spec.name, kind=outcome.loaded.kind.name,
                       references=_references_json(outcome.references))
    return frame


@dataclass(frozen=True)
class Validation:
    """A valid instance's kind, name and summary (``text``, at the output width of optfleet.tables; the JSON's
    ``summary`` is never wrapped); invalid ones raise InputError."""

    loaded: Loaded
    summary: str

    @property
    def text(self) -> str:
        """The summary for people: long lines wrapped at the output width (optfleet/tables.py)."""
        from optfleet.tables import page

        return page([self.summary])

    def to_dict(self) -> dict[str, Any]:
        return json_safe({**_head(self.loaded), "kind_summary": self.loaded.kind.summary, "valid": True, "summary": self.summary,
                          "methods": list(self.loaded.kind.methods(self.loaded.problem))})


def validate(source: "Source | Loaded", **overrides: Any) -> Validation:
    """Load, validate and prepare ``source`` and summarise it (an InputError names what is wrong, the default method
    and solver included)."""
    loaded = load(source, **overrides)
    check_default_method(loaded)
    check_solver(loaded)
    return Validation(loaded, loaded.kind.describe(loaded.problem))


def simulate(source: "Source | Loaded", *, method: str | None = None, plan: Any = None, progress: Progress = silent, **options: Any) -> Any:
    """Simulate a plan of ``source`` (a plan object or mapping, or the plan of ``method``) with the kind's
    simulator; ``options`` are the simulator's (fleet: requests, reps, seed, mode) and instance overrides."""
    overrides = {k: v for k, v in options.items() if k not in SIMULATOR_OPTIONS}
    settings = {k: v for k, v in options.items() if k in SIMULATOR_OPTIONS}
    loaded = load(source, **overrides)
    if loaded.kind.simulate is None:
        raise InputError("kind", loaded.kind.name, "this kind has no simulator")
    if plan is None:
        method = method if method is not None else loaded.kind.default_method(loaded.problem)
        check_methods(loaded.kind, loaded.problem, [method], "--method")
    return loaded.kind.simulate(loaded, method=method, plan=plan, progress=progress, **settings)


SIMULATOR_OPTIONS = ("requests", "reps", "seed", "mode")


def check_methods(kind: ProblemKind, problem: Any, names: Sequence[str], option: str) -> None:
    """Every name of ``names`` must be a method of ``problem``: an InputError naming ``option`` and the known methods otherwise."""
    known = kind.methods(problem)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InputError(option, ",".join(unknown), f"unknown method for this {kind.name} instance; known: {', '.join(known)}")


def check_default_method(loaded: Loaded) -> None:
    """The instance's default method (its ``solve.method``, else the kind's) must be one of its methods: an
    InputError naming the instance's field otherwise."""
    check_methods(loaded.kind, loaded.problem, [loaded.kind.default_method(loaded.problem)], loaded.kind.overrides.get("method", "method"))


def check_solver(loaded: Loaded) -> None:
    """A solver other than HiGHS must be installed: said before any work, naming the field that asks for it."""
    field_path = loaded.kind.overrides.get("solver")
    if field_path is None:
        return
    node: Any = loaded.instance.spec
    for part in field_path.split("."):
        node = getattr(node, part, None)
    if isinstance(node, str) and node != "highs":
        from optfleet.solvers.highs import solver_factory

        solver_factory(node, field_path)


def _run_all(kind: ProblemKind, problem: Any, names: Sequence[str], progress: Progress, task: str, offset: int = 0,
             total: int | None = None, finish: bool = True) -> list[MethodResult]:
    """Run ``names`` in turn; the kind's own progress inside a method (e.g. per cache capacity) moves the display
    within that method's share of the run."""
    total = len(names) + offset if total is None else total
    results: list[MethodResult] = []
    for i, name in enumerate(names):
        step = offset + i
        progress(f"{task} {name}", step, total)
        within = lambda label, done, of, step=step: progress(f"{task} {label}", step + (done / of if of else 0.0), total)  # noqa: E731
        results += kind.run(problem, name, within)
    if finish:
        progress(f"{task} done", total, total)
    return results


def _by_group(results: list[MethodResult]) -> list[MethodResult]:
    """Results grouped (groups in order of first appearance), each group in the order the methods ran."""
    order = {group: i for i, group in reversed(list(enumerate(r.group for r in results)))}
    return sorted(results, key=lambda r: order[r.group])


def _head(loaded: Loaded) -> dict[str, Any]:
    return {"instance": loaded.instance.spec.name, "kind": loaded.kind.name, **loaded.kind.facts(loaded.problem)}


def _row_json(kind: ProblemKind, problem: Any, row: Mapping[str, Any], result: MethodResult) -> dict[str, Any]:
    return {**row, **kind.result_json(problem, result)}


def _references_json(references: Mapping[tuple, Reference]) -> list[dict[str, Any]]:
    return [{**dict(group), "bound": ref.bound, "reason": ref.reason} for group, ref in references.items()]
