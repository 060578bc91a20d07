"""The schema pieces several kinds share: the strict base of an instance model, and the constraint kinds
more than one kind accepts in its ``constraints:`` (the fleet and the profiled fleet).

Each constraint kind is registered, with its model block and plan check, by each problem kind that offers it
(optfleet/problems/<kind>/constraints.py).  Units are in the field names; unknown keys are errors.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """An immutable model that forbids unknown keys: a typo is an error naming the field, not an ignored setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AvailabilityConstraint(Strict):
    """At most ``max_gpus`` GPUs of one type (an instance of TP degree t counts t GPUs)."""

    kind: Literal["availability"]
    gpu: str
    max_gpus: int = Field(ge=0)


class GpuMixConstraint(Strict):
    """The share of one GPU type among all GPUs lies in [min_share, max_share]."""

    kind: Literal["gpu_mix"]
    gpu: str
    min_share: float = Field(0.0, ge=0.0, le=1.0)
    max_share: float = Field(1.0, ge=0.0, le=1.0)


class MaxTypesConstraint(Strict):
    """At most ``count`` distinct GPU types in the fleet."""

    kind: Literal["max_types"]
    count: int = Field(ge=1)
