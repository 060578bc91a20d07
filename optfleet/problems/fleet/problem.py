"""The prepared fleet problem: every number a heuristic, model or evaluator needs.

``prepare(loaded)`` turns a validated instance spec into a :class:`FleetProblem`:
it reads the workload into an exact :class:`~optfleet.problems.fleet.workload.mix.RequestMix`,
resolves the hardware into :class:`PoolConfig` objects per context window, and
checks everything that needs data from more than one field (boundaries inside
the long window, slots > 0, requests that fit the long window).  Models and
heuristics take a FleetProblem; they never read files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from optfleet.errors import InputError
from optfleet.hardware import GpuSpec, ModelSpec, get_gpu, instance_cost_per_hour, slots_from_kv_tokens, slots_from_memory
from optfleet.hardware.catalog import check_tensor_parallel
from optfleet.engine.reduce import affine_reduction
from optfleet.engine.step import EngineModel
from optfleet.hardware.profiles import GpuProfile, derive_profile
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import TpotTargets
from optfleet.problems.fleet.engine_limits import EngineLimits, resolve_limits
from optfleet.problems.fleet.performance import ENGINE_PRESET, check_preset_fields, engine_of, model_of
from optfleet.problems.fleet.schema import CatalogOverrideSpec, FleetInstanceSpec, HardwareSpec, IterationSpec, SlotsSpec
from optfleet.problems.fleet.workload.cdf import parse_cdf_points, read_cdf_file
from optfleet.problems.fleet.workload.mix import RequestMix, split_fixed_fraction, split_normal_fraction
from optfleet.problems.fleet.workload.trace import concatenate_traces, read_trace

HOURS_PER_YEAR = 8760.0

# Standard context windows tried as boundaries when the workload is a trace (no CDF breakpoints).
TRACE_BOUNDARY_CANDIDATES = (256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152)


@dataclass(frozen=True)
class FleetProblem:
    """A validated fleet instance in numbers."""

    name: str
    rate_rps: float
    mix: RequestMix
    long_window_tokens: int
    boundary_candidates: tuple[int, ...]
    pool_routing_boundary_tokens: int | None
    compression_enabled: bool
    compressible_fraction: float
    gammas: tuple[float, ...]
    retrofit_gamma: float
    ttft_p99_ms: float
    rho_max: float
    ttft_rule: str
    hardware: "PoolFactory"
    preset: str = ENGINE_PRESET
    ttft_quantile: float = 0.99
    """The percentile the TTFT target holds at: 0.99 for an instance file (its ``slo.ttft_p99_ms``); ``optfleet explain``
    varies it (the sensitivity's percentile curve), and the evaluator, the sweep and the MILP all read it."""
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    service_model: str = "slots"
    method: str = "sweep"
    solver: str = "highs"
    milp_routing: str = "threshold"
    max_pools: int = 2
    time_limit_s: float = 60.0
    mip_gap: float = 1e-6
    constraints: tuple = ()
    options: tuple["PoolFactory", ...] = ()
    option_windows: tuple[int, ...] = ()
    skipped_options: tuple[str, ...] = ()
    catalog_types: tuple[str, ...] = ()
    compression_gammas: tuple[float, ...] = (1.0,)
    standard_windows: bool = False
    """True when the short windows tried are the standard grid (a trace workload), not the workload's breakpoints."""

    def pool(self, window_tokens: int, gpu: str | None = None) -> PoolConfig:
        """The pool config at ``window_tokens`` on configuration ``gpu`` (a label; None = ``hardware``)."""
        return self.configuration(gpu).pool(window_tokens)

    def configuration(self, gpu: str | None, field: str = "plan.pools.gpu") -> "PoolFactory":
        """The GPU configuration labelled ``gpu`` (``"H100-SXM x4"``); None is the ``hardware`` block's.
        An unknown label is an InputError on ``field``."""
        if gpu is None or gpu == self.hardware.label:
            return self.hardware
        for option in self.options:
            if option.label == gpu:
                return option
        raise InputError(field, gpu, f"not a GPU configuration of this instance; known: {', '.join(o.label for o in self.options) or self.hardware.label}")

    def configuration_label(self, gpu: str | None, tp: int | None, field: str = "gpu") -> str:
        """Label of GPU type ``gpu`` at TP ``tp``, each defaulting to the ``hardware`` block's."""
        name = get_gpu(gpu, field).name if gpu is not None else self.hardware.gpu_name
        return _label(name, tp if tp is not None else self.hardware.tp)

    @property
    def tpot_percentile_targets(self) -> dict[str, float]:
        """The TPOT percentile targets given (``{"p99": 50.0}``), strictest first."""
        given = {"p50": self.tpot_p50_ms, "p90": self.tpot_p90_ms, "p99": self.tpot_p99_ms}
        return dict(sorted(((k, v) for k, v in given.items() if v is not None), key=lambda kv: kv[1]))

    @property
    def tpot_targets(self) -> TpotTargets:
        """The strictest TPOT percentile target (the slot model's longest-iteration bound must meet it: it bounds
        every percentile) and the mean TPOT target."""
        targets = self.tpot_percentile_targets
        return TpotTargets(min(targets.values()) if targets else None, self.tpot_mean_ms)

    @property
    def charges_prefill(self) -> bool:
        """True under the engine model (``preset: engine``)."""
        return self.preset == ENGINE_PRESET

    def with_compression_on(self) -> "FleetProblem":
        """The same problem with Compress-and-Route on at the instance's settings (its share ``p_c`` and gamma grid,
        ``compression_gammas``): what an instance that leaves compression off would get with it."""
        return replace(self, compression_enabled=True, gammas=self.compression_gammas)

    @property
    def heterogeneous(self) -> bool:
        """True when the MILP chooses among GPU configurations (a ``gpu_catalog``)."""
        return bool(self.options)

    def with_options(self, options: tuple["PoolFactory", ...]) -> "FleetProblem":
        """The same problem restricted to ``options`` (e.g. one GPU type for a single-type fleet)."""
        return replace(self, options=options)


@dataclass(frozen=True)
class PoolFactory:
    """Builds the :class:`PoolConfig` of one GPU configuration at any window (memoised).

    ``cost_per_instance_hour`` is the price of one instance (``tp`` GPUs).  Under the engine model (``engine`` given)
    each window's iteration is the engine reduced over that pool's region (engine/reduce.py); under the paper's,
    iteration constants missing from ``spec.iteration`` are derived per window from first principles
    (:func:`optfleet.hardware.profiles.derive_profile`).
    """

    spec: HardwareSpec
    cost_per_instance_hour: float
    model: ModelSpec
    engine: EngineModel | None = None
    _cache: dict[int, PoolConfig] = field(default_factory=dict, compare=False, repr=False)

    @property
    def gpu_name(self) -> str:
        """The catalog's name of the GPU type."""
        return get_gpu(self.spec.gpu).name

    @property
    def tp(self) -> int:
        return self.spec.tp

    @property
    def label(self) -> str:
        """``"<gpu>"`` or ``"<gpu> x<tp>"``: the configuration's name in plans and reports."""
        return _label(self.gpu_name, self.spec.tp)

    def slots_per_instance(self, window_tokens: int) -> int:
        return self.pool(window_tokens).slots_per_instance

    @property
    def engine_limits(self) -> EngineLimits:
        """The engine's batch limits on this GPU (engine_limits.py; no limits without a ``hardware.engine`` block)."""
        return resolve_limits(self.spec.engine, get_gpu(self.spec.gpu))

    def pool(self, window_tokens: int) -> PoolConfig:
        if window_tokens not in self._cache:
            it = self.spec.iteration
            profile = self.profile(window_tokens)
            slots = profile.slots if self.spec.slots.formula == "profile" else self._slots(window_tokens)
            w_ms = it.w_ms if it.w_ms is not None else profile.iteration_base_ms
            h_ms = it.h_ms_per_slot if it.h_ms_per_slot is not None else profile.per_slot_ms
            limits = self.engine_limits
            chunk = self.chunk_tokens
            step = None
            if self.engine is not None:
                # no prompt of the pool is longer than its window: a budget above it prefills each prompt in one
                # iteration, as a chunk of the window does (and the affine form is fitted over the chunks that occur)
                chunk = min(chunk, window_tokens)
                step = affine_reduction(self.engine, max(limits.slots(slots), 1), window_tokens, chunk)
                w_ms, h_ms = step.base_ms, float(step.seq_step_ms(window_tokens))
            self._cache[window_tokens] = PoolConfig(
                window_tokens=window_tokens,
                slots_per_instance=limits.slots(slots),
                w_ms=float(w_ms),
                h_ms_per_slot=float(h_ms),
                chunk_tokens=chunk,
                length_scale_tokens=it.length_scale_tokens if it.scaling == "length_scaled" else None,
                cost_per_instance_hour=self.cost_per_instance_hour,
                gpu=self.label,
                step=step,
            )
        return self._cache[window_tokens]

    @property
    def chunk_tokens(self) -> int:
        """The prefill chunk: ``hardware.iteration.chunk_tokens`` within the engine's token budget (engine_limits.py);
        a budget given with no chunk is the chunk (the engine fills its budget)."""
        budget = self.engine_limits.max_num_batched_tokens
        if budget is not None and "chunk_tokens" not in self.spec.iteration.model_fields_set:
            return budget
        return self.engine_limits.chunk_tokens(self.spec.iteration.chunk_tokens)

    def profile(self, window_tokens: int) -> GpuProfile | None:
        """The first-principles profile, when W, H or the slots are to be derived."""
        it = self.spec.iteration
        if self.engine is not None or it.w_ms is None or it.h_ms_per_slot is None or self.spec.slots.formula == "profile":
            return derive_profile(self.spec.gpu, self.model, self.spec.tp, window_tokens)
        return None

    def _slots(self, window_tokens: int) -> int:
        slots = self.spec.slots
        if slots.table is not None:
            return int(slots.table.get(window_tokens, 0))
        if slots.kv_tokens_per_gpu is not None:
            return slots_from_kv_tokens(slots.kv_tokens_per_gpu * self.spec.tp, window_tokens)
        if slots.formula == "fleetsim":
            # inference-fleet-sim's A100 profile: max_slots 128 at 8192 tokens, 65536 KV blocks of 16 tokens.
            return min(128 * 8192 // window_tokens, 65536 // math.ceil(window_tokens / 16))
        memory = slots.from_memory
        assert memory is not None  # the schema guarantees exactly one rule
        return slots_from_memory(
            get_gpu(self.spec.gpu),
            self.model,
            window_tokens,
            tp=self.spec.tp,
            memory_utilisation=memory.memory_utilisation,
            reserved_gb_per_gpu=memory.reserved_gb_per_gpu,
            weight_bytes_per_param=memory.weight_bytes_per_param,
            kv_dtype_bytes=memory.kv_dtype_bytes,
        )


def prepare(loaded: LoadedInstance) -> FleetProblem:
    """Build the FleetProblem of a loaded instance, checking cross-field consistency."""
    spec: FleetInstanceSpec = loaded.spec
    gpu = get_gpu(spec.hardware.gpu)
    model = model_of(spec.hardware, loaded.resolve)
    check_tensor_parallel(model, spec.hardware.tp)
    check_preset_fields(spec.preset, spec.hardware)
    _check_token_budget(spec.hardware)
    tpot_given = [name for name in ("tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "tpot_mean_ms") if getattr(spec.slo, name) is not None]
    if tpot_given and spec.slo.service_model == "batching" and spec.preset != ENGINE_PRESET:
        raise InputError(f"slo.{tpot_given[0]}", getattr(spec.slo, tpot_given[0]), f"TPOT targets under the batching model need "
                         f"preset engine (the paper's batching iteration, preset {spec.preset}, has no TPOT model); or use service_model: slots")
    if spec.preset == ENGINE_PRESET and spec.slo.ttft_rule == "fleetsim":
        raise InputError("slo.ttft_rule", "fleetsim", "is inference-fleet-sim's check on the paper's iteration (preset fleetsim_compatible); "
                         "under preset engine the TTFT floor is the engine's (ttft_rule: paper)")
    engine = engine_of(spec.hardware, model, loaded.resolve) if spec.preset == ENGINE_PRESET else None
    price = _instance_price(gpu, spec.hardware.tp, spec.cost.cost_per_gpu_hour, "cost.cost_per_gpu_hour")
    hardware = PoolFactory(spec.hardware, price, model, engine)
    long_window = spec.pools.long_window_tokens
    if spec.slo.service_model == "batching":
        _check_budgets_per_prompt(spec.hardware, hardware.chunk_tokens, long_window)
    if spec.hardware.slots.table is not None and long_window not in spec.hardware.slots.table:
        raise InputError("hardware.slots.table", sorted(spec.hardware.slots.table), f"has no slot count for the long window {long_window}")
    if hardware.slots_per_instance(long_window) < 1:
        profile = hardware.profile(long_window)
        why = profile.infeasible_reason if profile is not None and profile.infeasible_reason else "no KV slot"
        raise InputError(
            "hardware.config_json" if spec.hardware.config_json is not None else "hardware.model", model.name,
            f"does not fit: 0 KV slots per {hardware.pool(long_window).gpu} instance at the long window {long_window} tokens ({why}); "
            "raise hardware.tp, pick a larger GPU or a shorter pools.long_window_tokens",
        )
    mix, breakpoints = request_mix(loaded)
    if mix.max_total_tokens > long_window:
        raise InputError(
            "pools.long_window_tokens", long_window,
            f"the workload has requests of up to {mix.max_total_tokens} tokens; they fit no pool",
        )
    candidates = _boundary_candidates(spec, breakpoints, hardware)
    routing_b = spec.pools.pool_routing_boundary_tokens
    if routing_b is not None:
        _check_boundary(routing_b, long_window, "pools.pool_routing_boundary_tokens", hardware)
    comp = spec.compression
    for i, constraint in enumerate(spec.constraints):
        if getattr(constraint, "gpu", None) is not None:
            get_gpu(constraint.gpu, f"constraints[{i}].gpu")  # an unknown GPU name is refused here, naming its constraint
    options, windows, skipped = _catalog_options(loaded, hardware, candidates) if spec.gpu_catalog is not None else ((), (), ())
    return FleetProblem(
        name=spec.name,
        rate_rps=spec.workload.rate_rps,
        mix=mix,
        long_window_tokens=long_window,
        boundary_candidates=candidates,
        standard_windows=not breakpoints,
        pool_routing_boundary_tokens=routing_b,
        compression_enabled=comp.enabled,
        compressible_fraction=comp.compressible_fraction,
        gammas=gamma_grid(comp.gamma_max, comp.gamma_step) if comp.enabled else (1.0,),
        compression_gammas=gamma_grid(comp.gamma_max, comp.gamma_step),
        retrofit_gamma=comp.retrofit_gamma,
        ttft_p99_ms=spec.slo.ttft_p99_ms,
        rho_max=spec.slo.rho_max,
        ttft_rule=spec.slo.ttft_rule,
        hardware=hardware,
        preset=spec.preset,
        tpot_p50_ms=spec.slo.tpot_p50_ms,
        tpot_p90_ms=spec.slo.tpot_p90_ms,
        tpot_p99_ms=spec.slo.tpot_p99_ms,
        tpot_mean_ms=spec.slo.tpot_mean_ms,
        service_model=spec.slo.service_model,
        method=spec.solve.method,
        solver=spec.solve.solver,
        milp_routing=spec.solve.routing,
        max_pools=spec.solve.max_pools,
        time_limit_s=spec.solve.time_limit_s,
        mip_gap=spec.solve.mip_gap,
        constraints=tuple(spec.constraints),
        options=options,
        option_windows=windows,
        skipped_options=skipped,
        catalog_types=tuple(dict.fromkeys(o.gpu_name for o in options)),
    )


def _check_token_budget(hardware: HardwareSpec) -> None:
    """A chunk given explicitly must fit the engine's token budget (``max_num_batched_tokens``): an engine never
    schedules more prompt tokens in one iteration than its budget."""
    limits = resolve_limits(hardware.engine, get_gpu(hardware.gpu))
    budget = limits.max_num_batched_tokens
    if budget is not None and limits.max_num_seqs is not None and budget < limits.max_num_seqs:
        raise InputError("hardware.engine.max_num_batched_tokens", budget,
                         f"is below max_num_seqs {limits.max_num_seqs} (given or vLLM's default for {get_gpu(hardware.gpu).name}): every "
                         "running sequence needs a token in an iteration (vLLM refuses this too); lower max_num_seqs or raise the budget")
    chunk = hardware.iteration.chunk_tokens
    if budget is not None and "chunk_tokens" in hardware.iteration.model_fields_set and chunk > budget:
        raise InputError("hardware.iteration.chunk_tokens", chunk,
                         f"is above the engine's token budget max_num_batched_tokens {budget}: no iteration carries more prompt "
                         "tokens than the budget (lower the chunk, or raise hardware.engine.max_num_batched_tokens)")


MAX_BUDGETS_PER_PROMPT = 256
"""The batching service model's laws have a point per eighth of a token budget up to the long window (queueing/
batching.py, batching_engine.py): at most this many budgets per prompt keeps them a few thousand points wide."""


def _check_budgets_per_prompt(hardware: HardwareSpec, chunk: int, window: int) -> None:
    """Refuse a token budget so small beside the long window that the batching model's laws would not fit in memory
    (:data:`MAX_BUDGETS_PER_PROMPT`)."""
    budgets = -(-window // chunk)
    if budgets > MAX_BUDGETS_PER_PROMPT:
        field = "hardware.iteration.chunk_tokens" if "chunk_tokens" in hardware.iteration.model_fields_set else "hardware.engine.max_num_batched_tokens"
        raise InputError(field, chunk, f"splits a {window:,}-token prompt into {budgets:,} budgets; the batching service model takes at most "
                         f"{MAX_BUDGETS_PER_PROMPT} (a budget of at least {-(-window // MAX_BUDGETS_PER_PROMPT):,} tokens here; vLLM's "
                         "default is 2,048 or more), or use slo.service_model: slots")


def _label(gpu_name: str, tp: int) -> str:
    return f"{gpu_name} x{tp}" if tp > 1 else gpu_name


def _catalog_options(loaded: LoadedInstance, hardware: PoolFactory, candidates: tuple[int, ...]) -> tuple[tuple[PoolFactory, ...], tuple[int, ...], tuple[str, ...]]:
    """GPU configurations of ``gpu_catalog`` (gpu x tp), the windows offered, and the configurations left out (why)."""
    spec: FleetInstanceSpec = loaded.spec
    catalog = spec.gpu_catalog
    assert catalog is not None
    long_window = spec.pools.long_window_tokens
    windows = tuple(sorted(set(catalog.windows or candidates) | {long_window}))
    for i, w in enumerate(catalog.windows or ()):
        if not 0 < w <= long_window:
            raise InputError(f"gpu_catalog.windows[{i}]", w, f"must lie in (0, {long_window}] (the long window)")
    names = [get_gpu(g, f"gpu_catalog.gpus[{i}]").name for i, g in enumerate(catalog.gpus)]
    model = hardware.model
    for i, tp in enumerate(catalog.tp):
        check_tensor_parallel(model, tp, f"gpu_catalog.tp[{i}]")
    for i, ov in enumerate(catalog.overrides):
        name = get_gpu(ov.gpu, f"gpu_catalog.overrides[{i}].gpu").name
        if name not in names:
            raise InputError(f"gpu_catalog.overrides[{i}].gpu", ov.gpu, f"is not in gpu_catalog.gpus {catalog.gpus}")
        if (name, ov.tp) == (hardware.gpu_name, hardware.tp):
            raise InputError(f"gpu_catalog.overrides[{i}]", f"{ov.gpu} tp {ov.tp}", "is the hardware block's own configuration: set its numbers in hardware")
        for paper_field in ("w_ms", "h_ms_per_slot"):
            if spec.preset == ENGINE_PRESET and getattr(ov, paper_field) is not None:
                raise InputError(f"gpu_catalog.overrides[{i}].{paper_field}", getattr(ov, paper_field),
                                 "is a constant of the paper's service model, which charges no prefill compute; set preset: paper, "
                                 "or leave it out (under preset engine each GPU type's iteration comes from its engine)")
    options: list[PoolFactory] = []
    skipped: list[str] = []
    for name in dict.fromkeys(names):
        for tp in dict.fromkeys(catalog.tp):
            if (name, tp) == (hardware.gpu_name, hardware.tp):
                option = hardware
            else:
                matching = [ov for ov in catalog.overrides if get_gpu(ov.gpu).name == name and ov.tp in (None, tp)]
                override = max(matching, key=lambda ov: ov.tp is not None, default=None)
                option = _catalog_option(loaded, hardware, name, tp, override, catalog.overrides.index(override) if override is not None else None)
            if max(option.slots_per_instance(w) for w in windows) < 1:
                profile = option.profile(windows[0])
                why = profile.infeasible_reason if profile is not None and profile.infeasible_reason else "no KV slot at any window"
                skipped.append(f"{option.label}: {model.name}: {why}")
                continue
            options.append(option)
    if not options:
        raise InputError("gpu_catalog", catalog.gpus, f"no GPU configuration holds {model.name}: {'; '.join(skipped)}")
    chunks = {option.label: option.pool(long_window).chunk_tokens for option in options}
    if len(set(chunks.values())) > 1:  # the MILP's floor levels count prefill chunks of one size for every option
        raise InputError("hardware.engine.max_num_batched_tokens", spec.hardware.engine.max_num_batched_tokens,
                         f"gives the catalog's GPU types different prefill chunks ({', '.join(f'{k}: {v}' for k, v in chunks.items())}); "
                         "set max_num_batched_tokens, or a hardware.iteration.chunk_tokens at most the smallest budget")
    return tuple(options), windows, tuple(skipped)


def _catalog_option(loaded: LoadedInstance, hardware: PoolFactory, gpu: str, tp: int, override: CatalogOverrideSpec | None,
                    position: int | None) -> PoolFactory:
    """One catalog configuration: the reference's model and chunking, derived or overridden W/H/slots
    (``override`` is ``gpu_catalog.overrides[position]``)."""
    spec: FleetInstanceSpec = loaded.spec
    reference = spec.hardware.iteration
    iteration = IterationSpec(
        w_ms=None if override is None else override.w_ms,
        h_ms_per_slot=None if override is None else override.h_ms_per_slot,
        scaling=reference.scaling,
        length_scale_tokens=reference.length_scale_tokens,
        **({"chunk_tokens": reference.chunk_tokens} if "chunk_tokens" in reference.model_fields_set else {}),
    )
    kv = None if override is None else override.kv_tokens_per_gpu
    slots = SlotsSpec(kv_tokens_per_gpu=kv) if kv is not None else SlotsSpec(formula="profile")
    config = HardwareSpec(gpu=gpu, model=spec.hardware.model, config_json=spec.hardware.config_json, tp=tp, iteration=iteration,
                          slots=slots, engine=spec.hardware.engine, performance=spec.hardware.performance)
    price = None if override is None else override.cost_per_gpu_hour
    engine = engine_of(config, hardware.model, loaded.resolve, own=False) if spec.preset == ENGINE_PRESET else None
    return PoolFactory(config, _instance_price(get_gpu(gpu), tp, price, f"gpu_catalog.overrides[{position}].cost_per_gpu_hour"), hardware.model, engine)


MAX_INSTANCE_PRICE_PER_HOUR = 1e270
"""Largest price of one instance ($/h).  A fleet's cost sums instances x price over its pools, a pool holds at most
``MAX_GPUS`` = 2^53 instances (optfleet.queueing.sizing) and a year has 8,760 hours: 1e270 x 2^53 x 8,760 is about
8e289, so every cost per hour or per year stays finite in double precision (below 1.8e308) with 18 decades to spare
for the number of pools, and can never hide as an infinite (null) objective."""


def _instance_price(gpu: GpuSpec, tp: int, price: float | None, field: str) -> float:
    """``instance_cost_per_hour``, refused on ``field`` above :data:`MAX_INSTANCE_PRICE_PER_HOUR`."""
    cost = instance_cost_per_hour(gpu, tp, price)
    if cost > MAX_INSTANCE_PRICE_PER_HOUR:
        raise InputError(field, price, f"{gpu.name} x{tp} costs {cost:.3g} $/h per instance, above the limit of "
                         f"{MAX_INSTANCE_PRICE_PER_HOUR:g} $/h that keeps every fleet's cost finite in double precision")
    return cost


def gamma_grid(gamma_max: float, gamma_step: float) -> tuple[float, ...]:
    """``{1, 1 + step, ..., gamma_max}`` rounded to 6 decimals (so 1.1 is exactly 1.1)."""
    count = int(math.floor((gamma_max - 1.0) / gamma_step + 1e-9))
    return tuple(round(1.0 + i * gamma_step, 6) for i in range(count + 1))


def request_mix(loaded: LoadedInstance) -> tuple[RequestMix, tuple[int, ...]]:
    """The exact request mix and the CDF breakpoints (empty for a trace)."""
    workload = loaded.spec.workload
    lengths, split = workload.lengths, workload.split
    if lengths.trace_file is not None:
        trace = concatenate_traces([read_trace(file.path, file.field)
                                    for file in loaded.resolve_files(lengths.trace_file, "workload.lengths.trace_file")])
        if split.rule == "from_trace":
            return RequestMix.from_pairs(trace.l_in, trace.l_out, np.ones(len(trace))), ()
        totals, counts = np.unique(trace.l_in + trace.l_out, return_counts=True)
        weights, breakpoints = counts.astype(np.float64), ()
    else:
        if split.rule == "from_trace":
            raise InputError("workload.split.rule", split.rule, "from_trace needs workload.lengths.trace_file")
        table = (
            read_cdf_file(loaded.resolve(lengths.cdf_file, "workload.lengths.cdf_file"), "workload.lengths.cdf_file")
            if lengths.cdf_file is not None
            else parse_cdf_points(lengths.cdf, "workload.lengths.cdf")
        )
        totals, weights = table.integer_lengths()
        breakpoints = tuple(int(t) for t, f in zip(table.tokens, table.cumulative) if f > 0)
    if split.rule == "fixed_output_fraction":
        l_in, l_out = split_fixed_fraction(totals, split.output_fraction)
    else:
        l_in, l_out, weights = split_normal_fraction(totals, weights, split.mean, split.sd, split.quadrature_nodes)
    return RequestMix.from_pairs(l_in, l_out, weights), breakpoints


def _check_boundary(boundary: int, long_window: int, field: str, hardware: PoolFactory) -> None:
    if boundary <= 0:
        raise InputError(field, boundary, "a pool boundary must be a positive token count")
    if boundary >= long_window:
        raise InputError(field, boundary, f"a pool boundary must be below the long window {long_window}")
    if hardware.slots_per_instance(boundary) < 1:
        raise InputError(field, boundary, "the hardware has 0 KV slots at this window")


def _boundary_candidates(spec: FleetInstanceSpec, breakpoints: tuple[int, ...], hardware: PoolFactory) -> tuple[int, ...]:
    """CDF breakpoints (or standard windows for a trace) below the long window with >= 1 slot, plus the user's list."""
    long_window = spec.pools.long_window_tokens
    user = spec.pools.short_window_candidates or []
    for i, b in enumerate(user):
        _check_boundary(b, long_window, f"pools.short_window_candidates[{i}]", hardware)
    automatic = breakpoints or TRACE_BOUNDARY_CANDIDATES
    feasible = {b for b in automatic if b < long_window and hardware.slots_per_instance(b) >= 1}
    return tuple(sorted(feasible | set(user)))
