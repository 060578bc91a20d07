"""Typed schema of a ``kind: profiled_fleet`` instance file (validated with pydantic).

A profiled fleet sizes GPU pools from *measured* throughput instead of a
queueing model (Mélange, Griggs et al., "Mélange: Cost Efficient Large
Language Model Serving by Exploiting GPU Heterogeneity", arXiv:2404.14527,
2024; solver at github.com/tyler-griggs/melange-release).  Requests are
bucketed on a grid of input-length x output-length ranges; for every GPU type
the file gives ``max_rps[i][o]``, the largest request rate of bucket (i, o)
that **one instance** of ``gpus_per_instance`` GPUs sustains within the
service's latency SLO (with the default ``gpus_per_instance: 1`` that is
per GPU, as in Mélange's tables).  ``0`` marks a bucket the type cannot serve
within the SLO.

Only what one field can check is checked here; everything that needs two
fields (table shapes against the bucket edges, shares summing to 1, catalog
prices, constraint GPU names) is checked in ``optfleet.problems.profiled_fleet.problem``,
which raises :class:`~optfleet.errors.InputError` naming the field.  Units are
in the field names; unknown keys are errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from optfleet.instance.shared_schema import AvailabilityConstraint, GpuCount, GpuMixConstraint, GpusPerInstance, Integer, MaxTypesConstraint, Real, RequestRate, Strict, Tokens, at_most

NonNegative = Annotated[Real, Field(ge=0.0)]
TokenEdge = Annotated[Tokens, Field(ge=0)]

MAX_SLICES_PER_BUCKET = 1000
"""A slice is ``1/slices_per_bucket`` of a bucket's share, an integer variable of the MILP: past a thousand, a
slice is smaller than the solver's feasibility tolerance lets it tell apart, and ``splitting: fractional`` is the
exact limit anyway."""


class BucketGridSpec(Strict):
    """Bucket edges in tokens: ``k + 1`` edges make ``k`` ranges ``[e_0, e_1), [e_1, e_2), ...``.

    The last edge is the largest length the table covers.  Any number of
    input and output ranges is allowed (Mélange's example uses 2 x 2).
    """

    input_edges_tokens: list[TokenEdge] = Field(min_length=2)
    """Edges of the input-length ranges in tokens, strictly increasing."""
    output_edges_tokens: list[TokenEdge] = Field(min_length=2)
    """Edges of the output-length ranges in tokens, strictly increasing."""

    @field_validator("input_edges_tokens", "output_edges_tokens")
    @classmethod
    def _increasing(cls, edges: list[int]) -> list[int]:
        for lower, upper in zip(edges, edges[1:]):
            if upper <= lower:
                raise ValueError(f"edges must increase strictly (got {lower} then {upper})")
        return edges


class ProfiledWorkloadSpec(Strict):
    """Total arrival rate and the share of requests in each bucket, ``shares[input][output]`` (sum 1)."""

    rate_rps: RequestRate = Field(gt=0.0)
    """Total arrival rate of the service, requests per second."""
    shares: list[list[NonNegative]] = Field(min_length=1)
    """Share of the requests in each bucket, ``shares[input range][output range]``, summing to 1."""


class ProfiledGpuSpec(Strict):
    """One GPU type: price, instance size and the profiled throughput table.

    ``max_rps[i][o]`` is in requests/s per instance of ``gpus_per_instance``
    GPUs (per GPU when that is 1).  ``cost_per_gpu_hour`` defaults to the
    hardware catalog's price when ``name`` is a catalog GPU.
    """

    name: str = Field(min_length=1)
    """The GPU type's name: a catalog GPU (``optfleet catalog``) takes its price from the catalog."""
    cost_per_gpu_hour: Real | None = Field(None, gt=0.0)
    """Price of one GPU in $ per hour (default: the catalog's for a catalog GPU; required otherwise)."""
    gpus_per_instance: GpusPerInstance = Field(1, ge=1)
    """GPUs that serve one model instance (its tensor-parallel degree); ``max_rps`` is per instance."""
    max_rps: list[list[NonNegative]] = Field(min_length=1)
    """Largest rate (requests/s) of each bucket one instance sustains within the SLO, ``max_rps[input][output]``; 0 where it cannot serve the bucket."""


class ProfiledRoutingSpec(Strict):
    """How a bucket may be split between GPU types, and how full an instance may run.

    * ``splitting: slices`` (default): each bucket is cut into
      ``slices_per_bucket`` equal slices and each slice goes to one type
      (Mélange's ``slice_factor``; 1 = the whole bucket to one type);
    * ``splitting: fractional``: any share of a bucket to any type.

    ``max_utilisation`` caps each instance's load at that fraction of its
    profiled capacity (1.0 = the table as measured, Mélange's reading).
    """

    splitting: Literal["slices", "fractional"] = "slices"
    """``slices``: each bucket in equal slices, each slice to one GPU type (Mélange's slice_factor); ``fractional``: any share to any type."""
    slices_per_bucket: Annotated[Integer, at_most(MAX_SLICES_PER_BUCKET, "slices", "finer than the MILP's tolerance; "
                                                  "use splitting: fractional")] = Field(1, ge=1)
    """Equal slices per bucket under ``splitting: slices`` (1: the whole bucket goes to one GPU type)."""
    max_utilisation: Real = Field(1.0, gt=0.0, le=1.0)
    """Largest load of an instance as a fraction of its profiled capacity (1.0 = the table as measured)."""

    @model_validator(mode="after")
    def _slices_only_when_sliced(self) -> "ProfiledRoutingSpec":
        if self.splitting == "fractional" and "slices_per_bucket" in self.model_fields_set:
            raise ValueError("slices_per_bucket applies only to splitting: slices (fractional splitting has no slices)")
        return self


class ProfiledSolveSpec(Strict):
    """The method ``optfleet solve`` runs (a registered method of the kind, checked when it runs) and the MILP's
    options: time limit, relative gap and solver (``highs``, or a Pyomo solver installed here by its name)."""

    method: str = "milp"
    """The method ``optfleet solve`` runs (``validate --json`` lists them)."""
    time_limit_s: Real = Field(60.0, gt=0.0)
    """Time limit of each MILP solve, in seconds."""
    mip_gap: Real = Field(1e-6, ge=0.0)
    """Relative gap at which the MILP solve stops as optimal."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


class ProfiledBudgetConstraint(Strict):
    """Cost cap in $/hour; the model then **maximises the served rate** (req/s), ties broken by cost.

    ``admission: per_bucket`` admits each bucket at its own share (drops the
    requests that cost most to serve first); ``uniform`` admits every bucket
    at one common share.  With slices, admission is in whole slices.
    """

    kind: Literal["budget"]
    max_cost_per_hour: Real = Field(gt=0.0)
    """The cost cap, $ per hour; the MILP then maximises the served rate."""
    admission: Literal["per_bucket", "uniform"] = "per_bucket"
    """``per_bucket``: each bucket admitted at its own share; ``uniform``: one share for every bucket."""


class ProfiledNodeMultipleConstraint(Strict):
    """Whole nodes: the GPU count of type ``gpu`` is a multiple of ``gpus_per_node``."""

    kind: Literal["node_multiple"]
    gpu: str
    """The GPU type whose count comes in whole nodes."""
    gpus_per_node: GpuCount = Field(8, ge=1)
    """GPUs per node: the type's GPU count is a multiple of it."""


ProfiledConstraint = Annotated[
    AvailabilityConstraint
    | ProfiledBudgetConstraint
    | GpuMixConstraint
    | MaxTypesConstraint
    | ProfiledNodeMultipleConstraint,
    Field(discriminator="kind"),
]


class ProfiledFleetSpec(Strict):
    """The whole ``kind: profiled_fleet`` instance file."""

    kind: Literal["profiled_fleet"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    source: str = ""
    """Where the profiled tables come from (free text)."""
    buckets: BucketGridSpec
    """The grid of input x output length ranges."""
    workload: ProfiledWorkloadSpec
    """Arrival rate and bucket shares."""
    gpus: list[ProfiledGpuSpec] = Field(min_length=1)
    """The GPU types to choose from, each with its throughput table."""
    routing: ProfiledRoutingSpec = ProfiledRoutingSpec()
    """How buckets may be split between GPU types."""
    solve: ProfiledSolveSpec = ProfiledSolveSpec()
    """The default method and the MILP's options."""
    constraints: list[ProfiledConstraint] = []
    """Budget, availability, GPU-mix, type-count and whole-node constraints (the MILP enforces them; heuristic plans are checked)."""
