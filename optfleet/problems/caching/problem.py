"""A caching instance made ready to run: the trace loaded or generated, capacities in tokens, policies resolved.

``prepare(load_instance(path))`` turns a validated ``kind: caching``
spec (optfleet/problems/caching/schema.py) into a :class:`CachingProblem`;
everything downstream (the gap runner, reports, tests) works on the problem,
never on the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optfleet.errors import InputError
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.generate import ConversationModel, LengthModel, generate_trace
from optfleet.problems.caching.load import load_trace
from optfleet.problems.caching.policies import CachePolicy, make_policy
from optfleet.problems.caching.schema import CachingInstanceSpec, GeneratorSpec, LengthSpec
from optfleet.problems.caching.trace import ConversationTrace

# Schedules computed in hindsight rather than by replay (optfleet.problems.caching.belady).
HINDSIGHT_POLICIES = ("belady",)


@dataclass(frozen=True)
class PolicyEntry:
    """One row of the comparison: a label, a registered policy name and its parameters."""

    label: str
    name: str
    params: dict[str, object] = field(default_factory=dict)

    @property
    def is_hindsight(self) -> bool:
        return self.name in HINDSIGHT_POLICIES

    def make(self) -> CachePolicy:
        """A fresh online policy (policies keep per-replay state)."""
        return make_policy(self.name, field=f"policies.{self.label}", **self.params)


@dataclass(frozen=True)
class CachingProblem:
    """Everything a caching comparison needs, in tokens, ms and seconds."""

    name: str
    description: str
    trace: ConversationTrace
    trace_source: str
    capacities_tokens: tuple[int, ...]
    block_tokens: int
    ttft: TtftModel
    xi_ms: float
    slo_ms: float
    forced_caching: bool
    policies: tuple[PolicyEntry, ...]
    hindsight: bool = True
    hindsight_time_limit_s: float | None = None
    hindsight_solver: str = "highs"

    @property
    def safe_uncached_tokens(self) -> float:
        """``(xi - beta) / alpha``: the uncached tokens a turn may prefill within ``xi``."""
        return float(self.ttft.safe_uncached_tokens(self.xi_ms))


def prepare(loaded: LoadedInstance) -> CachingProblem:
    """Load or generate the trace and resolve capacities and policies of a caching instance."""
    spec = loaded.spec
    if not isinstance(spec, CachingInstanceSpec):
        raise InputError("kind", spec.kind, "not a caching instance")
    if (spec.capacity_tokens is None) == (spec.capacity_blocks is None):
        given = spec.capacity_tokens or spec.capacity_blocks
        raise InputError("capacity_tokens", given, "give exactly one of capacity_tokens, capacity_blocks")
    if spec.trace.file is not None:
        trace = load_trace(loaded.resolve(spec.trace.file, "trace.file"))
        source = f"file {spec.trace.file}"
    else:
        generator = spec.trace.generator
        assert generator is not None
        model = conversation_model(generator)
        trace = generate_trace(model, generator.conversations, generator.seed)
        source = (f"generator (seed {generator.seed}, {generator.conversations} conversations, {model.conversation_rate_per_s:g}/s; "
                  f"turns {model.turn_rate_per_s:.4g}/s, end {model.end_rate_per_s:.4g}/s: mean {model.mean_turns:.3g} turns, "
                  f"mean gap {model.mean_gap_s:.4g} s)")
    policies = tuple(
        PolicyEntry(p.label or p.policy, p.policy, dict(p.params)) if p.name == "registered"
        else PolicyEntry(p.label or p.name, p.name, p.model_dump(exclude={"name", "label"}))
        for p in spec.policies
    )
    return CachingProblem(
        name=spec.name,
        description=spec.description,
        trace=trace,
        trace_source=source,
        capacities_tokens=spec.capacities_tokens,
        block_tokens=spec.block_tokens,
        ttft=TtftModel(spec.ttft.alpha_ms_per_token, spec.ttft.beta_ms),
        xi_ms=spec.xi_ms,
        slo_ms=spec.xi_ms if spec.slo_ms is None else spec.slo_ms,
        forced_caching=spec.forced_caching,
        policies=policies,
        hindsight=spec.hindsight.enabled,
        hindsight_time_limit_s=spec.hindsight.time_limit_s,
        hindsight_solver=spec.hindsight.solver,
    )


def conversation_model(spec: GeneratorSpec) -> ConversationModel:
    """The generator block as a :class:`ConversationModel` (rates, or mean turns and mean gap)."""
    prompt = length_model(spec.prompt_tokens, "trace.generator.prompt_tokens")
    answer = length_model(spec.answer_tokens, "trace.generator.answer_tokens")
    if spec.mean_turns is not None and spec.mean_gap_s is not None:
        return ConversationModel.from_summary(spec.conversation_rate_per_s, spec.mean_turns, spec.mean_gap_s, prompt, answer, "trace.generator")
    assert spec.turn_rate_per_s is not None and spec.end_rate_per_s is not None
    return ConversationModel(spec.conversation_rate_per_s, spec.turn_rate_per_s, spec.end_rate_per_s, prompt, answer, "trace.generator")


def length_model(spec: LengthSpec, field_path: str) -> LengthModel:
    return LengthModel(
        distribution=spec.distribution,
        mean_tokens=spec.mean_tokens or 0.0,
        sigma=spec.sigma,
        values_tokens=tuple(spec.values_tokens or ()),
        weights=tuple(spec.weights or ()),
        field=field_path,
    )
