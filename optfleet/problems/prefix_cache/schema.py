"""Typed schema of a ``kind: prefix_cache`` instance file (validated with pydantic).

A prefix-cache instance names a block-hash trace (a file or a dataset, in one
of the formats of optfleet.problems.prefix_cache.readers), the cache
capacities to compare, the eviction setting, the TTFT model and tail
threshold of the caching kind, the objective of the hindsight optimum, and the
policies.  Example::

    kind: prefix_cache
    name: sample
    trace: {file: mooncake_conversation_sample.jsonl, format: mooncake}   # 512-token blocks
    capacity_blocks: [4, 8, 16]
    ttft: {alpha_ms_per_token: 0.1, beta_ms: 20}
    xi_ms: 300
    objective: tel
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from optfleet.instance.shared_schema import MAX_TOKENS, TOKEN_LIMIT, Integer, Real, Strict, Tokens, at_most
from optfleet.problems.caching.schema import TtftSpec

OPTIMUM_METHOD = "optimum"        # the hindsight MILP
LP_BOUND_METHOD = "lp-bound"      # its LP relaxation: a bound, and the relaxed point rounded to a schedule
BUILT_IN_POLICIES = ("lru", "leaf-lru", "lfu", "t-lru", "end-aware-t-lru", "length-aware-t-lru")


class TraceFileSpec(Strict):
    """Where the trace is and how to read it."""

    file: str
    """The trace file, relative to the instance, or a dataset's file as ``dataset:NAME/PART`` (e.g.
    ``dataset:mooncake-fast25/conversation``, fetched first with ``optfleet data fetch mooncake-fast25``)."""
    format: Literal["mooncake", "bailian", "generic"]
    """``mooncake`` (512-token blocks, ms timestamps), ``bailian`` (16-token blocks, s timestamps) or ``generic``
    (``arrival_s``, ``input_tokens``, ``output_tokens``, ``block_hashes``; needs ``block_tokens``)."""
    block_tokens: Tokens | None = None
    """Tokens per block: required by ``generic``; for the other formats, if given, it must be the format's size."""
    max_requests: Integer | None = Field(None, gt=0)
    """Read only the first this many requests (default: all)."""


class _PolicyBase(Strict):
    label: str | None = None
    """The row name in reports (default: the policy name)."""


class PlainPolicySpec(_PolicyBase):
    """``lru`` (vLLM), ``leaf-lru`` (SGLang radix, node at a time) or ``lfu``: no parameters."""

    name: Literal["lru", "leaf-lru", "lfu"]
    """The policy."""


class TLruSpec(_PolicyBase):
    """T-LRU on trees and its oracle variants (optfleet.problems.prefix_cache.policies)."""

    name: Literal["t-lru", "end-aware-t-lru", "length-aware-t-lru"]
    """The policy: ``t-lru``; ``end-aware-t-lru`` (knows which blocks are used again) or ``length-aware-t-lru`` (knows the
    next request's length), both oracles."""
    q_hat_tokens: Annotated[Real, TOKEN_LIMIT] | None = Field(None, ge=0.0)
    """Estimate of the next request's new tokens (default: the trace's mean of new tokens per request)."""


def _policy_item(item: Any) -> Any:
    return {"name": item} if isinstance(item, str) else item


PolicySpec = Annotated[Annotated[PlainPolicySpec | TLruSpec, Field(discriminator="name")], BeforeValidator(_policy_item)]


class HindsightSpec(Strict):
    """The hindsight MILP (models/prefix_cache.py): whether ``gap`` runs it and its LP relaxation, and a time limit."""

    enabled: bool = True
    """Whether ``gap`` runs the MILP (method ``optimum``)."""
    lp_bound: bool = True
    """Whether ``gap`` also runs the LP relaxation (method ``lp-bound``): a bound when the MILP is too large."""
    time_limit_s: Real | None = Field(None, gt=0.0)
    """Time limit of each solve, in seconds (default: none); a stopped MILP reports its incumbent and bound."""


class PrefixCacheInstanceSpec(Strict):
    """The whole ``kind: prefix_cache`` instance file.

    Capacities: exactly one of ``capacity_blocks`` or ``capacity_tokens``
    (each ``floor(tokens / block_tokens)`` blocks: a block occupies a whole
    slot), a number or a list.
    """

    kind: Literal["prefix_cache"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    trace: TraceFileSpec
    """The block-hash trace."""
    capacity_blocks: list[Annotated[Integer, Field(gt=0), at_most(MAX_TOKENS, "blocks", "the largest count float64 holds exactly")]] | None = None
    """Cache capacities to compare, in blocks (one number or a list); give this or ``capacity_tokens``."""
    capacity_tokens: list[Annotated[Tokens, Field(gt=0)]] | None = None
    """Cache capacities to compare, in tokens (one number or a list), rounded down to whole blocks."""
    eviction: Literal["leaves", "any"] = "leaves"
    """``leaves``: only blocks without a resident child are evicted (SGLang, vLLM); ``any``: any block."""
    ttft: TtftSpec
    """The prefill time, ``alpha_ms_per_token * missed prompt tokens + beta_ms``: the TTFT without queueing."""
    prefill_server: Literal["none", "fcfs"] = "none"
    """``none``: instantaneous service, TTFT = prefill; ``fcfs``: one FCFS prefill server per cache, TTFT = wait +
    prefill, the running request's blocks pinned until its prefill ends (the hindsight optimum includes the waits)."""
    xi_ms: Real = Field(ge=0.0)
    """The tail threshold xi in ms: TEL sums each request's TTFT above it."""
    slo_ms: Real | None = Field(None, ge=0.0)
    """TTFT above which a request counts as an SLO violation, in ms (default: ``xi_ms``)."""
    objective: Literal["hit_tokens", "tel", "violations"] = "tel"
    """What the hindsight optimum optimises and every row's objective: total hit tokens (maximised), TEL in ms or
    SLO violations (minimised)."""
    policies: list[PolicySpec] = Field(default_factory=lambda: list(BUILT_IN_POLICIES), min_length=1, validate_default=True)
    """The policies to compare: names, or blocks with a ``name`` and its parameters (default: every policy)."""
    hindsight: HindsightSpec = HindsightSpec()
    """The hindsight MILP and its LP relaxation."""

    @field_validator("capacity_blocks", "capacity_tokens", mode="before")
    @classmethod
    def _one_or_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _checks(self) -> "PrefixCacheInstanceSpec":
        if (self.capacity_blocks is None) == (self.capacity_tokens is None):
            raise ValueError("give exactly one of capacity_blocks, capacity_tokens")
        labels = [p.label or p.name for p in self.policies]
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ValueError(f"policy labels must be unique; repeated: {', '.join(repeated)} (set label: on one of them)")
        for p, label in zip(self.policies, labels, strict=True):
            if label in (OPTIMUM_METHOD, LP_BOUND_METHOD) or (label in BUILT_IN_POLICIES and label != p.name):
                raise ValueError(f"label {label!r} names another method; choose another label for this {p.name} row")
        return self
