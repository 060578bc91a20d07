"""Why a profiled-fleet instance has no feasible plan, in words (never a solver dump).

Checks run from the most specific to the most general and the first that
applies is the answer:

1. a bucket with demand that no type can serve (``T[g,b] = 0`` for all g);
2. a bucket that all *available* GPUs together cannot carry on its own:
   ``sum_g  floor_g(avail_g) u T[g,b] < lambda_b`` over the types that can
   serve it, where ``floor_g`` rounds the cap down to whole instances and nodes;
3. ``gpu_mix`` shares that contradict each other: minimum shares of distinct
   types adding to more than 1, a type whose minimum exceeds its maximum over
   several constraints, or maximum shares of every type adding to less than 1;
   more types with a positive minimum share than ``max_types`` allows;
4. drop-one: the constraints whose removal alone makes the instance
   feasible (each re-solved as a feasibility problem); if none, the
   constraints only exclude every plan together, and all are named.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from optfleet.problems.profiled_fleet.constraints import describe_constraint
from optfleet.problems.profiled_fleet.problem import ProfiledProblem, unservable_message

SHARE_SLACK = 1e-9


def explain_infeasible(problem: ProfiledProblem, is_feasible: Callable[[ProfiledProblem], bool]) -> str:
    """The reason ``problem`` is infeasible; ``is_feasible`` solves a variant (used by the drop-one check)."""
    for check in (unservable_message, _bucket_over_availability, _contradictory_shares):
        reason = check(problem)
        if reason:
            return reason
    constraints = problem.constraints
    culprits = [describe_constraint(i, c) for i, c in enumerate(constraints) if is_feasible(problem.with_constraints(constraints[:i] + constraints[i + 1:]))]
    if culprits:
        if len(culprits) == 1:
            return f"{culprits[0]} excludes every plan; without it the instance is feasible"
        return f"the constraints exclude every plan together; dropping any one of {', '.join(culprits)} makes the instance feasible"
    if constraints:
        listed = ", ".join(describe_constraint(i, c) for i, c in enumerate(constraints))
        return f"the constraints exclude every plan together (no single one is to blame): {listed}"
    return "no plan serves the demand (the unconstrained model is infeasible)"


def _available_gpus(problem: ProfiledProblem) -> dict[str, tuple[int, str]]:
    """Per capped type: the usable GPU count (rounded down to whole instances and nodes) and the cap in words."""
    caps: dict[str, tuple[int, str]] = {}
    for i, c in enumerate(problem.constraints):
        if c.kind == "availability" and (c.gpu not in caps or c.max_gpus < caps[c.gpu][0]):
            caps[c.gpu] = (c.max_gpus, f"constraints[{i}]")
    usable = {}
    for name, (cap, label) in caps.items():
        multiple = problem.gpu_multiple(problem.gpu_index(name))
        whole = cap // multiple * multiple
        words = f"{cap} ({label})" if whole == cap else f"{cap} ({label}), {whole} in whole instances/nodes of {multiple}"
        usable[name] = (whole, words)
    return usable


def _bucket_over_availability(problem: ProfiledProblem) -> str | None:
    caps = _available_gpus(problem)
    u = problem.max_utilisation
    for b in problem.demand_buckets:
        servers = [g for g in problem.gpus if g.can_serve(b.index)]
        if any(g.name not in caps for g in servers):
            continue
        capacity = sum(caps[g.name][0] // g.gpus_per_instance * u * g.max_rps[b.index] for g in servers)
        if capacity >= b.rate_rps * (1 - SHARE_SLACK):
            continue
        others = [g.name for g in problem.gpus if not g.can_serve(b.index)]
        parts = []
        for g in servers:
            need = b.rate_rps / (u * g.max_rps[b.index]) * g.gpus_per_instance
            parts.append(f"{_num(need)} {g.name} GPUs, but availability caps {g.name} at {caps[g.name][1]}")
        head = f"bucket {b.label} carries {b.rate_rps:g} req/s" + (f" (utilisation cap {u:g})" if u < 1 else "")
        if len(servers) == 1:
            text = f"{head} and needs {parts[0]}"
        else:
            text = f"{head}; the available GPUs serve at most {capacity:g} req/s of it (on its own it needs " + "; or ".join(parts) + ")"
        if others:
            text += f"; {_join(others)} cannot serve it"
        return text
    return None


def _contradictory_shares(problem: ProfiledProblem) -> str | None:
    mixes = [(i, c) for i, c in enumerate(problem.constraints) if c.kind == "gpu_mix"]
    if not mixes:
        return None
    low: dict[str, tuple[float, list[str]]] = {}
    high: dict[str, tuple[float, list[str]]] = {}
    for i, c in mixes:
        if c.min_share > low.get(c.gpu, (0.0, []))[0]:
            low[c.gpu] = (c.min_share, [f"constraints[{i}]"])
        if c.max_share < high.get(c.gpu, (1.0, []))[0]:
            high[c.gpu] = (c.max_share, [f"constraints[{i}]"])
    for gpu, (lo, lo_at) in low.items():
        hi, hi_at = high.get(gpu, (1.0, []))
        if lo > hi + SHARE_SLACK:
            return f"gpu_mix: {gpu} must be at least {lo:g} of all GPUs ({lo_at[0]}) and at most {hi:g} ({hi_at[0]})"
    total_low = sum(lo for lo, _ in low.values())
    if total_low > 1 + SHARE_SLACK:
        listed = ", ".join(f"{gpu} >= {lo:g} ({at[0]})" for gpu, (lo, at) in low.items())
        return f"gpu_mix minimum shares add up to {total_low:g} > 1: {listed}"
    if len(high) == len(problem.gpus):
        total_high = sum(hi for hi, _ in high.values())
        if total_high < 1 - SHARE_SLACK:
            listed = ", ".join(f"{gpu} <= {hi:g} ({at[0]})" for gpu, (hi, at) in high.items())
            return f"gpu_mix maximum shares of all types add up to {total_high:g} < 1, so no fleet with GPUs fits: {listed}"
    required = [gpu for gpu, (lo, _) in low.items() if lo > 0]
    for i, c in enumerate(problem.constraints):
        if c.kind == "max_types" and len(required) > c.count:
            return (
                f"{describe_constraint(i, c)} allows {c.count} type(s), but gpu_mix minimum shares require "
                f"{len(required)} ({_join(required)})"
            )
    return None


def _num(value: float) -> str:
    return f"{value:.3g}" if not math.isclose(value, round(value)) else f"{round(value)}"


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
