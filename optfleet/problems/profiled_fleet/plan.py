"""A profiled-fleet plan: GPUs per type and the routing share of every bucket per type.

A plan speaks the instance's vocabulary (GPU type names, bucket token
ranges), so its dictionary form can be read back with :func:`plan_from_dict`
and scored again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optfleet.errors import InputError
from optfleet.problems.profiled_fleet.problem import ProfiledProblem


@dataclass(frozen=True)
class ProfiledPlan:
    """``gpus[g]``: GPUs of type g (problem order); ``routing[b][g]``: share of bucket b's requests sent to g.

    A row sums to the share of the bucket that is served (1 unless a budget
    cap makes the plan reject some requests).  Rows of buckets without demand
    are ignored by the evaluator.
    """

    method: str
    gpu_names: tuple[str, ...]
    gpus: tuple[int, ...]
    routing: tuple[tuple[float, ...], ...]

    def gpus_of(self, name: str) -> int:
        return self.gpus[self.gpu_names.index(name)]

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus)

    def describe_gpus(self) -> str:
        """``"3 A10G + 1 A100-80GB"`` (types with GPUs only; ``"no GPUs"`` otherwise)."""
        used = [f"{n} {name}" for name, n in zip(self.gpu_names, self.gpus, strict=True) if n > 0]
        return " + ".join(used) if used else "no GPUs"

    def to_dict(self, problem: ProfiledProblem) -> dict[str, Any]:
        """The plan in the instance's vocabulary: GPUs by type, then per bucket its token ranges and shares."""
        rows = []
        for bucket, shares in zip(problem.buckets, self.routing, strict=True):
            rows.append({
                "input_tokens": [bucket.input_from_tokens, bucket.input_to_tokens],
                "output_tokens": [bucket.output_from_tokens, bucket.output_to_tokens],
                "shares": {name: share for name, share in zip(self.gpu_names, shares, strict=True) if share > 0.0},
            })
        return {"method": self.method, "gpus": dict(zip(self.gpu_names, self.gpus, strict=True)), "routing": rows}


def plan_from_dict(problem: ProfiledProblem, data: dict[str, Any]) -> ProfiledPlan:
    """Read a plan written by :meth:`ProfiledPlan.to_dict` back (InputError naming the bad field)."""
    names = problem.gpu_names
    gpus_in = data.get("gpus", {})
    unknown = [name for name in gpus_in if name not in names]
    if unknown:
        raise InputError("plan.gpus", unknown[0], f"is not a GPU type of the instance; types: {', '.join(names)}")
    rows = data.get("routing", [])
    if len(rows) != len(problem.buckets):
        raise InputError("plan.routing", len(rows), f"needs one entry per bucket ({len(problem.buckets)})")
    routing = []
    for b, row in enumerate(rows):
        shares = row.get("shares", {})
        for name in shares:
            if name not in names:
                raise InputError(f"plan.routing[{b}].shares", name, "is not a GPU type of the instance")
        routing.append(tuple(float(shares.get(name, 0.0)) for name in names))
    gpus = tuple(int(gpus_in.get(name, 0)) for name in names)
    return ProfiledPlan(str(data.get("method", "file")), names, gpus, tuple(routing))
