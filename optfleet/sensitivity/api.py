"""``optfleet.explain(source, ...)``: the Python API of ``optfleet explain`` (tables as pandas DataFrames).

    import optfleet
    result = optfleet.explain("instances/fleet/toy_hetero.yaml", curves=["rate_growth=1:1.5:3"])
    result.tables()["binding"]          # each constraint of the plan with its slack
    result.tables()["curve:rate_growth"]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optfleet.errors import InfeasibleError, InputError
from optfleet.sensitivity.explainer import Explainer
from optfleet.sensitivity.run import DEFAULT_WITHIN_PCT, ExplainResult, alternatives, break_even, curve, parse_curve
from optfleet.progress import Progress, silent

MAX_WITHIN_PCT = 1e4  # 101 times the optimum's cost is no near-optimal plan (inf and 1e308 were accepted)


def explainer_of(loaded: Any) -> Explainer:
    """The kind's explain hooks for a loaded instance (an InputError when the kind has none yet)."""
    if loaded.kind.explain is None:
        from optfleet.registry import KINDS, kind

        covered = ", ".join(name for name in KINDS if kind(name).explain is not None)
        raise InputError("kind", loaded.kind.name, f"explain does not cover this kind yet (it covers: {covered})")
    return loaded.kind.explain(loaded.problem)


def explain(source: Any, *, curves: Sequence[str] = (), break_even_of: Sequence[str] | None = None, within_pct: float = DEFAULT_WITHIN_PCT,
            near_optimal: bool = True, progress: Progress = silent, **overrides: Any) -> ExplainResult:
    """Sensitivity of ``source``'s exact plan (optfleet/sensitivity/run.py): the kind's tables, its default curves and a curve for each
    of ``curves`` (``"PARAMETER=START:STOP:N"``), the break-even of each parameter of ``break_even_of`` (default: the
    kind's) and, with ``near_optimal``, the named alternatives within ``within_pct`` % of the optimum.  Every option
    is checked before any solve."""
    from optfleet.api import load

    loaded = load(source, **overrides)
    explainer = explainer_of(loaded)
    requests = [parse_curve(text, explainer) for text in (*explainer.default_curves, *curves)]
    names = explainer.break_even if break_even_of is None else tuple(break_even_of)
    for name in names:
        if name not in explainer.parameters:
            raise InputError("--break-even", name, f"this kind has no parameter {name!r}; known: {', '.join(explainer.parameters)}")
    if not 0 <= within_pct <= MAX_WITHIN_PCT:
        raise InputError("--within", within_pct, f"give a percentage from 0 to {MAX_WITHIN_PCT:g}")
    problem = loaded.problem if explainer.subject is None else explainer.subject
    progress("explain: exact solve", 0, 1)
    base = explainer.solve(problem)
    if base.objective is None and base.status == "infeasible":  # a valid instance without a plan: exit 1, the binding term
        raise InfeasibleError(f"nothing to explain: {base.plan}" if base.plan else "nothing to explain: the exact model is infeasible")
    if base.objective is None:
        raise InputError(loaded.kind.overrides.get("method", "method"), "exact", f"the exact method found no plan ({base.status}): nothing to explain")
    analysis = explainer.analyse(problem, base)
    curve_frames = {request.parameter: curve(explainer, problem, request, base, progress) for request in requests}
    even = break_even(explainer, problem, names, base, progress) if names else None
    near = alternatives(explainer, problem, base, within_pct, progress) if near_optimal else None
    progress("explain done", 1, 1)
    return ExplainResult(loaded.instance.spec.name, loaded.kind.name, explainer.objective_unit, base, analysis, curve_frames, even, near)
