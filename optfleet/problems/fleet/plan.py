"""A fleet plan: pools with instance counts and the routing rule; the same vocabulary as instances.

Routing (threshold, as the papers' routers): a request of total length L goes
to the pool with the smallest window ``C_j >= L``.  Compress-and-Route with
multiplier ``gamma``: a request that would go to pool ``j+1`` but has
``C_j < L <= gamma C_j`` is, with probability ``p_c`` (its category is
compressible) and if ``L_out < C_j``, cut to ``T_c = C_j - L_out`` input tokens
and sent to pool ``j`` (so ``T_c + L_out = C_j``); otherwise it stays in
pool ``j+1``.  ``gamma = 1`` is plain pool routing.

Split routing (what an optimization model may choose instead): a plan may
carry ``rules``, each covering the requests with ``L_total`` in
``(total_above, total_to]`` and ``L_out`` in ``[out_from, out_below)``, and
giving the share of them each pool serves uncompressed and the share
compressed into each pool (to ``C_j - L_out`` input tokens).  A plan may also
admit only ``served_share`` of the traffic (uniformly over all requests), as
the budget-capped MILP does; the rest is rejected.  A compressed
share may not exceed ``p_c`` in total and applies only to requests with
``L_out < C_j``; the shares of a rule sum to 1.  With rules, ``gamma`` is not used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from optfleet.errors import InputError
from optfleet.instance.loader import validate_spec
from optfleet.instance.shared_schema import INSTANCE_COUNT_RENAMED, InstanceCount, Tokens, refuse_renamed

if TYPE_CHECKING:
    from optfleet.problems.fleet.problem import FleetProblem


@dataclass(frozen=True)
class PoolPlan:
    """One pool: a name, its context window, its instance count and GPU configuration (an instance of TP t holds t GPUs).

    ``gpu`` names one of the instance's GPU configurations (``FleetProblem.options``,
    e.g. ``"H100-SXM x4"``); ``None`` is the instance's own ``hardware``.
    """

    name: str
    window_tokens: int
    instances: int
    gpu: str | None = None


@dataclass(frozen=True)
class RouteRule:
    """Shares of one class of requests: ``total_above < L_total <= total_to``, ``out_from <= L_out < out_below``."""

    total_above: int
    total_to: int
    shares: tuple[tuple[str, float], ...]
    compressed: tuple[tuple[str, float], ...] = ()
    out_from: int = 0
    out_below: int | None = None

    def covers(self, l_total: NDArray[np.int64], l_out: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which requests ``(l_total, l_out)`` this rule routes."""
        mine = (l_total > self.total_above) & (l_total <= self.total_to) & (l_out >= self.out_from)
        return mine if self.out_below is None else mine & (l_out < self.out_below)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python numbers (a solver's numpy integers included), so :meth:`Plan.from_dict` reads them back."""
        return {
            "total_above": int(self.total_above), "total_to": int(self.total_to), "out_from": int(self.out_from),
            "out_below": None if self.out_below is None else int(self.out_below),
            "shares": {k: float(v) for k, v in self.shares}, "compressed": {k: float(v) for k, v in self.compressed},
        }


@dataclass(frozen=True)
class Plan:
    """Pools sorted by window, the C&R multiplier, and who produced the plan (for reports only)."""

    pools: tuple[PoolPlan, ...]
    gamma: float = 1.0
    method: str = "user"
    notes: dict[str, Any] = field(default_factory=dict, compare=False)
    rules: tuple[RouteRule, ...] | None = None
    served_share: float = 1.0

    def __post_init__(self) -> None:
        windows = [p.window_tokens for p in self.pools]
        if not self.pools:
            raise InputError("plan.pools", [], "a plan needs at least one pool")
        if windows != sorted(windows) or (self.rules is None and len(set(windows)) < len(windows)):
            raise InputError("plan.pools", windows, "pool windows must be increasing (and distinct unless the plan has routing rules)")
        if len({p.name for p in self.pools}) < len(self.pools):
            raise InputError("plan.pools", [p.name for p in self.pools], "pool names must be distinct")
        if not 1.0 <= self.gamma < math.inf:
            raise InputError("plan.gamma", self.gamma, "gamma must be a finite number >= 1")
        for i, pool in enumerate(self.pools):
            if pool.instances < 0:
                raise InputError(f"plan.pools[{i}].instances", pool.instances, "instance counts must be >= 0")
        if not 0.0 <= self.served_share <= 1.0:
            raise InputError("plan.served_share", self.served_share, "must lie in [0, 1]")
        names = {p.name for p in self.pools}
        for i, rule in enumerate(self.rules or ()):
            unknown = {name for name, _ in (*rule.shares, *rule.compressed)} - names
            if unknown:
                raise InputError(f"plan.rules[{i}]", sorted(unknown), "routes to pools the plan does not have")
            total = sum(v for _, v in rule.shares) + sum(v for _, v in rule.compressed)
            if abs(total - 1.0) > 1e-6 or min((v for _, v in (*rule.shares, *rule.compressed)), default=0.0) < -1e-9:
                raise InputError(f"plan.rules[{i}]", rule.to_dict(), "shares must be >= 0 and sum to 1")

    @property
    def boundary_tokens(self) -> int | None:
        """The short window B of a two-pool plan (None for one pool)."""
        return self.pools[0].window_tokens if len(self.pools) > 1 else None

    def with_instances(self, instances: list[int] | tuple[int, ...]) -> "Plan":
        """The same routing with other instance counts."""
        pools = tuple(PoolPlan(p.name, p.window_tokens, int(n), p.gpu) for p, n in zip(self.pools, instances, strict=True))
        return Plan(pools=pools, gamma=self.gamma, method=self.method, notes=self.notes, rules=self.rules, served_share=self.served_share)

    def to_dict(self) -> dict[str, Any]:
        pools = [{k: v for k, v in asdict(p).items() if k != "gpu" or v is not None} for p in self.pools]
        pools = [{**p, "window_tokens": int(p["window_tokens"]), "instances": int(p["instances"])} for p in pools]
        data: dict[str, Any] = {"method": self.method, "gamma": float(self.gamma), "pools": pools}
        if self.rules is not None:
            data["rules"] = [r.to_dict() for r in self.rules]
        if self.served_share < 1.0:
            data["served_share"] = float(self.served_share)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Plan":
        """Read a plan written by :meth:`to_dict` (e.g. ``optfleet solve --json`` output).

        Every field is checked for its type and range (:class:`_PlanDocument`): a bad one is an InputError naming
        its path, e.g. ``plan.pools[1].instances = 7.5: Input should be a valid integer``."""
        doc = validate_spec(_PlanDocument, {"plan": data}).plan
        pools = tuple(PoolPlan(p.name, p.window_tokens, p.instances, p.gpu) for p in doc.pools)
        rules = None if doc.rules is None else tuple(_rule(r) for r in doc.rules)
        return cls(pools=pools, gamma=doc.gamma, method=doc.method, rules=rules, served_share=doc.served_share)


def check_plan(problem: "FleetProblem", plan: Plan) -> None:
    """Refuse a plan that ``problem`` cannot serve as written (a user's plan file, before it is scored): an unknown
    GPU configuration, a window above the instance's long window (no pool of the instance is longer) or a window
    where the pool's GPU holds no KV slot.  Each error names the pool's field, e.g. ``plan.pools[0].gpu``."""
    for i, pool in enumerate(plan.pools):
        configuration = problem.configuration(pool.gpu, f"plan.pools[{i}].gpu")
        where = f"plan.pools[{i}].window_tokens"
        if pool.window_tokens > problem.long_window_tokens:
            raise InputError(where, pool.window_tokens, f"must lie in (0, {problem.long_window_tokens}] (the instance's long window)")
        if configuration.slots_per_instance(pool.window_tokens) < 1:
            raise InputError(where, pool.window_tokens, f"{configuration.label} holds no KV slot at this window (0 slots per instance)")


# The plan file's form, checked field by field (strict: true is not 1, "7" is not 7, 7.5 instances are not a count).
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
# The instance files' limits (optfleet/instance/shared_schema.py): a plan states no more instances or tokens than an
# instance may.
_TokensFrom0 = Annotated[Tokens, Field(ge=0)]
_Tokens = Annotated[Tokens, Field(ge=1)]
_Share = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class _PoolDocument(BaseModel):
    model_config = _STRICT
    name: str
    window_tokens: _Tokens
    instances: Annotated[InstanceCount, Field(ge=0)]
    gpu: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return refuse_renamed(data, INSTANCE_COUNT_RENAMED)


class _RuleFields(BaseModel):
    model_config = _STRICT
    total_above: _TokensFrom0
    total_to: _Tokens
    shares: dict[str, float] = {}
    compressed: dict[str, float] = {}
    out_from: _TokensFrom0 = 0
    out_below: _TokensFrom0 | None = None


class _PlanFields(BaseModel):
    model_config = _STRICT
    pools: list[_PoolDocument]
    gamma: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] = 1.0
    method: str = "user"
    rules: list[_RuleFields] | None = None
    served_share: _Share = 1.0


class _PlanDocument(BaseModel):
    model_config = _STRICT
    plan: _PlanFields


def _rule(doc: _RuleFields) -> RouteRule:
    return RouteRule(
        total_above=doc.total_above, total_to=doc.total_to, shares=tuple(doc.shares.items()), compressed=tuple(doc.compressed.items()),
        out_from=doc.out_from, out_below=doc.out_below,
    )
