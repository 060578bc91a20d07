"""Typed schema of a ``kind: placement`` instance file (request placement across model servers).

An instance names the model servers (heterogeneous allowed), the workload (the shared-prefix generator of the
llm-d predicted-latency blog's scenarios, or a CSV trace), the arrival process (Poisson at one rate, or a stepped
QPS ladder), the routing policies to compare, optional SLOs and the ``solve:`` block of the exact views.  Units
are in the field names; unknown keys are errors.  Example::

    kind: placement
    name: tiny
    servers:
      - {name: gpu, count: 2, max_running_seqs: 8, kv_capacity_blocks: 400, prefill_budget_tokens: 512,
         timing: {prefill_ms_per_token: 0.1, step_base_ms: 5, step_ms_per_seq: 0.2, step_ms_per_kv_block: 0.001}}
    workload:
      shared_prefix: {num_groups: 2, num_prompts_per_group: 3, system_prompt_len: 256, question_len: 64,
                      output_len: 16}
      arrivals: {process: poisson, rate_rps: 4, requests: 20}
    policies: [round_robin, least_requests, load_prefix_111, predicted_latency]
    slo: {ttft_ms: 500, tpot_ms: 50}

A server may give ``hardware: {gpu: H100-SXM, model: Llama-3-70B, tp: 4}`` (and a ``performance`` source) instead of
``timing`` and ``kv_capacity_blocks``: both are then derived by the engine model (server_hardware.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from optfleet.instance.shared_schema import TOKEN_LIMIT, Integer, Real, Strict, at_most
from optfleet.problems.fleet.schema import ModelOnGpusSpec

MAX_REQUESTS = 2_000_000
"""Requests an instance may generate: twice the 1e6-request simulator benchmark (every method replays them all)."""
MAX_SERVERS = 10_000
REQUESTS_LIMIT = at_most(MAX_REQUESTS, "requests", "every policy replays every request through the simulator")
SERVERS_LIMIT = at_most(MAX_SERVERS, "servers", "every routing decision scores every server")

MAX_LENGTH_TOKENS = 100_000_000
"""Generated lengths (system prompt, question, answer) and their standard deviations: ten times the longest
context window offered (10M tokens).  A user's prompt grows by a question and an answer per turn for up to
``max_turns`` (1000) turns, so even draws many deviations out stay far inside int64."""
LENGTH_LIMIT = at_most(MAX_LENGTH_TOKENS, "tokens", "ten times the longest context window; a history of max_turns turns must fit int64")
MAX_PREFILL_MS_PER_TOKEN = 100
"""Prefill time per uncached token: 100 ms is 10 tokens/s, slower than a CPU prefilling a 70B model (a GPU takes
0.005-1 ms).  The MILP's big-M constants are this times the prompt tokens of every request up to a pair
(models/placement.py): far above it they reach 1e12 and HiGHS reports a feasible placement infeasible or fails."""
MAX_STEP_MS = 100_000
"""An iteration's base time and its per-sequence and per-KV-block terms: 100 s, beyond any real iteration (real
ones take 1-100 ms); ``step_base_ms`` is the MILP's per-first-token time, kept in the same numeric range."""
MAX_PREFILL_MS_PER_PAIR = 1.0
"""Prefill attention time per query-key pair: 1 ms, about a million times a real server's (a pair of Llama-3-70B is
4 x hidden x layers = 2.6 MFLOP, about 1e-6 ms on four H100s); a prompt of 1e8 tokens then stays far inside the
float range."""
STEP_LIMIT = at_most(MAX_STEP_MS, "ms", "100 s, beyond any real continuous-batching iteration")
MAX_POLICY_WEIGHT = 1_000_000
"""A load_prefix scorer weight: only the ratios matter, and a million to one already makes a scorer decide alone;
far larger weights overflow the weighted sum (1e308 turned every score into inf and the choice into a tie)."""

PositiveReal = Annotated[Real, Field(gt=0.0)]
NonNegativeReal = Annotated[Real, Field(ge=0.0)]
Length = Annotated[Integer, LENGTH_LIMIT, Field(ge=0)]
StepMs = Annotated[Real, STEP_LIMIT, Field(ge=0.0)]
Weight = Annotated[Real, Field(ge=0.0), at_most(MAX_POLICY_WEIGHT, "per weight", "only the ratios count; far larger weights overflow the score")]

METHOD_NAMES = ("hindsight_milp", "lookahead_milp", "relaxation_bound", "hindsight_search")
OBJECTIVES = ("total_ttft", "ttft_excess")


class TimingSpec(Strict):
    """A server's iteration-time profile: one continuous-batching iteration that decodes ``n`` sequences, holds ``b``
    KV blocks in use and prefills ``p`` uncached tokens in chunks that attend to ``q`` query-key pairs in all (a
    chunk of ``c`` tokens starting ``o`` tokens into its prompt: ``c o + c (c + 1) / 2``) takes

        t_iter = step_base_ms + step_ms_per_seq * n + step_ms_per_kv_block * b + prefill_ms_per_token * p
                 + prefill_ms_per_pair * q   (ms).

    ``step_base_ms`` is required and > 0: no iteration takes 0 ms (a decode step of 0 ms would make TPOT 0).
    Limits: ``prefill_ms_per_token`` <= 100 (MAX_PREFILL_MS_PER_TOKEN: 10 tokens/s, slower than any real server, and
    the MILP's big-M stays numerically sound below it); the step terms <= 1e5 ms (MAX_STEP_MS: a 100 s iteration);
    ``prefill_ms_per_pair`` <= 1 ms (MAX_PREFILL_MS_PER_PAIR; real ones are 1e-9 to 1e-5 ms).  The exact views leave
    the pair term out (it only lengthens iterations, so their bounds stay bounds: bounds.py)."""

    prefill_ms_per_token: Annotated[Real, at_most(MAX_PREFILL_MS_PER_TOKEN, "ms per token",
                                                  "10 tokens/s, slower than any real server; the MILP's big-M constants stay sound")] = Field(gt=0.0)
    """ms per uncached prompt token an iteration prefills."""
    step_base_ms: Annotated[Real, STEP_LIMIT] = Field(gt=0.0)
    """Fixed time of every iteration, in ms (required, > 0)."""
    step_ms_per_seq: StepMs = 0.0
    """ms each decoding sequence adds to an iteration."""
    step_ms_per_kv_block: StepMs = 0.0
    """ms each KV block in use adds to an iteration."""
    prefill_ms_per_pair: Annotated[Real, at_most(MAX_PREFILL_MS_PER_PAIR, "ms per pair",
                                                 "a million times a real GPU's attention cost per query-key pair")] = Field(0.0, ge=0.0)
    """ms per query-key pair of the iteration's prefill chunks (the exact views leave it out)."""


class ServerSpec(Strict):
    """``count`` identical model servers (give several entries for a heterogeneous pool).  Their iteration time is
    ``timing`` (given) or derived from ``hardware`` (a GPU, a model, the TP degree and a performance source, as the
    fleet kind's ``hardware`` gives them: server_hardware.py); exactly one.  With ``hardware``,
    ``kv_capacity_blocks`` may be left out: the GPUs' KV memory in blocks."""

    name: str = "server"
    """The servers' name in reports."""
    count: Annotated[Integer, SERVERS_LIMIT] = Field(1, ge=1)
    """Number of identical servers of this entry."""
    max_running_seqs: Annotated[Integer, at_most(1_000_000, "sequences", "a batch is scanned sequence by sequence")] = Field(ge=1)
    """Most requests one server runs at once."""
    kv_capacity_blocks: Annotated[Integer, TOKEN_LIMIT] | None = Field(None, ge=1)
    """KV-cache blocks of one server (blocks of ``block_tokens``); required with ``timing``, derived from the GPUs'
    memory with ``hardware``."""
    prefill_budget_tokens: Annotated[Integer, TOKEN_LIMIT] = Field(ge=1)
    """Token budget of one iteration: one token per decoding request, the rest for prefill chunks."""
    timing: TimingSpec | None = None
    """The iteration-time terms, given (exactly one of ``timing`` and ``hardware``)."""
    hardware: ModelOnGpusSpec | None = None
    """A GPU, a model, the TP degree and a performance source, from which the engine model derives the timing and the KV
    capacity."""

    @model_validator(mode="after")
    def _one_timing(self) -> "ServerSpec":
        if (self.timing is None) == (self.hardware is None):
            raise ValueError("give timing (the iteration-time terms) or hardware (gpu, model, tp, performance: derived by the engine "
                             "model), exactly one")
        if self.timing is not None and self.kv_capacity_blocks is None:
            raise ValueError("kv_capacity_blocks is required with timing (with hardware it is derived from the GPUs' memory)")
        return self


class SharedPrefixSpec(Strict):
    """The shared-prefix workload of the blog's scenarios (inference-perf's shared_prefix data generator):
    ``num_groups`` system prompts of ``system_prompt_len`` tokens, each shared by ``num_prompts_per_group`` users;
    a user's question has ``question_len +- question_len_sd`` tokens and the answer ``output_len +- output_len_sd``
    (normal, rounded, at least 1).  With ``multi_turn`` a user's next prompt is the previous prompt, the previous
    answer and a new question; after ``max_turns`` turns the user starts a new conversation.  Lengths and their
    deviations are at most 1e8 tokens (MAX_LENGTH_TOKENS); the users (``num_groups * num_prompts_per_group``) at
    most MAX_REQUESTS; ``max_prompt_tokens`` at least the system prompt and one question token."""

    num_groups: Annotated[Integer, REQUESTS_LIMIT] = Field(ge=1)
    """Number of system prompts (groups), each shared by its users."""
    num_prompts_per_group: Annotated[Integer, REQUESTS_LIMIT] = Field(ge=1)
    """Users per group."""
    system_prompt_len: Length
    """Tokens of each group's system prompt."""
    question_len: Annotated[Integer, LENGTH_LIMIT] = Field(ge=1)
    """Mean tokens of a user's question."""
    question_len_sd: Annotated[Real, LENGTH_LIMIT] = Field(0.0, ge=0.0)
    """Standard deviation of the question's tokens (normal, rounded, at least 1)."""
    output_len: Annotated[Integer, LENGTH_LIMIT] = Field(ge=1)
    """Mean tokens of an answer."""
    output_len_sd: Annotated[Real, LENGTH_LIMIT] = Field(0.0, ge=0.0)
    """Standard deviation of the answer's tokens (normal, rounded, at least 1)."""
    multi_turn: bool = True
    """Whether a user's next prompt is the previous prompt, its answer and a new question (else every prompt is the
    system prompt and a new question)."""
    max_turns: Annotated[Integer, at_most(1000, "turns", "a history grows by one question and answer per turn")] = Field(5, ge=1)
    """Turns after which a user starts a new conversation (with ``multi_turn``)."""
    max_prompt_tokens: Annotated[Integer, TOKEN_LIMIT] | None = Field(None, ge=1)
    """Tokens a prompt may reach before the user starts a new conversation (default: no limit)."""

    @field_validator("num_prompts_per_group")
    @classmethod
    def _users(cls, value: int, info: ValidationInfo) -> int:
        users = value * info.data.get("num_groups", 1)
        if users > MAX_REQUESTS:
            raise ValueError(f"num_groups x num_prompts_per_group = {users:,} users: above the limit of {MAX_REQUESTS:,} "
                             "(the requests an instance may generate; the generator keeps every user's history)")
        return value

    @field_validator("max_prompt_tokens")
    @classmethod
    def _above_system_prompt(cls, value: int | None, info: ValidationInfo) -> int | None:
        system = info.data.get("system_prompt_len")
        if value is not None and system is not None and value <= system:
            raise ValueError(f"must exceed system_prompt_len ({system:,}): a prompt is the system prompt and at least one question token")
        return value


class TraceSpec(Strict):
    """A CSV trace: columns ``arrival_s, prompt_tokens, output_tokens`` and optionally ``group``,
    ``shared_prefix_tokens`` (the group's common prefix, one length per group) and ``session`` (turns of one
    conversation share their history, and their group); relative to the instance file."""

    file: str
    """The CSV trace (``arrival_s, prompt_tokens, output_tokens``, optional ``group``, ``shared_prefix_tokens``,
    ``session``), relative to the instance."""


class StepSpec(Strict):
    rate_rps: PositiveReal
    """Poisson arrival rate of this step, requests per second."""
    duration_s: PositiveReal
    """Length of this step, in seconds."""


class ArrivalSpec(Strict):
    """Poisson arrivals at ``rate_rps`` for ``requests`` requests, or a stepped QPS ladder (Poisson within each
    step of ``duration_s``).  Ignored for a trace (its arrival times are used).  A process's fields only: ``steps``
    with ``poisson``, or ``rate_rps``/``requests`` with ``stepped``, are errors (they would be ignored); a ladder's
    expected requests (sum of rate x duration) obey the request limit of Poisson arrivals (MAX_REQUESTS)."""

    process: Literal["poisson", "stepped"] = "poisson"
    """``poisson``: one rate for ``requests`` requests; ``stepped``: a QPS ladder of ``steps``."""
    rate_rps: PositiveReal | None = None
    """Arrival rate of ``process: poisson``, requests per second."""
    requests: Annotated[Integer, REQUESTS_LIMIT] | None = Field(None, ge=1)
    """Requests of ``process: poisson``."""
    steps: list[StepSpec] | None = None
    """The ladder of ``process: stepped``: its rates and durations, in order."""

    @model_validator(mode="after")
    def _complete(self) -> "ArrivalSpec":
        if self.process == "poisson" and (self.rate_rps is None or self.requests is None):
            raise ValueError("poisson arrivals need rate_rps and requests")
        if self.process == "stepped" and not self.steps:
            raise ValueError("stepped arrivals need steps: [{rate_rps, duration_s}, ...]")
        return self

    @field_validator("rate_rps", "requests")
    @classmethod
    def _poisson_only(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("process") == "stepped":
            raise ValueError("stepped arrivals take their rates and durations from steps (leave it out)")
        return value

    @field_validator("steps")
    @classmethod
    def _ladder(cls, value: list[StepSpec] | None, info: ValidationInfo) -> list[StepSpec] | None:
        if value is None:
            return value
        if info.data.get("process") == "poisson":
            raise ValueError("poisson arrivals have no steps (write process: stepped for a ladder)")
        expected = sum(s.rate_rps * s.duration_s for s in value)
        if expected > MAX_REQUESTS:
            raise ValueError(f"the ladder expects {expected:,.4g} requests (sum of rate_rps x duration_s): above the limit of "
                             f"{MAX_REQUESTS:,} requests (every policy replays every request)")
        return value


class WorkloadSpec(Strict):
    seed: Integer = Field(0, ge=0)
    """Seed of the generated workload and of the policies' random choices: the same seed gives the same run."""
    shared_prefix: SharedPrefixSpec | None = None
    """The shared-prefix generator of the llm-d blog's scenarios (exactly one of it and ``trace``)."""
    trace: TraceSpec | None = None
    """A CSV trace, with its own arrival times (exactly one of it and ``shared_prefix``)."""
    arrivals: ArrivalSpec | None = None
    """The arrival process of a generated workload (required with ``shared_prefix``; ignored for a trace)."""

    @model_validator(mode="after")
    def _one_source(self) -> "WorkloadSpec":
        if (self.shared_prefix is None) == (self.trace is None):
            raise ValueError("give exactly one of shared_prefix, trace")
        if self.shared_prefix is not None and self.arrivals is None:
            raise ValueError("a generated workload needs arrivals")
        return self


class PolicySpec(Strict):
    """A registered routing policy with parameters; a bare string names one with its defaults.

    ``load_prefix``: ``weights`` (prefix : queue : kv).  ``predicted_latency``: ``predictor`` (``oracle`` or
    ``quantile``), ``ttft_weight`` (0.8), ``affinity_tau`` (0.80), ``explore_probability`` (0.01),
    ``affinity_max_ttft_penalty_ms`` (5000), ``buffer`` (1.0)."""

    name: str
    """The registered policy (``round_robin``, ``least_requests``, ``load_prefix``, ``predicted_latency``, ...)."""
    label: str | None = None
    """The policy's name in reports and as a method (default: its name)."""
    weights: dict[str, Weight] | None = None
    """``load_prefix``: the scorers' weights ``{prefix, queue, kv}`` (only the ratios count; default 1:1:1)."""
    predictor: Literal["oracle", "quantile"] | None = None
    """``predicted_latency``: ``oracle`` (the simulator's forecast) or ``quantile`` (an online quantile regression);
    default ``oracle``."""
    ttft_weight: Annotated[Real, Field(ge=0.0, le=1.0)] | None = None
    """``predicted_latency``: weight of the TTFT headroom against the TPOT headroom (default 0.8)."""
    affinity_tau: Annotated[Real, Field(ge=0.0, le=1.0)] | None = None
    """``predicted_latency``: prefix score from which a server is sticky: when any server reaches it, only those compete
    (default 0.80)."""
    explore_probability: Annotated[Real, Field(ge=0.0, le=1.0)] | None = None
    """``predicted_latency``: probability of ignoring the affinity gate for one request (default 0.01)."""
    affinity_max_ttft_penalty_ms: NonNegativeReal | None = None
    """``predicted_latency``: most predicted TTFT, in ms, affinity may cost over the best server (default 5000)."""
    buffer: PositiveReal | None = None
    """``predicted_latency``: factor on the SLOs in the headroom ``SLO * buffer - predicted`` (default:
    ``slo.buffer``)."""
    retrain_every: Annotated[Integer, at_most(1_000_000, "requests", "a retrain fits the window")] | None = Field(None, ge=1)
    """``predictor: quantile``: new TTFT samples between refits (default 10)."""
    per_bucket: Annotated[Integer, at_most(100_000, "samples", "the window is refitted")] | None = Field(None, ge=1)
    """``predictor: quantile``: newest samples kept per bucket of the training window (default 64)."""

    @field_validator("weights")
    @classmethod
    def _some_weight(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None and not any(w > 0 for w in value.values()):
            raise ValueError("the weights need at least one positive entry (prefix, queue, kv); leave weights out for 1:1:1")
        return value


def _policy_form(value: Any) -> str | None:
    """Which form a policy entry has: a name or a mapping (None: neither).  The tags are pydantic's type names,
    which the loader leaves out of a field path, so a mapping's error names its own field (``policies.0.weights.prefix``)."""
    return "str" if isinstance(value, str) else "dict" if isinstance(value, dict) else None


PolicyEntrySpec = Annotated[Annotated[str, Tag("str")] | Annotated[PolicySpec, Tag("dict")],
                            Discriminator(_policy_form, custom_error_type="policy_entry",
                                          custom_error_message="a policy is a registered name or a mapping {name: ..., ...}")]


class SloSpec(Strict):
    """Per-request latency SLOs (both optional); ``buffer`` scales them in the predicted-latency scorer's headroom
    ``SLO * buffer - predicted``."""

    ttft_ms: PositiveReal | None = None
    """Per-request TTFT target, in ms (optional)."""
    tpot_ms: PositiveReal | None = None
    """Per-request TPOT target, in ms (optional)."""
    buffer: PositiveReal = 1.0
    """Factor on the SLOs in the predicted-latency scorer's headroom ``SLO * buffer - predicted``."""

    @field_validator("ttft_ms", "tpot_ms", mode="before")
    @classmethod
    def _positive(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ValueError("an SLO must be > 0 ms (leave it out for no SLO)")
        return value


class SolveSpec(Strict):
    """The methods beside the policies: ``method`` (what ``solve`` runs; default ``hindsight_milp`` when the trace is
    small enough, else ``lookahead_milp``), ``objective`` (``total_ttft``: mean TTFT; ``ttft_excess``: mean TTFT
    above ``slo.ttft_ms``), the MILP size limit, the look-ahead window and the hindsight search's budget."""

    method: str | None = None
    """The method ``optfleet solve`` runs besides the policies: ``hindsight_milp``, ``lookahead_milp``,
    ``relaxation_bound`` or ``hindsight_search`` (default: ``hindsight_milp`` when the trace is small enough, else
    ``lookahead_milp``)."""
    objective: Literal["total_ttft", "ttft_excess"] = "total_ttft"
    """``total_ttft``: mean TTFT; ``ttft_excess``: mean TTFT above ``slo.ttft_ms``."""
    time_limit_s: PositiveReal | None = 60.0
    """Time limit of each MILP, build and solve, and of ``hindsight_search``, in seconds."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""
    max_milp_requests: Annotated[Integer, at_most(5000, "requests", "the MILP has a row per pair of requests and server")] = Field(120, ge=1)
    """Most requests the hindsight MILP takes (the whole trace)."""
    lookahead_requests: Annotated[Integer, at_most(1000, "requests", "one MILP per window")] = Field(24, ge=1)
    """Arrivals in each window of the look-ahead MILP."""
    lookahead_commit: Annotated[Integer, at_most(1000, "requests", "one MILP per window")] = Field(8, ge=1, validate_default=True)
    """Placements committed from each look-ahead window (at most ``lookahead_requests``)."""
    lookahead_balance: Annotated[Real, Field(ge=1.0)] = 1.5
    """Cap on one server's requests in a look-ahead window: ``ceil(lookahead_balance x window / servers)``."""
    search_evaluations: Annotated[Integer, at_most(10**8, "evaluations", "each one replays the whole trace")] = Field(20_000, ge=1)
    """Placements ``hindsight_search`` scores (its annealing schedule's length; ``solve.time_limit_s`` may stop it
    first)."""
    search_seed: Annotated[Integer, Field(ge=0)] = 0
    """Seed of ``hindsight_search``'s moves."""

    @field_validator("lookahead_commit")
    @classmethod
    def _commit_within_window(cls, value: int, info: ValidationInfo) -> int:
        window = info.data.get("lookahead_requests")
        if window is not None and value > window:
            raise ValueError(f"exceeds lookahead_requests = {window}: a window commits at most the requests it sees "
                             f"(give lookahead_commit <= {window}; its default is 8)")
        return value

    @field_validator("method")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None and value not in METHOD_NAMES:
            raise ValueError(f"unknown method; known: {', '.join(METHOD_NAMES)}")
        return value


class PlacementInstanceSpec(Strict):
    kind: Literal["placement"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    block_tokens: Annotated[Integer, at_most(4096, "tokens", "a block is a page of the KV cache")] = Field(16, ge=1)
    """Tokens per KV-cache block (a page of the cache; prefixes are reused in whole blocks)."""
    servers: list[ServerSpec]
    """The model servers (several entries for a heterogeneous pool)."""
    workload: WorkloadSpec
    """The requests: generated (shared prefixes) or a trace, and their arrivals."""
    policies: list[PolicyEntrySpec] = Field(default_factory=lambda: ["round_robin", "least_requests", "load_prefix_111",
                                                                      "load_prefix_322", "predicted_latency"])
    """The routing policies to compare: names, or blocks with a ``name`` and its parameters."""
    slo: SloSpec = SloSpec()
    """Optional per-request latency targets."""
    solve: SolveSpec = SolveSpec()
    """The exact views' method, objective and limits."""
