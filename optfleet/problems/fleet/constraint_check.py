"""Check a scored fleet plan against the instance's declarative ``constraints:``.

The MILP enforces these constraints (models/fleet_constraints.py); heuristics
do not know them.  This check states, for any plan, which ones it breaks, in
the same terms: GPU counts are GPUs (``tp x instances``), shares are of all
GPUs, and a pool counts towards ``max_pools`` when it has at least one GPU.
"""

from __future__ import annotations

from collections import Counter

from optfleet.problems.fleet.evaluator import FleetEvaluation
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.hardware import get_gpu

_SLACK = 1e-9


def constraint_violations(problem: FleetProblem, evaluation: FleetEvaluation) -> list[str]:
    """``["constraints[0] (availability): 6152 H100-SXM GPUs > 16", ...]``; empty when the plan meets them all."""
    gpus_by_type: Counter[str] = Counter()
    pools_by_key = {}
    for pool_plan in evaluation.plan.pools:
        config = problem.configuration(pool_plan.gpu)
        gpus_by_type[config.gpu_name] += config.tp * pool_plan.gpus
        pools_by_key[(config.label, pool_plan.window_tokens)] = pool_plan.gpus
    total = sum(gpus_by_type.values())
    used_pools = sum(1 for p in evaluation.plan.pools if p.gpus > 0)
    broken = []
    for i, spec in enumerate(problem.constraints):
        where = f"constraints[{i}] ({spec.kind})"
        if spec.kind == "budget" and evaluation.cost_per_hour > spec.max_cost_per_hour * (1 + _SLACK):
            broken.append(f"{where}: ${evaluation.cost_per_hour:,.2f}/h > ${spec.max_cost_per_hour:,.2f}/h")
        elif spec.kind == "availability":
            have = gpus_by_type[get_gpu(spec.gpu).name]
            if have > spec.max_gpus:
                broken.append(f"{where}: {have} {get_gpu(spec.gpu).name} GPUs > {spec.max_gpus}")
        elif spec.kind == "gpu_mix":
            share = gpus_by_type[get_gpu(spec.gpu).name] / total if total else 0.0
            if not spec.min_share - _SLACK <= share <= spec.max_share + _SLACK:
                broken.append(f"{where}: {get_gpu(spec.gpu).name} share {share:.3f} outside [{spec.min_share}, {spec.max_share}]")
        elif spec.kind == "max_pools" and used_pools > spec.count:
            broken.append(f"{where}: {used_pools} pools > {spec.count}")
        elif spec.kind == "max_types":
            types = sum(1 for n in gpus_by_type.values() if n > 0)
            if types > spec.count:
                broken.append(f"{where}: {types} GPU types > {spec.count}")
        elif spec.kind == "node_multiple":
            names = [get_gpu(spec.gpu).name] if spec.gpu is not None else list(gpus_by_type)
            for name in names:
                if gpus_by_type[name] % spec.gpus_per_node:
                    broken.append(f"{where}: {gpus_by_type[name]} {name} GPUs is not a multiple of {spec.gpus_per_node}")
        elif spec.kind == "fixed":
            label = problem.configuration_label(spec.gpu, spec.tp)
            have = pools_by_key.get((label, spec.window_tokens), 0)
            if have != spec.gpus:
                broken.append(f"{where}: {have} instances at {label} w{spec.window_tokens}, pinned to {spec.gpus}")
    return broken
