"""The one evaluator of profiled-fleet plans: whoever made a plan, it is scored here.

For a plan with ``n_g`` GPUs of type g (``I_g = n_g / k_g`` instances of
``k_g`` GPUs) and routing shares ``x[b,g]``, with the notation of
``optfleet.problems.profiled_fleet.problem`` (Mélange, arXiv:2404.14527, section 5):

    load_g    = sum_b L[b,g] x[b,g]          instances' worth of load on g
    capacity  : load_g <= u I_g              (u = max_utilisation)
    cost      = sum_g price_g n_g            $/hour
    served    = sum_b lambda_b min(1, sum_g x[b,g])   req/s

and the routing rules: every bucket with demand is fully routed (only a
budget cap allows less, at one common share with ``admission: uniform``),
nothing goes to a type with ``T[g,b] = 0``, shares are multiples of
``1/s`` with ``s`` slices per bucket, GPU counts are whole instances.  Each
user constraint is re-checked by the check registered with its kind
(optfleet/problems/profiled_fleet/constraints.py).  The
verdict lists every violation in words; ``feasible`` means there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from optfleet.errors import InputError
from optfleet.problems.profiled_fleet.plan import ProfiledPlan
from optfleet.problems.profiled_fleet.problem import ProfiledProblem

LOAD_TOLERANCE = 1e-7  # relative slack on capacity, budget and share rows (solver tolerances are ~1e-9 to 1e-7)
SHARE_TOLERANCE = 1e-6  # absolute slack on routing shares and slice multiples


@dataclass(frozen=True)
class TypeLoad:
    """One GPU type in a plan: GPUs, instances, load against capacity, traffic and cost."""

    name: str
    gpus: int
    gpus_per_instance: int
    instances: int
    load_instances: float
    capacity_instances: float
    served_rps: float
    cost_per_hour: float

    @property
    def utilisation(self) -> float:
        """``load / instances`` (0 for a type without instances)."""
        return self.load_instances / self.instances if self.instances else 0.0

    @property
    def fits(self) -> bool:
        return self.load_instances <= self.capacity_instances * (1 + LOAD_TOLERANCE) + LOAD_TOLERANCE


@dataclass(frozen=True)
class ConstraintCheck:
    """One user constraint re-checked on a plan."""

    label: str
    kind: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class ProfiledEvaluation:
    """A scored plan: per-type loads, constraint checks, cost, served rate and every violation."""

    plan: ProfiledPlan
    types: tuple[TypeLoad, ...]
    checks: tuple[ConstraintCheck, ...]
    cost_per_hour: float
    served_rps: float
    demand_rps: float
    violations: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def served_share(self) -> float:
        return self.served_rps / self.demand_rps if self.demand_rps > 0 else 1.0

    @property
    def types_used(self) -> int:
        return sum(1 for t in self.types if t.gpus > 0)


def plan_cost_per_hour(problem: ProfiledProblem, plan: ProfiledPlan) -> float:
    """``sum_g price_g n_g`` in $/hour."""
    return sum(g.cost_per_gpu_hour * n for g, n in zip(problem.gpus, plan.gpus, strict=True))


def evaluate(problem: ProfiledProblem, plan: ProfiledPlan) -> ProfiledEvaluation:
    """Score ``plan`` on ``problem`` (see the module docstring); InputError if the plan does not fit the instance's shape."""
    _check_plan_shape(problem, plan)
    violations: list[str] = []
    s = problem.slices_per_bucket
    budget = problem.budget
    routed = {}
    for b in problem.demand_buckets:
        row = plan.routing[b.index]
        total = sum(row)
        routed[b.index] = total
        if any(v < -SHARE_TOLERANCE for v in row):
            violations.append(f"bucket {b.label} has a negative routing share")
        if total > 1 + SHARE_TOLERANCE:
            violations.append(f"bucket {b.label} is routed {100 * total:.4g} % (over 100 %)")
        elif total < 1 - SHARE_TOLERANCE and budget is None:
            violations.append(f"bucket {b.label} is only {100 * total:.4g} % routed and no budget cap allows rejecting requests")
        for g, share in zip(problem.gpus, row, strict=True):
            if share > SHARE_TOLERANCE and not g.can_serve(b.index):
                violations.append(f"bucket {b.label} sends {100 * share:.4g} % to {g.name}, which cannot serve it (max_rps 0)")
            if s is not None and abs(share * s - round(share * s)) > SHARE_TOLERANCE * s:
                violations.append(f"bucket {b.label} sends {share:.6g} to {g.name}, not a whole number of its {s} slice(s)")
    if budget is not None and budget.admission == "uniform" and routed:
        if max(routed.values()) - min(routed.values()) > SHARE_TOLERANCE:
            violations.append("uniform admission: the buckets are served at different shares")

    types = []
    for g, (gpu, n) in enumerate(zip(problem.gpus, plan.gpus, strict=True)):
        if n < 0:
            violations.append(f"{gpu.name} has a negative GPU count {n}")
        if n % gpu.gpus_per_instance:
            violations.append(f"{gpu.name}: {n} GPUs is not a whole number of {gpu.gpus_per_instance}-GPU instances")
        instances = max(n, 0) // gpu.gpus_per_instance
        load = 0.0
        served = 0.0
        for b in problem.demand_buckets:
            share = plan.routing[b.index][g]
            if share > 0.0 and gpu.can_serve(b.index):
                load += problem.instance_load(b.index, g) * share
                served += b.rate_rps * share
        t = TypeLoad(
            name=gpu.name,
            gpus=n,
            gpus_per_instance=gpu.gpus_per_instance,
            instances=instances,
            load_instances=load,
            capacity_instances=problem.max_utilisation * instances,
            served_rps=served,
            cost_per_hour=gpu.cost_per_gpu_hour * n,
        )
        if not t.fits:
            need = problem.gpus_to_carry(load, g)
            violations.append(
                f"{gpu.name} is overloaded: {load:.4g} instances of load on {instances} instance(s) at utilisation cap "
                f"{problem.max_utilisation:g} (needs {need} GPUs)"
            )
        types.append(t)

    demand = sum(b.rate_rps for b in problem.demand_buckets)
    served = sum(b.rate_rps * min(1.0, max(0.0, routed[b.index])) for b in problem.demand_buckets)
    evaluation = ProfiledEvaluation(
        plan=plan,
        types=tuple(types),
        checks=(),
        cost_per_hour=plan_cost_per_hour(problem, plan),
        served_rps=served,
        demand_rps=demand,
        violations=tuple(violations),
    )
    return _with_constraint_checks(problem, evaluation) if problem.constraints else evaluation


def _with_constraint_checks(problem: ProfiledProblem, evaluation: ProfiledEvaluation) -> ProfiledEvaluation:
    """``evaluation`` with each user constraint re-checked by its registered check, and the broken ones among
    its violations."""
    from optfleet.problems.profiled_fleet.constraints import PROFILED_CONSTRAINTS, describe_constraint  # Pyomo (the formulations) only here

    checks = tuple(ConstraintCheck(describe_constraint(i, c), c.kind, verdict.holds, verdict.detail)
                   for i, c, verdict in PROFILED_CONSTRAINTS.verdicts(problem, evaluation, problem.constraints))
    broken = tuple(f"{check.label} is violated: {check.detail}" for check in checks if not check.holds)
    return replace(evaluation, checks=checks, violations=evaluation.violations + broken)


def _check_plan_shape(problem: ProfiledProblem, plan: ProfiledPlan) -> None:
    if tuple(plan.gpu_names) != problem.gpu_names:
        raise InputError("plan.gpu_names", plan.gpu_names, f"must list the instance's GPU types in order: {problem.gpu_names}")
    if len(plan.gpus) != len(problem.gpus):
        raise InputError("plan.gpus", plan.gpus, f"needs one count per GPU type ({len(problem.gpus)})")
    if len(plan.routing) != len(problem.buckets) or any(len(row) != len(problem.gpus) for row in plan.routing):
        raise InputError("plan.routing", len(plan.routing), f"needs {len(problem.buckets)} rows of {len(problem.gpus)} shares")
