"""Typed schema of a ``kind: caching`` instance file (validated with pydantic).

A caching instance names a conversation trace (a file, or a seeded generator
of the stochastic model), the cache capacities to compare, the TTFT model, the
tail threshold ``xi`` and the policies.  Units are in the field names; every
model forbids unknown keys.  Example::

    kind: caching
    name: tiny
    trace: {file: tiny.csv}          # relative to this file; CSV, Parquet or JSONL
    capacity_tokens: [100, 200]      # or capacity_blocks (x block_tokens)
    ttft: {alpha_ms_per_token: 1.0, beta_ms: 0.0}
    xi_ms: 50
    policies: [lru, t-lru, {name: threshold-lru, threshold_tokens: 64}, belady]
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from optfleet.instance.shared_schema import TOKEN_LIMIT, Integer, Real, Share, Strict, Tokens, at_most

MAX_GENERATED_TURNS = 10_000_000
"""Turns a generator may draw: ten times the 1e6-turn benchmark trace.  Drawing takes about a second per million
turns and every replay and the hindsight LP scale with the trace, so a larger trace is refused before any draw
(a limit on ``conversations``, on ``mean_turns``, and on their product, checked by
:func:`~optfleet.problems.caching.generate.generate_trace`)."""

TURNS_LIMIT = at_most(MAX_GENERATED_TURNS, "turns", "about a second of drawing per million turns")


class LengthSpec(Strict):
    """A per-turn token-count distribution (see optfleet.problems.caching.generate.LengthModel).

    ``constant`` / ``geometric`` / ``lognormal`` need ``mean_tokens`` (lognormal
    also ``sigma``, the standard deviation of ``ln X``); ``empirical`` needs
    ``values_tokens`` and optional ``weights``.
    """

    distribution: Literal["constant", "geometric", "lognormal", "empirical"]
    """The distribution of the per-turn token count: ``constant``, ``geometric``, ``lognormal`` or ``empirical``."""
    mean_tokens: Annotated[Real, TOKEN_LIMIT] | None = Field(None, ge=1.0)
    """Mean token count, required by ``constant``, ``geometric`` and ``lognormal``."""
    sigma: Real = Field(1.0, gt=0.0)
    """Standard deviation of ``ln X`` under ``distribution: lognormal``."""
    values_tokens: list[Annotated[Tokens, Field(ge=1)]] | None = None
    """The token counts an ``empirical`` distribution draws from (required by it)."""
    weights: list[Annotated[Share, Field(ge=0.0)]] | None = None
    """Relative weight of each of ``values_tokens`` (``empirical`` only; default: equal weights)."""

    @model_validator(mode="after")
    def _parameters(self) -> "LengthSpec":
        if self.distribution == "empirical":
            if not self.values_tokens:
                raise ValueError("an empirical distribution needs values_tokens")
            if self.weights is not None and len(self.weights) != len(self.values_tokens):
                raise ValueError(f"weights needs one entry per value ({len(self.values_tokens)})")
        elif self.mean_tokens is None:
            raise ValueError(f"a {self.distribution} distribution needs mean_tokens")
        return self


class GeneratorSpec(Strict):
    """The paper's stochastic model (optfleet.problems.caching.generate); first turn at birth.

    Give the model either by its rates (``turn_rate_per_s`` while alive and
    ``end_rate_per_s``, the ``mu`` of the Exp life) or by what a trace shows
    (``mean_turns`` per conversation and ``mean_gap_s`` between turns).
    """

    seed: Integer = Field(0, ge=0)  # numpy's generators take any integer >= 0
    """Seed of the random generator: the same seed draws the same trace."""
    conversations: Annotated[Integer, TURNS_LIMIT] = Field(gt=0)
    """Number of conversations drawn."""
    conversation_rate_per_s: Real = Field(gt=0.0)
    """Arrival rate of new conversations (a Poisson process), per second."""
    turn_rate_per_s: Real | None = Field(None, ge=0.0)
    """Rate of a live conversation's turns (a Poisson process), per second; given with ``end_rate_per_s``."""
    end_rate_per_s: Real | None = Field(None, gt=0.0)
    """Rate ``mu`` at which a conversation ends (exponential life), per second; given with ``turn_rate_per_s``."""
    mean_turns: Annotated[Real, TURNS_LIMIT] | None = Field(None, ge=1.0)
    """Mean turns per conversation; given with ``mean_gap_s`` instead of the two rates."""
    mean_gap_s: Real | None = Field(None, gt=0.0)
    """Mean time between a conversation's turns, in seconds; given with ``mean_turns`` instead of the two rates."""
    prompt_tokens: LengthSpec
    """Distribution of the new prompt tokens ``q`` of each turn."""
    answer_tokens: LengthSpec
    """Distribution of the answer tokens ``a`` of each turn."""

    @model_validator(mode="after")
    def _one_parametrisation(self) -> "GeneratorSpec":
        rates = (self.turn_rate_per_s is not None, self.end_rate_per_s is not None)
        summary = (self.mean_turns is not None, self.mean_gap_s is not None)
        if not ((all(rates) and not any(summary)) or (all(summary) and not any(rates))):
            raise ValueError("give either turn_rate_per_s and end_rate_per_s, or mean_turns and mean_gap_s")
        return self


class TraceSpec(Strict):
    """Exactly one of ``file`` (path relative to the instance) or ``generator``."""

    file: str | None = None
    """A trace file, one turn per row with columns ``conversation_id``, ``t`` (s), ``q`` and ``a`` (tokens): CSV,
    Parquet or JSON lines."""
    generator: GeneratorSpec | None = None
    """Draw the trace from the paper's stochastic model instead of reading a file."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "TraceSpec":
        if (self.file is None) == (self.generator is None):
            raise ValueError("give exactly one of file, generator")
        return self


class TtftSpec(Strict):
    """``TTFT = alpha_ms_per_token * uncached_prompt_side_tokens + beta_ms``."""

    alpha_ms_per_token: Real = Field(gt=0.0)
    """Time to first token per uncached prompt-side token, ms."""
    beta_ms: Real = Field(0.0, ge=0.0)
    """Fixed part of the time to first token, ms."""


class _PolicyBase(Strict):
    label: str | None = None  # the row name in reports (default: the policy name)


class LruSpec(_PolicyBase):
    name: Literal["lru"]


class ThresholdLruSpec(_PolicyBase):
    name: Literal["threshold-lru"]
    threshold_tokens: Tokens = Field(1024, ge=0)
    """A conversation is cached only when its history exceeds this many tokens."""


class TLruSpec(_PolicyBase):
    """``q_hat_tokens``: next-prompt estimate (default: the trace's mean prompt length)."""

    name: Literal["t-lru", "end-aware-t-lru", "length-aware-t-lru"]
    """``t-lru`` (trim to the TEL-safe budget, then LRU), ``end-aware-t-lru`` (an oracle bit: a last turn keeps nothing)
    or ``length-aware-t-lru`` (an oracle of the next prompt's length)."""
    q_hat_tokens: Annotated[Real, TOKEN_LIMIT] | None = Field(None, ge=0.0)
    """Estimate of the next prompt's length, tokens (default: the trace's mean prompt length)."""


class EtLruSpec(_PolicyBase):
    """``end_rate_per_s``: the model's ``mu`` (default: estimated from the trace)."""

    name: Literal["et-lru"]
    end_rate_per_s: Real | None = Field(None, ge=0.0)
    """The model's end rate ``mu`` per second (default: estimated from the trace)."""
    prompt_levels: Integer = Field(16, ge=1, le=4096)  # steps of S, each a heap operation per crossing (64 ran 2.7x slower than 16)


class BeladySpec(_PolicyBase):
    """Tail-Optimized Belady, the hindsight greedy (optfleet.problems.caching.belady)."""

    name: Literal["belady"]


class RegisteredPolicySpec(_PolicyBase):
    """A policy registered at run time (``optfleet.problems.caching.policies.register_policy``), named in the file
    by its registered name; its other keys are the factory's parameters."""

    name: Literal["registered"]
    policy: str
    """The policy's registered name (``register_policy``); a file may give it directly as ``name:``."""
    params: dict[str, Any] = {}
    """The factory's parameters: the item's other keys."""


def _policy_item(item: Any) -> Any:
    """A name becomes a spec; a name outside the built-in specs must be a registered policy (its other keys are
    its parameters), else the error lists every policy that can be named."""
    spec = {"name": item} if isinstance(item, str) else item
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str) or name in BUILT_IN_POLICIES or name == "registered":
        return spec
    from optfleet.problems.caching.policies import POLICIES  # the registry, open to policies registered at run time

    if name not in POLICIES:
        raise ValueError(f"unknown policy; registered policies: {', '.join(dict.fromkeys([*BUILT_IN_POLICIES, *POLICIES]))}")
    params = {k: v for k, v in spec.items() if k not in ("name", "label")}
    return {"name": "registered", "policy": name, "label": spec.get("label") or name, "params": params}


PolicySpec = Annotated[
    Annotated[LruSpec | ThresholdLruSpec | TLruSpec | EtLruSpec | BeladySpec | RegisteredPolicySpec, Field(discriminator="name")],
    BeforeValidator(_policy_item),
]

OPTIMUM_METHOD = "optimum"  # the hindsight LP's method name: no policy may take it as its label
BUILT_IN_POLICIES = ("lru", "threshold-lru", "t-lru", "end-aware-t-lru", "length-aware-t-lru", "et-lru", "belady")
DEFAULT_POLICIES = BUILT_IN_POLICIES


class HindsightSpec(Strict):
    """The hindsight-optimal LP (optfleet.problems.caching.hindsight): whether ``gap`` runs it by default, its
    time limit, and its solver (``highs``, or a Pyomo solver installed here by its name)."""

    enabled: bool = True
    """Whether ``gap`` runs the hindsight LP (the ``optimum`` method) by default."""
    time_limit_s: Real | None = Field(None, gt=0.0)
    """Time limit of the LP solve, in seconds (default: none)."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


class CachingInstanceSpec(Strict):
    """The whole ``kind: caching`` instance file.

    Capacities: exactly one of ``capacity_tokens`` or ``capacity_blocks``
    (``blocks x block_tokens`` tokens), each a number or a list (checked when
    the instance is prepared, optfleet.problems.caching.problem, so that the message
    names the field).  ``slo_ms`` (default ``xi_ms``) sets the violation count.
    """

    kind: Literal["caching"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    trace: TraceSpec
    """The conversation turns: a file or a generator."""
    block_tokens: Tokens = Field(16, gt=0)
    """Tokens per cache block: ``capacity_blocks`` are counted in these blocks, and reports show capacities in both."""
    capacity_tokens: list[Annotated[Tokens, Field(gt=0)]] | None = None
    """Cache capacities to compare, in tokens (one number or a list); give this or ``capacity_blocks``."""
    capacity_blocks: list[Annotated[Tokens, Field(gt=0)]] | None = None  # a block holds a token at least
    ttft: TtftSpec
    """The TTFT model, ``alpha_ms_per_token * uncached prompt-side tokens + beta_ms``."""
    xi_ms: Real = Field(ge=0.0)
    """The tail threshold xi in ms: TEL sums each turn's TTFT above it."""
    slo_ms: Real | None = Field(None, ge=0.0)
    """TTFT above which a turn counts as an SLO violation, in ms (default: ``xi_ms``)."""
    forced_caching: bool = False
    """Whether every turn's whole history is inserted into the cache (``true``) or the policy decides how much
    (``false``)."""
    policies: list[PolicySpec] = Field(default_factory=lambda: [{"name": n} for n in DEFAULT_POLICIES], min_length=1, validate_default=True)
    """The policies to compare: names, or blocks with a ``name`` and its parameters (default: every built-in policy)."""
    hindsight: HindsightSpec = HindsightSpec()
    """The hindsight-optimal LP: whether ``gap`` runs it, its time limit and its solver."""

    @field_validator("capacity_tokens", "capacity_blocks", mode="before")
    @classmethod
    def _one_or_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @field_validator("policies", mode="after")
    @classmethod
    def _unique_labels(cls, value: list[Any]) -> list[Any]:
        """Labels name the methods of ``gap``: unique, never ``optimum`` (the hindsight LP), and never another policy's
        name (``label: belady`` on an LRU row would pass LRU off as the hindsight greedy)."""
        from optfleet.problems.caching.policies import POLICIES

        names = [p.policy if p.name == "registered" else p.name for p in value]
        labels = [p.label or name for p, name in zip(value, names, strict=True)]
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ValueError(f"policy labels must be unique; repeated: {', '.join(repeated)} (set label: on one of them)")
        reserved = {OPTIMUM_METHOD, *BUILT_IN_POLICIES, *POLICIES}
        for label, name in zip(labels, names, strict=True):
            if label in reserved and label != name:
                raise ValueError(f"label {label!r} names a method of its own ({'the hindsight LP' if label == OPTIMUM_METHOD else 'a policy'}); "
                                 f"choose another label for this {name} row")
        return value

    @property
    def capacities_tokens(self) -> tuple[int, ...]:
        """Every capacity in tokens, as listed (empty when neither field is given: the loader's check)."""
        if self.capacity_tokens is not None:
            return tuple(self.capacity_tokens)
        return tuple(b * self.block_tokens for b in self.capacity_blocks or ())
