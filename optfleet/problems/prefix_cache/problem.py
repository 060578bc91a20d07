"""A prefix-cache instance made ready to run: the trace read, capacities in blocks, policies resolved."""

from __future__ import annotations

from dataclasses import dataclass, field

from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.prefix_cache.policies import POLICIES, RadixPolicy
from optfleet.problems.prefix_cache.readers import FORMATS, block_tokens_of, read_block_trace
from optfleet.problems.prefix_cache.schema import PrefixCacheInstanceSpec
from optfleet.problems.prefix_cache.trace import BlockTrace


@dataclass(frozen=True)
class PolicyEntry:
    """One row of the comparison: a label, a policy name and its parameters."""

    label: str
    name: str
    params: dict[str, object] = field(default_factory=dict)

    def make(self) -> RadixPolicy:
        """A fresh policy (policies keep per-replay state)."""
        return POLICIES[self.name](**self.params)


@dataclass(frozen=True)
class PrefixCacheProblem:
    """Everything a prefix-cache comparison needs (blocks, tokens, ms, s)."""

    name: str
    description: str
    trace: BlockTrace
    trace_source: str
    capacities_blocks: tuple[int, ...]
    eviction: str
    ttft: TtftModel
    xi_ms: float
    slo_ms: float
    objective: str
    policies: tuple[PolicyEntry, ...]
    hindsight: bool = True
    lp_bound: bool = True
    time_limit_s: float | None = None
    fcfs_server: bool = False              # one FCFS prefill server: TTFT = wait + prefill


def prepare(loaded: LoadedInstance) -> PrefixCacheProblem:
    """Read the trace and resolve capacities and policies of a prefix-cache instance."""
    spec = loaded.spec
    if not isinstance(spec, PrefixCacheInstanceSpec):
        raise InputError("kind", spec.kind, "not a prefix_cache instance")
    block_tokens = block_tokens_of(spec.trace.format, spec.trace.block_tokens)
    if spec.capacity_blocks is not None:
        capacities = tuple(spec.capacity_blocks)
    else:
        capacities = tuple(t // block_tokens for t in spec.capacity_tokens or ())
        small = [t for t in spec.capacity_tokens or () if t < block_tokens]
        if small:
            raise InputError("capacity_tokens", small[0], f"holds no whole block of {block_tokens} tokens")
    path = loaded.resolve(spec.trace.file, "trace.file")
    trace = read_block_trace(path, spec.trace.format, block_tokens, max_requests=spec.trace.max_requests)
    policies = tuple(PolicyEntry(p.label or p.name, p.name, {k: v for k, v in p.model_dump().items() if k not in ("name", "label") and v is not None})
                     for p in spec.policies)
    return PrefixCacheProblem(
        name=spec.name, description=spec.description, trace=trace,
        trace_source=f"{spec.trace.file} ({FORMATS[spec.trace.format].source}, {block_tokens}-token blocks)",
        capacities_blocks=capacities, eviction=spec.eviction, ttft=TtftModel(spec.ttft.alpha_ms_per_token, spec.ttft.beta_ms),
        xi_ms=spec.xi_ms, slo_ms=spec.xi_ms if spec.slo_ms is None else spec.slo_ms, objective=spec.objective, policies=policies,
        hindsight=spec.hindsight.enabled, lp_bound=spec.hindsight.lp_bound, time_limit_s=spec.hindsight.time_limit_s,
        fcfs_server=spec.prefill_server == "fcfs",
    )
