"""The problem-kind registry: every kind declares, in one place, what the loader, the CLI and the Python API need.

A kind is one package under ``optfleet/problems/<kind>/`` whose ``kind.py``
defines ``KIND = ProblemKind(...)``; adding a kind is that package, its model
module under ``models/`` and one line in :data:`KINDS`.  Kinds are imported
only when used, so ``optfleet --help`` or validating a caching file never
imports the fleet MILP.

What a kind declares (:class:`ProblemKind`):

* ``schema``: the pydantic model of its instance files; ``preprocess``
  (optional) fills defaults into the raw document before validation (the
  fleet's presets and hardware profiles);
* ``prepare(loaded) -> problem``: the instance in numbers (no Pyomo);
* ``methods(problem)``: every method name the problem offers, heuristics and
  exact ones; ``default_method(problem)`` what ``solve`` runs (the instance's
  ``solve:`` block decides, as in the CLI), ``solve_methods(problem, method)``
  what ``solve`` runs beside it, ``gap_methods(problem)`` what ``gap`` runs;
* ``run(problem, method, progress) -> [MethodResult]``: one method, scored by
  the kind's one evaluator (one result per group, e.g. per cache capacity);
* ``reference(problem, results_of_a_group) -> Reference``: the proven bound
  a group's rows are compared with, and why;
* ``describe``, ``render_solve``, ``render_gap``: text for people;
  ``facts(problem)`` and ``result_json(problem, result)``: JSON for programs;
* ``overrides``: where the generic options (``time_limit_s``, ``solver``,
  ``method``) live in its instance files; ``simulate`` (optional): its simulator;
  ``gap_summary`` (optional): a comparison across the rows of a solve or a
  gap (e.g. savings against the homogeneous fleet with the closed forms, the
  mixed fleet against the best single GPU type); ``solve_files`` (optional): extra
  files ``solve --out`` writes (e.g. the fleet's plan.json); ``plot``
  (optional): a PNG of a gap's results (``gap --plot``); ``explain``
  (optional): ``explain(problem) -> Explainer``, the hooks of ``optfleet explain``
  (binding rows, shadow prices, ranges, curves, alternatives of its exact method;
  optfleet/sensitivity/explainer.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optfleet.errors import InputError

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome
    from optfleet.instance.loader import LoadedInstance
    from optfleet.progress import Progress
    from optfleet.results import MethodResult, Reference

# Kind name -> the module that defines its KIND (imported on first use).
KINDS: dict[str, str] = {
    "fleet": "optfleet.problems.fleet.kind",
    "profiled_fleet": "optfleet.problems.profiled_fleet.kind",
    "caching": "optfleet.problems.caching.kind",
    "prefix_cache": "optfleet.problems.prefix_cache.kind",
    "reserved": "optfleet.problems.reserved.kind",
    "routing": "optfleet.problems.routing.kind",
    "placement": "optfleet.problems.placement.kind",
    "capacity_plan": "optfleet.problems.capacity_plan.kind",
    "pd_fleet": "optfleet.problems.pd_fleet.kind",
}


# ``overrides`` of a kind whose instance files have a ``solve:`` block with ``method``, ``time_limit_s`` and ``solver``
# (CONTRIBUTING.md); a kind with more options there (e.g. ``mip_gap``) lists its own.
SOLVE_BLOCK_OVERRIDES: Mapping[str, str] = {"time_limit_s": "solve.time_limit_s", "solver": "solve.solver", "method": "solve.method"}


@dataclass(frozen=True)
class ProblemKind:
    """One problem kind's declarations (module docstring)."""

    name: str
    summary: str
    schema: type
    prepare: Callable[["LoadedInstance"], Any]
    methods: Callable[[Any], tuple[str, ...]]
    default_method: Callable[[Any], str]
    solve_methods: Callable[[Any, str], tuple[str, ...]]
    gap_methods: Callable[[Any], tuple[str, ...]]
    run: Callable[[Any, str, "Progress"], list["MethodResult"]]
    reference: Callable[[Any, Sequence["MethodResult"]], "Reference"]
    describe: Callable[[Any], str]
    render_solve: Callable[["SolveOutcome"], str]
    render_gap: Callable[["GapOutcome"], str]
    facts: Callable[[Any], dict[str, Any]]
    result_json: Callable[[Any, "MethodResult"], dict[str, Any]]
    overrides: Mapping[str, str] = field(default_factory=dict)
    preprocess: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    simulate: Callable[..., Any] | None = None
    gap_summary: Callable[[Any, Sequence["MethodResult"]], dict[str, Any] | None] | None = None
    solve_files: Callable[["SolveOutcome"], dict[str, str]] | None = None
    plot: Callable[["GapOutcome", Any], None] | None = None
    explain: Callable[[Any], Any] | None = None


def lazy(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported when first called: a kind names its heavy parts (solvers, pandas tables) without
    importing them, so loading or validating an instance stays fast."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def kind(name: str) -> ProblemKind:
    """The registered kind ``name`` (an InputError naming the registered kinds otherwise)."""
    if name is None:
        raise InputError("kind", name, f"the instance's kind is missing; give one of: {', '.join(KINDS)}")
    if not isinstance(name, str) or name not in KINDS:
        raise InputError("kind", name, f"unknown instance kind; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[name]).KIND
