"""The prepared profiled-fleet problem (Mélange-style capacity from measured throughput).

``prepare(loaded)`` turns a validated ``kind: profiled_fleet`` instance
into a :class:`ProfiledProblem`: buckets with their arrival rates, GPU types
with prices (the catalog's when the file gives none) and throughput per
bucket, the splitting rule and the user constraints.  It checks everything
that needs more than one field and raises :class:`InputError` naming it.

Notation used by the model, the evaluator and the heuristics (Mélange,
arXiv:2404.14527, section 5; github.com/tyler-griggs/melange-release
``melange/solver.py``):

    lambda_b = rate_rps * share_b            arrival rate of bucket b (req/s)
    T[g,b]   = max_rps of one instance of type g on bucket b (req/s; 0 = cannot serve)
    L[b,g]   = lambda_b / T[g,b]             instances of g that carry all of bucket b at full load
    u        = max_utilisation               load cap per instance (1 = the table as measured)

A routing share ``x[b,g]`` puts ``L[b,g] x[b,g]`` instances of load on type g.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from optfleet.errors import InfeasibleError, InputError
from optfleet.hardware import get_gpu
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.profiled_fleet.schema import ProfiledBudgetConstraint, ProfiledFleetSpec

SHARE_SUM_TOLERANCE = 1e-6
MAX_INSTANCES = 10**9
"""Most instances of one GPU type a bucket's load may need, ``L[b,g] = lambda_b / T[g,b]``.  The MILP counts
instances as integers to HiGHS's integrality tolerance 1e-6, and doubles are spaced more than 1e-6 apart above
2^52 x 1e-6 (about 4.5e9): beyond it a count cannot be told from its neighbour.  10^9 keeps a factor 4 below."""
# Relative slack when rounding a load up to whole instances (3.0000000001 instances is 3).
ROUND_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Bucket:
    """One cell of the input x output grid; ``index`` is the flat, input-major position."""

    index: int
    input_bucket: int
    output_bucket: int
    input_from_tokens: int
    input_to_tokens: int
    output_from_tokens: int
    output_to_tokens: int
    share: float
    rate_rps: float

    @property
    def label(self) -> str:
        """``"(in 0-500, out 0-500)"``: the token ranges, for messages and tables."""
        return f"(in {self.input_from_tokens}-{self.input_to_tokens}, out {self.output_from_tokens}-{self.output_to_tokens})"


@dataclass(frozen=True)
class GpuType:
    """A GPU type: price per GPU-hour, GPUs per instance, throughput per instance per flat bucket."""

    name: str
    cost_per_gpu_hour: float
    gpus_per_instance: int
    max_rps: tuple[float, ...]
    price_source: str

    @property
    def cost_per_instance_hour(self) -> float:
        return self.cost_per_gpu_hour * self.gpus_per_instance

    def can_serve(self, bucket: int) -> bool:
        return self.max_rps[bucket] > 0.0


@dataclass(frozen=True)
class ProfiledProblem:
    """A validated profiled-fleet instance in numbers (see the module docstring for the notation).

    ``slices_per_bucket`` is None for fractional splitting.  ``constraints``
    holds the schema's constraint objects in file order.
    """

    name: str
    rate_rps: float
    input_edges_tokens: tuple[int, ...]
    output_edges_tokens: tuple[int, ...]
    buckets: tuple[Bucket, ...]
    gpus: tuple[GpuType, ...]
    slices_per_bucket: int | None = 1
    max_utilisation: float = 1.0
    constraints: tuple[Any, ...] = ()
    time_limit_s: float = 60.0
    mip_gap: float = 1e-6
    method: str = "milp"
    solver: str = "highs"
    description: str = ""
    source: str = ""

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus)

    @property
    def demand_buckets(self) -> tuple[Bucket, ...]:
        """The buckets with a positive arrival rate (the only ones a plan must route)."""
        return tuple(b for b in self.buckets if b.rate_rps > 0.0)

    @property
    def splitting(self) -> str:
        """``"fractional"``, ``"whole buckets"`` (one slice) or ``"<s> slices per bucket"``."""
        if self.slices_per_bucket is None:
            return "fractional"
        return "whole buckets" if self.slices_per_bucket == 1 else f"{self.slices_per_bucket} slices per bucket"

    @property
    def budget(self) -> ProfiledBudgetConstraint | None:
        return next((c for c in self.constraints if c.kind == "budget"), None)

    def gpu(self, name: str) -> GpuType:
        return self.gpus[self.gpu_index(name)]

    def gpu_index(self, name: str, field: str = "gpu") -> int:
        """Position of the type called ``name``; InputError on ``field`` otherwise."""
        for i, g in enumerate(self.gpus):
            if g.name == name:
                return i
        raise InputError(field, name, f"is not a GPU type of this instance; types: {', '.join(self.gpu_names)}")

    def instance_load(self, bucket: int, gpu: int) -> float:
        """``L[b,g] = lambda_b / T[g,b]``: instances of type g that carry all of bucket b at full load (inf if g cannot serve b)."""
        rate = self.buckets[bucket].rate_rps
        tput = self.gpus[gpu].max_rps[bucket]
        if rate == 0.0:
            return 0.0
        return rate / tput if tput > 0.0 else math.inf

    def gpu_multiple(self, gpu: int) -> int:
        """The GPU count of type g is a multiple of this: lcm(gpus_per_instance, every node_multiple on g)."""
        multiple = self.gpus[gpu].gpus_per_instance
        for c in self.constraints:
            if c.kind == "node_multiple" and c.gpu == self.gpus[gpu].name:
                multiple = math.lcm(multiple, c.gpus_per_node)
        return multiple

    def gpus_to_carry(self, load_instances: float, gpu: int) -> int:
        """Fewest GPUs of type g that carry ``load_instances`` at the cap u, in whole instances and nodes."""
        instances = ceil_tolerant(load_instances / self.max_utilisation)
        multiple = self.gpu_multiple(gpu)
        gpus = instances * self.gpus[gpu].gpus_per_instance
        return -(-gpus // multiple) * multiple

    def unservable_buckets(self) -> tuple[Bucket, ...]:
        """Buckets with demand that no GPU type can serve (max_rps 0 on every type)."""
        return tuple(b for b in self.demand_buckets if not any(g.can_serve(b.index) for g in self.gpus))

    def gpu_upper_bounds(self, scale: int = 1) -> dict[str, int]:
        """Upper bounds on each type's GPU count that some optimal plan respects.

        Without ``gpu_mix`` constraints an optimal plan never holds more GPUs
        of type g than it needs for g's load, so ``need_g`` = the GPUs that
        carry every bucket g can serve (plus one count multiple of slack for
        solver round-off) bounds it.  A ``gpu_mix`` share can
        force more; then the bound is ``ceil(sum_h need_h / b_min) + sum_h
        m_h`` (``b_min`` the smallest positive max_share, ``m_h`` the count
        multiples), and the driver (solve.py) doubles ``scale`` whenever a
        solution reaches a bound (and retries an infeasible model at the
        largest scale), so the bound never cuts off the optimum.
        """
        need = []
        for g in range(len(self.gpus)):
            load = sum(self.instance_load(b.index, g) for b in self.demand_buckets if self.gpus[g].can_serve(b.index))
            # One multiple of slack: the solver's tolerance may round a load a hair above an integer.
            need.append(self.gpus_to_carry(load, g) + self.gpu_multiple(g))
        mixes = [c for c in self.constraints if c.kind == "gpu_mix"]
        if not mixes:
            return {g.name: scale * n for g, n in zip(self.gpus, need, strict=True)}
        max_shares = [c.max_share for c in mixes if 0.0 < c.max_share < 1.0]
        b_min = min(max_shares, default=1.0)
        total = math.ceil(sum(need) / b_min) + sum(self.gpu_multiple(g) for g in range(len(self.gpus)))
        bounds = {}
        for g, gpu in enumerate(self.gpus):
            multiple = self.gpu_multiple(g)
            bounds[gpu.name] = scale * (-(-total // multiple) * multiple)
        return bounds

    def with_constraints(self, constraints: tuple[Any, ...]) -> "ProfiledProblem":
        return replace(self, constraints=tuple(constraints))

    def with_splitting(self, slices_per_bucket: int | None) -> "ProfiledProblem":
        """The same problem with another splitting rule (None = fractional)."""
        if slices_per_bucket is not None and slices_per_bucket < 1:
            raise InputError("routing.slices_per_bucket", slices_per_bucket, "must be an integer >= 1")
        return replace(self, slices_per_bucket=slices_per_bucket)


def _check_loads(problem: "ProfiledProblem") -> None:
    """Every bucket's load on every type that serves it within :data:`MAX_INSTANCES` (named by the type's max_rps)."""
    for g, gpu in enumerate(problem.gpus):
        for b in problem.demand_buckets:
            load = problem.instance_load(b.index, g)
            if gpu.can_serve(b.index) and not load <= MAX_INSTANCES:
                raise InputError(
                    f"gpus[{g}].max_rps[{b.input_bucket}][{b.output_bucket}]", gpu.max_rps[b.index],
                    f"bucket {b.label} at {b.rate_rps:.4g} req/s needs {load:.4g} instances of {gpu.name} at this throughput, "
                    f"above the limit of {MAX_INSTANCES:g} instances the MILP counts exactly (raise max_rps or lower workload.rate_rps)",
                )


def ceil_tolerant(value: float) -> int:
    """``ceil(value)`` that treats ``value`` within a relative 1e-9 of an integer as that integer."""
    nearest = round(value)
    if abs(value - nearest) <= ROUND_TOLERANCE * max(1.0, abs(value)):
        return int(nearest)
    return math.ceil(value)


def prepare(loaded: LoadedInstance) -> ProfiledProblem:
    """Check the cross-field rules of the loaded ``kind: profiled_fleet`` instance and build the problem (see
    the module docstring)."""
    spec: ProfiledFleetSpec = loaded.spec
    in_edges = tuple(spec.buckets.input_edges_tokens)
    out_edges = tuple(spec.buckets.output_edges_tokens)
    shape = (len(in_edges) - 1, len(out_edges) - 1)
    shares = spec.workload.shares
    _check_shape("workload.shares", shares, shape)
    total = sum(sum(row) for row in shares)
    if abs(total - 1.0) > SHARE_SUM_TOLERANCE:
        raise InputError("workload.shares", shares, f"the bucket shares must sum to 1 (they sum to {total:.6g})")
    buckets = tuple(
        Bucket(
            index=i * shape[1] + o,
            input_bucket=i,
            output_bucket=o,
            input_from_tokens=in_edges[i],
            input_to_tokens=in_edges[i + 1],
            output_from_tokens=out_edges[o],
            output_to_tokens=out_edges[o + 1],
            share=float(shares[i][o]),
            rate_rps=spec.workload.rate_rps * float(shares[i][o]),
        )
        for i in range(shape[0])
        for o in range(shape[1])
    )
    gpus = []
    seen: set[str] = set()
    for k, g in enumerate(spec.gpus):
        if g.name in seen:
            raise InputError(f"gpus[{k}].name", g.name, "appears twice; give each GPU type once")
        seen.add(g.name)
        _check_shape(f"gpus[{k}].max_rps", g.max_rps, shape)
        price, source = _price(g.name, g.cost_per_gpu_hour, f"gpus[{k}].cost_per_gpu_hour")
        gpus.append(GpuType(
            name=g.name,
            cost_per_gpu_hour=price,
            gpus_per_instance=g.gpus_per_instance,
            max_rps=tuple(float(v) for row in g.max_rps for v in row),
            price_source=source,
        ))
    _check_constraints(spec, {g.name for g in gpus})
    routing = spec.routing
    problem = ProfiledProblem(
        name=spec.name,
        rate_rps=spec.workload.rate_rps,
        input_edges_tokens=in_edges,
        output_edges_tokens=out_edges,
        buckets=buckets,
        gpus=tuple(gpus),
        slices_per_bucket=routing.slices_per_bucket if routing.splitting == "slices" else None,
        max_utilisation=routing.max_utilisation,
        constraints=tuple(spec.constraints),
        time_limit_s=spec.solve.time_limit_s,
        mip_gap=spec.solve.mip_gap,
        method=spec.solve.method,
        solver=spec.solve.solver,
        description=spec.description,
        source=spec.source,
    )
    _check_loads(problem)
    return problem


def unservable_message(problem: ProfiledProblem) -> str | None:
    """The first bucket with demand that no GPU type can serve, in words (None if every bucket is servable)."""
    missing = problem.unservable_buckets()
    if not missing:
        return None
    b = missing[0]
    more = f"; {len(missing) - 1} more bucket(s) likewise" if len(missing) > 1 else ""
    return f"bucket {b.label} carries {b.rate_rps:g} req/s and no GPU type can serve it (max_rps is 0 for {', '.join(problem.gpu_names)}){more}"


def require_servable(problem: ProfiledProblem) -> None:
    """InfeasibleError if some bucket with demand has no GPU type that can serve it."""
    message = unservable_message(problem)
    if message:
        raise InfeasibleError(message)


def _check_shape(field: str, table: list[list[float]], shape: tuple[int, int]) -> None:
    rows, cols = shape
    if len(table) != rows or any(len(row) != cols for row in table):
        got = f"{len(table)} rows of lengths {[len(r) for r in table]}"
        raise InputError(field, table, f"must be a {rows} x {cols} table [input bucket][output bucket] matching the bucket edges (got {got})")


def _price(name: str, given: float | None, field: str) -> tuple[float, str]:
    if given is not None:
        return float(given), "instance file"
    try:
        gpu = get_gpu(name, field)
    except InputError:
        raise InputError(field, None, f"GPU type '{name}' is not in the hardware catalog, so it needs an explicit cost_per_gpu_hour") from None
    return gpu.cost_per_gpu_hour, f"catalog ({gpu.name})"


def _check_constraints(spec: ProfiledFleetSpec, names: set[str]) -> None:
    budgets = 0
    for i, c in enumerate(spec.constraints):
        gpu = getattr(c, "gpu", None)
        if gpu is not None and gpu not in names:
            raise InputError(f"constraints[{i}].gpu", gpu, f"is not a GPU type of this instance; types: {', '.join(sorted(names))}")
        if c.kind == "gpu_mix" and c.min_share > c.max_share:
            raise InputError(f"constraints[{i}].min_share", c.min_share, f"exceeds max_share {c.max_share}")
        if c.kind == "budget":
            budgets += 1
            if budgets > 1:
                raise InputError(f"constraints[{i}].kind", "budget", "give at most one budget constraint")
