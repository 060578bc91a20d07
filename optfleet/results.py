"""The one result vocabulary of every problem kind: a method's result, the comparison table, JSON-safe values.

Every method of every kind (heuristic or exact) returns :class:`MethodResult`
records, and :func:`comparison_rows` turns them into table rows that share the
core columns

    method, status, feasible, objective, objective_unit, bound, gap_pct, seconds

followed by the kind's own columns.  ``bound`` is the best proven bound on the
optimum that the row is compared with (the exact method's, in the row's
group); ``gap_pct`` is the distance to it in percent of the bound,

    minimised objective:  100 (objective - bound) / |bound|
    maximised objective:  100 (bound - objective) / |bound|

and is empty (``None``: JSON ``null``, pandas NA) when no bound was computed,
for a row without a plan, or for a plan that breaks the instance's rules (a
gap would flatter it).  A gap within solver round-off (1e-9 relative) is 0.
Rows of one group are compared among themselves (caching: one group per cache
capacity; fleets: one group).  Missing values are ``None``, never NaN, -1 or
inf: :func:`json_safe` makes any nested result safe to write.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optfleet.numbers import ROUND_OFF
from optfleet.solvers.report import SolveReport

CORE_COLUMNS = ("method", "status", "feasible", "objective", "objective_unit", "bound", "gap_pct", "seconds")
MINIMISE, MAXIMISE = "min", "max"

# Statuses of a row without a solver report (a solver's own statuses are in optfleet.solvers.report).
HEURISTIC = "heuristic"  # a plan from a heuristic or policy (no bound of its own)
NO_PLAN = "no_plan"  # the method found no plan (the note says why)
NOT_AVAILABLE = "not_available"  # the method does not apply to this instance (the note says why)


@dataclass(frozen=True)
class MethodResult:
    """One method's outcome on one problem (or one group of it, e.g. one cache capacity).

    ``plan`` and ``evaluation`` are the kind's own types (None without a plan); ``evaluation`` always
    comes from the kind's one evaluator, whoever made the plan.  ``objective`` is the plan's objective
    by that evaluator, in ``objective_unit``, minimised or maximised (``sense``); ``feasible`` says
    whether the plan meets every rule of the instance (SLO, constraints).  ``report`` is the solver's
    verdict for exact methods.  ``note`` says why there is no plan, or what the plan breaks.
    ``group`` names the rows compared together; ``columns`` holds the kind's own row columns.
    """

    method: str
    plan: Any
    evaluation: Any
    seconds: float
    objective: float | None = None
    objective_unit: str = ""
    sense: str = MINIMISE
    feasible: bool = False
    report: SolveReport | None = None
    note: str = ""
    available: bool = True
    group: tuple[tuple[str, Any], ...] = ()
    columns: Mapping[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """The solver's status for an exact method; else ``heuristic``, ``no_plan`` or ``not_available``."""
        if not self.available:
            return NOT_AVAILABLE
        if self.report is not None:
            return self.report.status
        return HEURISTIC if self.plan is not None else NO_PLAN

    @property
    def has_plan(self) -> bool:
        return self.plan is not None

    @property
    def bound(self) -> float | None:
        """The proven bound of an exact method's own model (None for heuristics)."""
        return None if self.report is None else self.report.bound


def no_plan(method: str, seconds: float, reason: str, *, objective_unit: str = "", sense: str = MINIMISE,
            group: tuple[tuple[str, Any], ...] = (), available: bool = True, report: SolveReport | None = None) -> MethodResult:
    """The result of a method that produced no plan (or, ``available=False``, does not apply)."""
    return MethodResult(method, None, None, seconds, objective_unit=objective_unit, sense=sense, note=reason,
                        available=available, group=group, report=report)


def gap_pct(objective: float | None, bound: float | None, sense: str) -> float | None:
    """The gap of ``objective`` to ``bound`` in percent of the bound (module docstring); None without both.
    A zero bound gives 0 for a zero objective and None otherwise (no finite percentage)."""
    if objective is None or bound is None:
        return None
    distance = objective - bound if sense == MINIMISE else bound - objective
    if abs(bound) <= 0.0:
        return 0.0 if abs(distance) <= 0.0 else None
    ratio = distance / abs(bound)
    return 0.0 if abs(ratio) < ROUND_OFF else 100.0 * ratio


@dataclass(frozen=True)
class Reference:
    """What the rows of one group are compared with: a proven bound on the optimum (or None) and why."""

    bound: float | None
    reason: str


def comparison_rows(results: Sequence[MethodResult], reference: Callable[[Sequence[MethodResult]], Reference]) -> tuple[list[dict[str, Any]], dict[tuple, Reference]]:
    """One row per result, core columns first, then the group's columns and the kind's own.

    ``reference(results_of_a_group)`` gives the group's bound and the reason for it (the kind decides
    which method's bound is a bound on the optimum: a restricted model's is not).  Returns the rows and
    the reference of every group.
    """
    groups: dict[tuple, list[MethodResult]] = {}
    for result in results:
        groups.setdefault(result.group, []).append(result)
    references = {key: reference(members) for key, members in groups.items()}
    own = list(dict.fromkeys(key for result in results for key in (*dict(result.group), *result.columns)))  # every row gets them all
    rows = []
    for result in results:
        ref = references[result.group]
        comparable = result.has_plan and result.feasible
        row: dict[str, Any] = {
            "method": result.method,
            "status": result.status,
            "feasible": bool(result.has_plan and result.feasible),
            "objective": result.objective,
            "objective_unit": result.objective_unit,
            "bound": ref.bound,
            "gap_pct": gap_pct(result.objective, ref.bound, result.sense) if comparable else None,
            "seconds": result.seconds,
        }
        row.update(dict.fromkeys(own))
        row.update(dict(result.group))
        row.update(result.columns)
        note = result.note
        if comparable and ref.bound is not None and row["gap_pct"] is None:
            note = "; ".join(filter(None, [note, "no finite gap: the bound is 0 and the objective is not"]))
        row["note"] = note
        rows.append(row)
    return rows, references


def json_safe(value: Any) -> Any:
    """``value`` with every float NaN or infinity replaced by None and numpy scalars made plain (recursively)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def format_cost(cost_per_hour: float | None) -> str:
    """Costs are printed one way everywhere: ``$1,234.56/h`` (``-`` without a plan)."""
    return "-" if cost_per_hour is None else f"${cost_per_hour:,.2f}/h"


def first_result(results: Iterable[MethodResult], method: str) -> MethodResult | None:
    """The first result of ``method`` (None when it did not run)."""
    return next((r for r in results if r.method == method), None)


def exact_reference(results: Sequence[MethodResult], method: str, phrase: Callable[[MethodResult], Reference]) -> Reference:
    """The reference of a group whose bound is exact method ``method``'s: None, with the reason, when it did not run,
    does not apply or proved no bound; else ``phrase(result)`` (the kind states the bound in its own terms)."""
    exact = first_result(results, method)
    if exact is None:
        return Reference(None, f"no bound: {method} did not run (add it to the methods)")
    if not exact.available:
        return Reference(None, f"no bound: {method} is {exact.note}")
    if exact.report is None or exact.report.bound is None:
        return Reference(None, f"no bound: {method} proved none ({exact.note or exact.status})")
    return phrase(exact)


def proven(report: SolveReport) -> str:
    """``optimum`` for a run proven optimal, else ``bound (time limit: not proven optimal)`` and the like."""
    return "optimum" if report.proven_optimal else f"bound ({report.status.replace('_', ' ')}: not proven optimal)"


def mixed_vs_best_single(results: Sequence[MethodResult], mixed: str, prefix: str) -> dict[str, Any] | None:
    """The mixed exact fleet (method ``mixed``) against the cheapest feasible single-type one (methods ``prefix<type>``):
    both costs and the saving in % of the single-type cost; None unless both have feasible plans and cost is minimised."""
    best_mixed = first_result(results, mixed)
    singles = [r for r in results if r.method.startswith(prefix) and r.has_plan and r.feasible]
    if best_mixed is None or not (best_mixed.has_plan and best_mixed.feasible) or best_mixed.sense != MINIMISE or not singles:
        return None
    best = min(singles, key=lambda r: r.objective)
    return {
        "mixed_cost_per_hour": best_mixed.objective,
        "best_single_type": best.method.removeprefix(prefix),
        "best_single_cost_per_hour": best.objective,
        "savings_pct": 100 * (best.objective - best_mixed.objective) / best.objective,
    }
