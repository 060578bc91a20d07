"""The threshold design solved: the MILP of models/routing_design.py built from the design grid (design.py) and
the fleet instance's constraints, its choice read back as a :class:`DesignCandidate`, and, when no design exists,
the reason: the SLO (no pool size serves), epsilon (no rule is accurate enough) or which constraints."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optfleet.errors import InfeasibleError
from optfleet.models.constraints import ConstraintKind, ConstraintRegistry
from optfleet.models.routing_design import DesignData, DesignOption, bound_fixed_any, build_design, chosen, formulate_fixed_any
from optfleet.problems.fleet.constraints import BOUND_ORDER, FLEET_CONSTRAINTS, check_fixed
from optfleet.problems.routing.design import DesignCandidate, configurations, design_ratios, fewest_instances, plan_design, rule_traffic, rules
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.solvers import highs
from optfleet.solvers.report import SolveReport

DESIGN_CONSTRAINTS = ConstraintRegistry([
    *(FLEET_CONSTRAINTS[name] for name in FLEET_CONSTRAINTS.names if name != "fixed"),
    ConstraintKind("fixed", formulate_fixed_any, check_fixed, bound=bound_fixed_any),
])
"""The fleet's constraint kinds on the design model (a ``budget`` caps the cost there; ``fixed`` sums over the
candidates' options at its window and GPU configuration)."""


def design_data(problem: RoutingProblem) -> tuple[list[tuple[int, int, float]], DesignData]:
    """The grid's rules and the model's data: every rule's mis-route probability and, per rule, pool and GPU
    configuration that can serve the pool's traffic within the SLO, an option at its fewest instances; the fleet
    instance's constraints and the upper bounds under them (:func:`with_constraints`)."""
    ratios = design_ratios(problem)
    grid = rules(problem)
    configs = configurations(problem)
    long_window = problem.plan.pools[1].window_tokens
    misroute, options, empty = [], [], set()
    for c, rule in enumerate(grid):
        traffic = rule_traffic(problem, rule, ratios)
        misroute.append(traffic.misroute_probability)
        for pool, window in enumerate((rule[0], long_window)):
            if len(traffic.traffic[pool][0]) == 0:
                empty.add((c, pool))
                continue
            for config in configs:
                fewest = fewest_instances(problem, traffic, pool, config, window)
                if fewest >= 0:
                    options.append(DesignOption(c, pool, config.label, config.gpu_name, config.tp, window, fewest, config.cost_per_instance_hour))
    data = DesignData(np.array(misroute), tuple(options), np.array([o.fewest for o in options], dtype=np.int64), problem.fleet,
                      problem.spec.design.epsilon, empty=frozenset(empty))
    return grid, with_constraints(data, problem.fleet.constraints)


def with_constraints(data: DesignData, specs: tuple, base: np.ndarray | None = None) -> DesignData:
    """``data`` carrying the constraints ``specs``, each option's upper bound ``base`` (default its fewest
    instances) widened and capped by the fleet's bound rules in their order (models/routing_design.py)."""
    upper = np.array([o.fewest for o in data.pools], dtype=np.int64) if base is None else base
    for name in BOUND_ORDER:
        upper = DESIGN_CONSTRAINTS[name].bound(data, upper, [(i, spec) for i, spec in enumerate(specs) if spec.kind == name])
    return replace(data, upper=np.asarray(upper, dtype=np.int64), constraints=tuple(specs))


def solve_design(problem: RoutingProblem, prepared: tuple[list[tuple[int, int, float]], DesignData] | None = None
                 ) -> tuple[DesignCandidate, SolveReport]:
    """The least-cost design (models/routing_design.py); InfeasibleError, with the reason, when there is none.
    ``prepared`` is :func:`design_data`'s result for ``problem`` when the caller holds it (explain's price curves
    reprice the options of one computed grid)."""
    grid, data = design_data(problem) if prepared is None else prepared
    served = {(o.candidate, o.pool) for o in data.pools} | data.empty
    servable = [c for c in range(len(grid)) if (c, 0) in served and (c, 1) in served]
    if not servable:
        raise InfeasibleError(f"threshold design: in none of the {len(grid)} candidates can both pools meet the P99 TTFT SLO of "
                              f"{problem.fleet.ttft_p99_ms:g} ms at any size on any GPU configuration (a TTFT floor alone breaks it)")
    model = build_design(data, DESIGN_CONSTRAINTS)
    report = _solve(problem, model)
    if report.objective is not None and any(spec.kind == "gpu_mix" for spec in data.constraints):
        model, report = _certify(problem, data, model, report)
    if report.objective is None:
        raise InfeasibleError(_why_none(problem, data, servable, report))
    c, pools = chosen(model)
    own = plan_design(problem)
    (short, n_short), (long, n_long) = [(pools[p][0].gpu, pools[p][1]) if p in pools else (label, 0)
                                        for p, label in enumerate((own.short_gpu, own.long_gpu))]
    return DesignCandidate(*grid[c], short, long, (n_short, n_long)), report


def _certify(problem: RoutingProblem, data: DesignData, model, report: SolveReport):
    """Under a GPU mix the widened bounds are a heuristic (models/routing_design.py).  A design of cost at most the
    one found has ``n_j <= cost / pi_j`` instances in every option, so the model is solved again with every bound at
    least that (then capped by budgets and availability): its optimum is proven over all instance counts.  Should
    that solve find nothing (a time limit), the first solve's design and report stand."""
    cost = float(report.objective)
    base = np.array([max(o.fewest, int(np.floor(cost / o.cost_per_instance_hour * (1 + 1e-9)))) for o in data.pools], dtype=np.int64)
    widened = with_constraints(data, data.constraints, base=np.maximum(base, data.upper))
    if (widened.upper <= data.upper).all():
        return model, report
    certified = build_design(widened, DESIGN_CONSTRAINTS)
    second = _solve(problem, certified)
    return (certified, second) if second.objective is not None else (model, report)


def _solve(problem: RoutingProblem, model) -> SolveReport:
    return highs.solve(model, solver=problem.spec.solve.solver, time_limit=problem.spec.solve.time_limit_s)


def _why_none(problem: RoutingProblem, data: DesignData, servable: list[int], report: SolveReport) -> str:
    """Why the design model has no solution: epsilon, or the constraints without which it has one."""
    if report.status != "infeasible":
        return f"threshold design: the solver found no design ({report.summary})"
    eps = problem.spec.design.epsilon
    least = float(data.misroute[servable].min())
    if least > eps + 1e-12:
        return (f"threshold design: no candidate of the {len(servable)} whose pools can meet the SLO keeps the mis-route probability "
                f"within {100 * eps:.3g} % (the least is {100 * least:.3g} %); try lower threshold fractions")
    specs = data.constraints
    blocking = []
    for i, spec in enumerate(specs):
        model = build_design(with_constraints(data, specs[:i] + specs[i + 1:]), DESIGN_CONSTRAINTS)
        without = _solve(problem, model)
        if without.objective is not None:
            blocking.append(f"constraints[{i}] ({spec.kind}; least ${without.objective:,.2f}/h without it)")
    which = (f"without {' or '.join(blocking)} a design exists" if blocking
             else "no single constraint's removal gives one: they conflict together")
    caveat = " (under a GPU mix: within the instance-count bounds, which are a heuristic there)" if any(s.kind == "gpu_mix" for s in specs) else ""
    return (f"threshold design: rules within epsilon exist, but no GPU choice for their pools meets the fleet instance's constraints{caveat}; "
            f"{which}")
