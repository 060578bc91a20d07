"""A pd_fleet plan: per pool, one aggregated option with its instance count, or one (prefill, decode) pair with both
counts.  Plans speak the instance's vocabulary (option labels such as ``"P H100-SXM x4 B8192"``), so their dictionary
form reads back with :func:`plan_from_dict` and is scored again by the one evaluator (evaluator.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optfleet.errors import InputError
from optfleet.problems.pd_fleet.analytic import MAX_INSTANCES
from optfleet.problems.pd_fleet.problem import AggregatedOption, DecodeOption, PdProblem, PrefillOption


@dataclass(frozen=True)
class AggregatedPoolPlan:
    """``instances`` instances of the aggregated option labelled ``option``."""

    option: str
    instances: int

    def describe(self) -> str:
        return f"{self.instances} x {self.option}"


@dataclass(frozen=True)
class DisaggregatedPoolPlan:
    """``prefill_instances`` of the prefill option ``prefill`` sending KV caches to ``decode_instances`` of ``decode``
    (the link is the instance's for that GPU pair)."""

    prefill: str
    prefill_instances: int
    decode: str
    decode_instances: int

    def describe(self) -> str:
        return f"{self.prefill_instances} x {self.prefill} + {self.decode_instances} x {self.decode}"


PoolPlan = AggregatedPoolPlan | DisaggregatedPoolPlan | None
"""One pool's choice (None: a pool without traffic, which needs no instance)."""


@dataclass(frozen=True)
class PdPlan:
    """``pools[j]``: pool j's choice, in the instance's pool order."""

    method: str
    pools: tuple[PoolPlan, ...]

    def to_dict(self) -> dict[str, Any]:
        """The plan in the instance's vocabulary (``plan_from_dict`` reads it back)."""
        pools: list[dict[str, Any] | None] = []
        for choice in self.pools:
            if isinstance(choice, AggregatedPoolPlan):
                pools.append({"aggregated": choice.option, "instances": choice.instances})
            elif isinstance(choice, DisaggregatedPoolPlan):
                pools.append({"prefill": choice.prefill, "prefill_instances": choice.prefill_instances,
                              "decode": choice.decode, "decode_instances": choice.decode_instances})
            else:
                pools.append(None)
        return {"method": self.method, "pools": pools}


def plan_from_dict(problem: PdProblem, data: dict[str, Any]) -> PdPlan:
    """Read a plan written by :meth:`PdPlan.to_dict` (InputError naming the bad field; a pool with traffic needs
    instances, as in the fleet kind's plans)."""
    rows = data.get("pools")
    if not isinstance(rows, list) or len(rows) != len(problem.pools):
        raise InputError("plan.pools", rows, f"needs one entry per pool ({len(problem.pools)})")
    pools: list[PoolPlan] = []
    for j, row in enumerate(rows):
        field = f"plan.pools[{j}]"
        if row is None:
            if problem.pools[j].busy:
                raise InputError(field, None, f"{problem.pools[j].label} receives {problem.pools[j].rate_rps:.4g} req/s "
                                 "but the plan gives it no instances")
            pools.append(None)
        elif isinstance(row, dict) and "aggregated" in row:
            _only(row, AGGREGATED_KEYS, field)
            _of_type(problem, row["aggregated"], AggregatedOption, f"{field}.aggregated")
            pools.append(AggregatedPoolPlan(row["aggregated"], _count(row.get("instances"), f"{field}.instances")))
        elif isinstance(row, dict) and "prefill" in row:
            _only(row, DISAGGREGATED_KEYS, field)
            _of_type(problem, row["prefill"], PrefillOption, f"{field}.prefill")
            _of_type(problem, row.get("decode"), DecodeOption, f"{field}.decode")
            pools.append(DisaggregatedPoolPlan(row["prefill"], _count(row.get("prefill_instances"), f"{field}.prefill_instances"),
                                               row["decode"], _count(row.get("decode_instances"), f"{field}.decode_instances")))
        else:
            raise InputError(field, row, "give aggregated + instances, or prefill, prefill_instances, decode, decode_instances")
    return PdPlan(str(data.get("method", "file")), tuple(pools))


AGGREGATED_KEYS = ("aggregated", "instances")
DISAGGREGATED_KEYS = ("prefill", "prefill_instances", "decode", "decode_instances")


def _only(row: dict[str, Any], keys: tuple[str, ...], field: str) -> None:
    """Refuse a pool row holding keys of the other mode (or unknown ones): it would be read as one mode, the rest lost."""
    extra = sorted((k for k in row if k not in keys), key=str)  # a YAML plan file may hold keys of any type
    if extra:
        mode = "an aggregated" if keys is AGGREGATED_KEYS else "a disaggregated"
        raise InputError(f"{field}.{extra[0]}", row[extra[0]], f"is not a field of {mode} pool row ({', '.join(keys)}): give one "
                         "mode per pool")


def _of_type(problem: PdProblem, label: Any, kind: type, field: str) -> None:
    role = kind.__name__.removesuffix("Option").lower()
    if label is None:
        raise InputError(field, label, f"is missing: give the label of a {role} option of this instance")
    if not isinstance(problem.option(str(label), field), kind):
        raise InputError(field, label, f"is not {'an' if role[0] in 'aeiou' else 'a'} {role} option")


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(field, value, "must be an integer >= 1")
    if value > MAX_INSTANCES:
        raise InputError(field, value, f"above the limit of {MAX_INSTANCES:,} instances of one role (the most the pool "
                         "model counts; the simulator keeps a state per instance)")
    return value
