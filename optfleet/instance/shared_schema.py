"""The schema pieces several kinds share: the strict base of an instance model, the number types every field
uses, and the constraint kinds more than one kind accepts in its ``constraints:`` (the fleet and the profiled fleet).

Numbers: every numeric field is a :data:`Real` or an :data:`Integer` (or a bounded alias of one), so that

* a boolean is never read as a number (pydantic's lax mode would take ``true`` as 1 or 1.0);
* NaN and +-inf are refused everywhere (``allow_inf_nan=False`` in :class:`Strict`): no field of any kind has
  a meaning for them, and a NaN compares false with every bound, so it would slip past ``ge``/``le``;
* magnitudes are bounded (:func:`at_most`) where a huge value would overflow int64, lose float64 exactness
  or size an array or a loop: the message states the limit and what it protects.

Each constraint kind is registered, with its model block and plan check, by each problem kind that offers it
(optfleet/problems/<kind>/constraints.py).  Units are in the field names; unknown keys are errors.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from collections.abc import Mapping

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError


class Strict(BaseModel):
    """An immutable model that forbids unknown keys (a typo is an error naming the field, not an ignored setting)
    and non-finite floats (NaN and +-inf in any float field, list items included)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


RENAMED_FIELD = "renamed_field"
"""The error type :func:`refuse_renamed` raises; the loader names the old field's path and value
(optfleet.instance.loader.validate_spec)."""


def refuse_renamed(data: Any, renamed: Mapping[str, tuple[str, str]]) -> Any:
    """The body of a ``model_validator(mode="before")``: a field given under an old name (``renamed`` maps it to
    its new name and why it changed) is refused with a message naming the new one, rather than as an unknown key."""
    if isinstance(data, Mapping):
        for old, (new, why) in renamed.items():
            if old in data:
                raise PydanticCustomError(RENAMED_FIELD, "renamed {new}: {why}", {"old": old, "new": new, "why": why, "value": data[old]})
    return data


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number (write the number itself)")
    return value


def _finite_number(value: Any) -> Any:
    if isinstance(_not_a_boolean(value), float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def at_most(maximum: float, unit: str, protects: str) -> AfterValidator:
    """A validator refusing values above ``maximum`` with a message stating the limit, its unit and what it
    protects; use as ``Annotated[Integer, at_most(...)]``."""

    def check(value: float) -> float:
        if value > maximum:
            raise ValueError(f"above the limit of {maximum:,} {unit} ({protects})")
        return value

    return AfterValidator(check)


Real = Annotated[float, BeforeValidator(_not_a_boolean)]
"""A finite float; never a boolean."""

Integer = Annotated[int, BeforeValidator(_not_a_boolean)]
"""An integer; never a boolean (a float with a fractional part is refused by pydantic)."""

Number = Annotated[int | float, BeforeValidator(_finite_number)]
"""A finite integer or float, kept as given (an integer beyond float64's exact range is not rounded), for
tables whose reader checks the values itself (CDF points)."""

def _finite_rate(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        raise ValueError("no fleet serves an infinite request rate (infeasible as stated); give a finite rate")
    return value


RequestRate = Annotated[Real, BeforeValidator(_finite_rate)]
"""A request rate: a finite float, refused when infinite with the reason (no finite fleet serves it)."""

MAX_TOKENS = 2**53
"""Token counts (windows, lengths, KV capacities, cache sizes) are at most 2**53, the largest integer a float64
holds exactly: the queueing model, the LPs and the TTFT model compute with token counts in float64, so a larger
count would be silently rounded (and past 2**63 numpy's int64 overflows)."""

TOKEN_LIMIT = at_most(MAX_TOKENS, "tokens", "the largest count float64 holds exactly")
Tokens = Annotated[Integer, TOKEN_LIMIT]

MAX_SHARE = 1e12
"""A share or weight that counts only relative to its siblings (a traffic category's share, a synthetic class's share,
an empirical length's weight): a trillion to one already makes the smaller ones vanish, and below the limit the sum of
the 4,096 categories an instance may have stays finite (1e308 + 1e308 overflowed to inf, and the draw that divides by
the sum failed with an internal error)."""

Share = Annotated[Real, at_most(MAX_SHARE, "per share", "only the ratios count; larger ones overflow the sum the draw divides by")]
"""A finite relative share or weight, at most :data:`MAX_SHARE` (bounds below it are the field's own)."""

MAX_GPUS = 10**9
"""GPU counts a constraint states (a pool's fixed size, an availability cap, a node's size): a billion GPUs, a
hundred times more than are installed worldwide, so a larger count is a typo.  The MILP takes these counts as
variable bounds and still solves a fixed pool this large exactly; far beyond, float64 coefficients lose whole GPUs."""

GpuCount = Annotated[Integer, at_most(MAX_GPUS, "GPUs", "a hundred times more than are installed worldwide")]

InstanceCount = Annotated[Integer, at_most(MAX_GPUS, "instances", "a hundred times more GPUs than are installed worldwide")]
"""Instances of one GPU configuration (a plan's pool size, a pinned pool): an instance of tensor-parallel degree t
holds t GPUs, so a count of instances is at most the GPU limit too."""

INSTANCE_COUNT_RENAMED = {"gpus": ("instances", "a pool's size counts instances, and an instance of tensor-parallel degree t holds t GPUs")}
"""The old name of an instance count (a plan's pool, a pinned pool), for :func:`refuse_renamed`."""

MAX_GPUS_PER_INSTANCE = 1024
"""GPUs serving one model instance (tensor-parallel degree, profiled instance size): the largest NVLink domain
sold has 72 GPUs (GB200 NVL72), so 1024 leaves room for larger ones while every per-instance product (slots,
memory, price) stays small."""

GpusPerInstance = Annotated[Integer, at_most(MAX_GPUS_PER_INSTANCE, "GPUs per instance", "larger than any NVLink domain")]

MAX_PLAN_PARTS = 1000
"""Pools or GPU types a plan may be limited to (``max_pools``, ``max_types``): every pool is one GPU x TP x window
option, and no catalog offers a thousand, so a larger cap means "no cap" and is written by leaving it out."""

PlanParts = Annotated[Integer, at_most(MAX_PLAN_PARTS, "pools or GPU types", "more than any catalog offers")]


class AvailabilityConstraint(Strict):
    """At most ``max_gpus`` GPUs of one type (an instance of TP degree t counts t GPUs)."""

    kind: Literal["availability"]
    gpu: str
    """The GPU type capped, by its name: a catalog GPU in a fleet, one of ``gpus[].name`` in a profiled fleet."""
    max_gpus: GpuCount = Field(ge=0)
    """Most GPUs of that type the plan may hold; an instance of tensor-parallel degree t counts t GPUs."""


class GpuMixConstraint(Strict):
    """The share of one GPU type among all GPUs lies in [min_share, max_share]."""

    kind: Literal["gpu_mix"]
    gpu: str
    """The GPU type whose share is bounded, by its name (as in ``availability``)."""
    min_share: Real = Field(0.0, ge=0.0, le=1.0)
    """Smallest share of that type among all the plan's GPUs (0 to 1)."""
    max_share: Real = Field(1.0, ge=0.0, le=1.0)
    """Largest share of that type among all the plan's GPUs (0 to 1)."""


class MaxTypesConstraint(Strict):
    """At most ``count`` distinct GPU types in the fleet."""

    kind: Literal["max_types"]
    count: PlanParts = Field(ge=1)
    """Most distinct GPU types the plan may use."""
