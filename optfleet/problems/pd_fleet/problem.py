"""The prepared pd_fleet problem: pools with their request mix, the options each may take, prices, power and links.

``prepare(loaded)`` turns a validated ``kind: pd_fleet`` instance into a :class:`PdProblem` and checks every rule
that needs more than one field, raising :class:`~optfleet.errors.InputError` naming it:

* each TP degree shards the model (``check_tensor_parallel``) and the model fits the GPU at the pool's window
  (optfleet/hardware/memory.py); an option that fits at no window is refused naming its field;
* a decode ``max_batch`` fits the decode instance's KV cache at the largest window
  (``memory_fit(...).max_sequences``, vLLM's memory accounting): above it is refused naming ``decode.max_batch``;
* every request fits the largest window (``pools.windows_tokens``), GPU names in ``links``, ``gpus`` and
  ``constraints`` are catalog GPUs of the instance.

Requests are routed by window (schema.py): pool ``j`` takes the requests with ``W_{j-1} < L_in + L_out <= W_j``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.reduce import affine_reduction
from optfleet.engine.step import AffineStep, EngineModel
from optfleet.errors import InputError
from optfleet.hardware import get_gpu
from optfleet.hardware.catalog import ModelSpec, check_tensor_parallel, get_model
from optfleet.hardware.hf_config import model_from_hf_config
from optfleet.hardware.memory import memory_fit
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.fleet.performance import ONE_CONFIGURATION_SOURCES, engine_of
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.problem import MAX_BUDGETS_PER_PROMPT, PoolFactory, request_mix
from optfleet.problems.fleet.schema import EngineLimitsSpec, HardwareSpec, ModelOnGpusSpec
from optfleet.problems.pd_fleet.roles import TransferLink
from optfleet.problems.pd_fleet.schema import DecodeSpec, PdFleetSpec


@dataclass(frozen=True)
class GpuType:
    """A GPU type the instance uses: price per GPU-hour and power per GPU (catalog, or ``gpus[]`` overrides)."""

    name: str
    cost_per_gpu_hour: float
    power_w: float | None


@dataclass(frozen=True)
class PoolTraffic:
    """Pool ``index``: requests with ``lower < L_in + L_out <= window_tokens``, as atoms ``(l_in, l_out)`` with
    probabilities ``weight`` (summing to 1 within the pool), arriving at ``rate_rps``."""

    index: int
    lower_tokens: int
    window_tokens: int
    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]
    weight: NDArray[np.float64]
    rate_rps: float

    @property
    def label(self) -> str:
        return f"pool {self.index} ({self.lower_tokens:,}-{self.window_tokens:,} tokens)"

    @property
    def busy(self) -> bool:
        return self.rate_rps > 0.0


@dataclass(frozen=True)
class Config:
    """One GPU configuration of a role: GPU type, TP degree, price of an instance (``tp`` GPUs) and its engine."""

    role: str
    gpu: str
    tp: int
    cost_per_instance_hour: float
    engine: EngineModel

    @property
    def gpu_label(self) -> str:
        return f"{self.gpu} x{self.tp}" if self.tp > 1 else self.gpu


@dataclass(frozen=True)
class AggregatedOption(Config):
    """An aggregated configuration: the fleet kind's batching pool at token budget ``budget_tokens``."""

    budget_tokens: int = 8192
    factory: PoolFactory | None = None

    @property
    def label(self) -> str:
        return f"agg {self.gpu_label} B{self.budget_tokens}"

    def pool(self, window_tokens: int) -> PoolConfig | None:
        """The fleet's pool config at ``window_tokens`` (None when no sequence of the window fits)."""
        assert self.factory is not None
        config = self.factory.pool(window_tokens)
        return config if config.slots_per_instance >= 1 else None


@dataclass(frozen=True)
class PrefillOption(Config):
    """A prefill configuration: one prompt at a time, ``token_budget`` tokens per iteration (roles.py)."""

    token_budget: int = 8192

    @property
    def label(self) -> str:
        return f"P {self.gpu_label} B{self.token_budget}"


@dataclass(frozen=True)
class DecodeOption(Config):
    """A decode configuration: at most ``max_batch`` running sequences (prepare checked they fit its KV cache at
    the largest window, hence at every window)."""

    max_batch: int = 256

    @property
    def label(self) -> str:
        return f"D {self.gpu_label} b{self.max_batch}"

    def decode_step(self, window_tokens: int) -> AffineStep:
        """The engine reduced to ``base + per_seq b + per_kv_token k`` over batches up to ``max_batch`` and contexts up
        to ``window_tokens`` (engine/reduce.py; exact for an affine source)."""
        return affine_reduction(self.engine, self.max_batch, window_tokens, window_tokens)


@dataclass(frozen=True)
class PdProblem:
    """A validated pd_fleet instance in numbers (module docstring)."""

    name: str
    rate_rps: float
    model: ModelSpec
    pools: tuple[PoolTraffic, ...]
    aggregated: tuple[AggregatedOption, ...]
    prefill: tuple[PrefillOption, ...]
    decode: tuple[DecodeOption, ...]
    gpus: dict[str, GpuType]
    link_default_gb_per_s: float
    link_pairs_gb_per_s: dict[tuple[str, str], float]
    ttft_p99_ms: float
    tpot_p99_ms: float
    rho_max: float
    constraints: tuple = ()
    method: str = "milp"
    time_limit_s: float = 60.0
    mip_gap: float = 1e-6
    solver: str = "highs"
    description: str = ""
    performance_source: str = "roofline"

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one prompt token sends from prefill to decode (the model's, all layers, K and V)."""
        return float(self.model.kv_bytes_per_token())

    def link(self, prefill_gpu: str, decode_gpu: str) -> TransferLink:
        """The link of a prefill instance of ``prefill_gpu`` sending to ``decode_gpu`` (pair override, else default)."""
        gb_per_s = self.link_pairs_gb_per_s.get((prefill_gpu, decode_gpu), self.link_default_gb_per_s)
        return TransferLink(gb_per_s=gb_per_s, kv_bytes_per_token=self.kv_bytes_per_token)

    @property
    def busy_pools(self) -> tuple[PoolTraffic, ...]:
        return tuple(p for p in self.pools if p.busy)

    def option(self, label: str, field: str = "plan") -> Config:
        """The option called ``label`` (InputError on ``field`` otherwise)."""
        for option in (*self.aggregated, *self.prefill, *self.decode):
            if option.label == label:
                return option
        raise InputError(field, label, "is not an option of this instance")

    def power_of(self, gpu: str) -> float | None:
        return self.gpus[gpu].power_w

    def with_constraints(self, constraints: tuple) -> "PdProblem":
        """The same problem under other constraints (the options and their sizing are shared)."""
        return replace(self, constraints=tuple(constraints))


def prepare(loaded: LoadedInstance) -> PdProblem:
    """Check the cross-field rules of a loaded ``kind: pd_fleet`` instance and build the problem (module docstring)."""
    spec: PdFleetSpec = loaded.spec
    _check_blocks(spec)
    model = _model(spec, loaded.resolve)
    windows = tuple(spec.pools.windows_tokens)
    pools = _pools(loaded, windows)
    configs = _distinct_configs(spec)
    own = len(configs) == 1
    if not own and spec.performance.source in ONE_CONFIGURATION_SOURCES:
        raise InputError("performance.source", spec.performance.source,
                         f"describes one configuration, and this instance offers {len(configs)} (GPU x TP); use roofline or measured")
    gpus = _gpu_types(spec, configs)
    engines: dict[tuple[str, int], EngineModel] = {}

    def engine(gpu: str, tp: int, field: str) -> EngineModel:
        if (gpu, tp) not in engines:
            check_tensor_parallel(model, tp, field)
            on = ModelOnGpusSpec(gpu=gpu, model=spec.model, config_json=spec.config_json, tp=tp, performance=spec.performance)
            engines[(gpu, tp)] = engine_of(on, model, loaded.resolve, own=own, field="performance")
        return engines[(gpu, tp)]

    aggregated = _aggregated(spec, model, gpus, engine, windows, loaded.resolve)
    prefill, decode = _disaggregated(spec, model, gpus, engine, windows)
    return PdProblem(
        name=spec.name, rate_rps=spec.workload.rate_rps, model=model, pools=pools, aggregated=aggregated, prefill=prefill,
        decode=decode, gpus=gpus, link_default_gb_per_s=spec.links.default_gb_per_s,
        link_pairs_gb_per_s=_link_pairs(spec, prefill, decode), ttft_p99_ms=spec.slo.ttft_p99_ms, tpot_p99_ms=spec.slo.tpot_p99_ms,
        rho_max=spec.slo.rho_max, constraints=_checked_constraints(spec, gpus), method=spec.solve.method,
        time_limit_s=spec.solve.time_limit_s, mip_gap=spec.solve.mip_gap, solver=spec.solve.solver,
        description=spec.description, performance_source=spec.performance.source,
    )


def _check_blocks(spec: PdFleetSpec) -> None:
    """A model, both roles or neither, and some option left; each refused naming the field to add or change (in the
    schema these rules named the whole document)."""
    if spec.model is None and spec.config_json is None:
        raise InputError("model", None, "is missing: give model (a catalog name: optfleet catalog lists them) or config_json "
                         "(a Hugging Face model's config.json)")
    if (spec.prefill is None) != (spec.decode is None):
        raise InputError("decode" if spec.decode is None else "prefill", None,
                         "is missing: a disaggregated pool needs both prefill and decode; give both or neither")
    if spec.prefill is None and (spec.aggregated is None or not spec.aggregated.enabled):
        field, value = ("aggregated", None) if spec.aggregated is None else ("aggregated.enabled", False)
        raise InputError(field, value, "no option left: give aggregated (enabled), or prefill and decode")


def _model(spec: PdFleetSpec, resolve: Callable[[str], Path]) -> ModelSpec:
    """The served model: read from ``config_json`` (``model`` then names it), else the catalog's ``model``."""
    if spec.config_json is not None:
        return model_from_hf_config(resolve(spec.config_json, "config_json"), name=spec.model, field="config_json")
    assert spec.model is not None  # _check_blocks asks for one of the two
    return get_model(spec.model, field="model")


def _pools(loaded: LoadedInstance, windows: tuple[int, ...]) -> tuple[PoolTraffic, ...]:
    """The request mix split by window; a request above the largest window is an error on ``pools.windows_tokens``."""
    mix, _ = request_mix(loaded)
    if mix.max_total_tokens > windows[-1]:
        raise InputError("pools.windows_tokens", list(windows),
                         f"the workload has requests of up to {mix.max_total_tokens:,} tokens (input + output) and the largest "
                         f"window holds {windows[-1]:,}: give a window that holds every request")
    rate = loaded.spec.workload.rate_rps
    pools = []
    lower = 0
    for j, window in enumerate(windows):
        inside = (mix.l_total > lower) & (mix.l_total <= window)
        mass = float(mix.prob[inside].sum())
        weight = mix.prob[inside] / mass if mass > 0 else mix.prob[inside]
        pools.append(PoolTraffic(j, lower, window, mix.l_in[inside], mix.l_out[inside], weight, rate * mass))
        lower = window
    return tuple(pools)


def _distinct_configs(spec: PdFleetSpec) -> set[tuple[str, int]]:
    """The distinct (catalog GPU name, TP) pairs of every offered role; an unknown GPU is refused naming its field
    (``prefill.gpus[0]``)."""
    aggregated = spec.aggregated if spec.aggregated is not None and spec.aggregated.enabled else None
    blocks = [(role, b) for role, b in (("aggregated", aggregated), ("prefill", spec.prefill), ("decode", spec.decode))
              if b is not None]
    return {(get_gpu(g, f"{role}.gpus[{i}]").name, tp) for role, b in blocks for i, g in enumerate(b.gpus) for tp in b.tp}


def _gpu_types(spec: PdFleetSpec, configs: set[tuple[str, int]]) -> dict[str, GpuType]:
    """Price and power of every GPU type the options use: the catalog's, replaced by ``gpus[]`` entries."""
    overrides = {}
    for i, o in enumerate(spec.gpus):
        name = get_gpu(o.gpu, f"gpus[{i}].gpu").name
        if name in overrides:
            raise InputError(f"gpus[{i}].gpu", o.gpu, "appears twice; give each GPU type once")
        overrides[name] = o
    types = {}
    for name in sorted({gpu for gpu, _ in configs}):
        catalog = get_gpu(name)
        o = overrides.get(name)
        price = o.cost_per_gpu_hour if o is not None and o.cost_per_gpu_hour is not None else catalog.cost_per_gpu_hour
        power = o.power_w if o is not None and o.power_w is not None else catalog.power_w
        types[name] = GpuType(name, float(price), None if power is None else float(power))
    for name in overrides:
        if name not in types:
            i = list(overrides).index(name)
            raise InputError(f"gpus[{i}].gpu", name, f"is not a GPU type of any option here; types: {', '.join(types)}")
    return types


def _aggregated(spec: PdFleetSpec, model: ModelSpec, gpus: dict[str, GpuType], engine: Callable[..., EngineModel],
                windows: tuple[int, ...], resolve: Callable[[str], Path]) -> tuple[AggregatedOption, ...]:
    block = spec.aggregated
    if block is None or not block.enabled:
        return ()
    options = []
    for i, budget in enumerate(block.max_num_batched_tokens):
        budgets = -(-windows[-1] // budget)
        if budgets > MAX_BUDGETS_PER_PROMPT:
            raise InputError(f"aggregated.max_num_batched_tokens[{i}]", budget,
                             f"splits a prompt filling the largest window (pools.windows_tokens: {windows[-1]:,} tokens) into "
                             f"{budgets:,} budgets; the batching model takes at most {MAX_BUDGETS_PER_PROMPT}: raise the budget or "
                             "lower the window")
    for gi, gpu_name in enumerate(block.gpus):
        gpu = get_gpu(gpu_name, f"aggregated.gpus[{gi}]").name
        for ti, tp in enumerate(block.tp):
            step = engine(gpu, tp, f"aggregated.tp[{ti}]")
            _require_fit(model, gpu, tp, windows[0], f"aggregated.tp[{ti}]")
            for budget in block.max_num_batched_tokens:
                hardware = HardwareSpec(gpu=gpu, model=spec.model, config_json=spec.config_json, tp=tp, performance=spec.performance,
                                        engine=EngineLimitsSpec(max_num_batched_tokens=budget))
                price = tp * gpus[gpu].cost_per_gpu_hour
                options.append(AggregatedOption("aggregated", gpu, tp, price, step, budget_tokens=budget,
                                                factory=PoolFactory(hardware, price, model, step)))
    return tuple(options)


def _disaggregated(spec: PdFleetSpec, model: ModelSpec, gpus: dict[str, GpuType], engine: Callable[..., EngineModel],
                   windows: tuple[int, ...]) -> tuple[tuple[PrefillOption, ...], tuple[DecodeOption, ...]]:
    if spec.prefill is None or spec.decode is None:
        return (), ()
    prefill = []
    for gi, gpu_name in enumerate(spec.prefill.gpus):
        gpu = get_gpu(gpu_name, f"prefill.gpus[{gi}]").name
        for ti, tp in enumerate(spec.prefill.tp):
            step = engine(gpu, tp, f"prefill.tp[{ti}]")
            _require_fit(model, gpu, tp, windows[-1], f"prefill.tp[{ti}]")
            prefill += [PrefillOption("prefill", gpu, tp, tp * gpus[gpu].cost_per_gpu_hour, step, token_budget=budget)
                        for budget in spec.prefill.token_budget]
    decode = []
    batches_of = _max_batches_by_gpu(spec.decode)
    for gi, gpu_name in enumerate(spec.decode.gpus):
        gpu = get_gpu(gpu_name, f"decode.gpus[{gi}]").name
        batches, batch_field = batches_of.get(gpu, (spec.decode.max_batch, "decode.max_batch"))
        for ti, tp in enumerate(spec.decode.tp):
            step = engine(gpu, tp, f"decode.tp[{ti}]")
            fit = memory_fit(gpu, model, tp, windows[-1])
            if not fit.fits:
                raise InputError(f"decode.tp[{ti}]", tp, f"{model.name} on {tp} x {gpu} at {windows[-1]:,} tokens: {fit.infeasible_reason}")
            for bi, batch in enumerate(batches):
                if batch > fit.max_sequences:
                    raise InputError(f"{batch_field}[{bi}]", batch,
                                     f"is above the KV capacity of {tp} x {gpu} serving {model.name} at the largest window "
                                     f"{windows[-1]:,} tokens: {fit.max_sequences} sequences fit (vLLM's memory accounting); lower it or raise decode.tp")
                decode.append(DecodeOption("decode", gpu, tp, tp * gpus[gpu].cost_per_gpu_hour, step, max_batch=batch))
    return tuple(prefill), tuple(decode)


def _max_batches_by_gpu(decode: DecodeSpec) -> dict[str, tuple[list[int], str]]:
    """``decode.max_batch_by_gpu`` by catalog name: each GPU's batches and the field that names them; a GPU type that
    is not one of ``decode.gpus`` (a typo would leave ``max_batch`` in force, silently) is refused naming its key."""
    listed = {get_gpu(name, f"decode.gpus[{i}]").name for i, name in enumerate(decode.gpus)}
    out: dict[str, tuple[list[int], str]] = {}
    keys: dict[str, str] = {}
    for key, batches in decode.max_batch_by_gpu.items():
        field = f"decode.max_batch_by_gpu.{key}"
        gpu = get_gpu(key, field).name
        if gpu not in listed:
            raise InputError(field, batches, f"{gpu} is not one of decode.gpus ({', '.join(sorted(listed))})")
        if gpu in keys:
            raise InputError(field, batches, f"{gpu} is listed twice (as {keys[gpu]} and {key})")
        keys[gpu] = key
        out[gpu] = (batches, field)
    return out


def _require_fit(model: ModelSpec, gpu: str, tp: int, window: int, field: str) -> None:
    fit = memory_fit(gpu, model, tp, window)
    if not fit.fits:
        raise InputError(field, tp, f"{model.name} on {tp} x {gpu} at {window:,} tokens: {fit.infeasible_reason}")


def _link_pairs(spec: PdFleetSpec, prefill: tuple[PrefillOption, ...], decode: tuple[DecodeOption, ...]) -> dict[tuple[str, str], float]:
    """The per-pair bandwidths; a pair twice, or naming a GPU type no option of its role uses (a typo would leave the
    default bandwidth in force, silently), is refused naming the field."""
    pairs = {}
    for i, pair in enumerate(spec.links.pairs):
        key = (get_gpu(pair.prefill_gpu, f"links.pairs[{i}].prefill_gpu").name, get_gpu(pair.decode_gpu, f"links.pairs[{i}].decode_gpu").name)
        for role, options, name, field in (("prefill", prefill, key[0], "prefill_gpu"), ("decode", decode, key[1], "decode_gpu")):
            types = sorted({o.gpu for o in options})
            if name not in types:
                raise InputError(f"links.pairs[{i}].{field}", getattr(pair, field),
                                 f"is not a GPU type of any {role} option here; {role} types: {', '.join(types) or 'none'}")
        if key in pairs:
            raise InputError(f"links.pairs[{i}]", f"{key[0]} -> {key[1]}", "appears twice; give each pair once")
        pairs[key] = float(pair.gb_per_s)
    return pairs


def _checked_constraints(spec: PdFleetSpec, gpus: dict[str, GpuType]) -> tuple:
    """The constraints with catalog GPU names; a GPU no option uses, a min share above the max, a power cap with a GPU
    of unknown power, or a second budget is refused naming the field."""
    checked = []
    kinds = set()
    for i, c in enumerate(spec.constraints):
        if c.kind in ("budget", "power") and c.kind in kinds:
            raise InputError(f"constraints[{i}].kind", c.kind, f"give at most one {c.kind} constraint")
        kinds.add(c.kind)
        if getattr(c, "gpu", None) is not None:
            name = get_gpu(c.gpu, f"constraints[{i}].gpu").name
            if name not in gpus:
                raise InputError(f"constraints[{i}].gpu", c.gpu, f"is not a GPU type of any option here; types: {', '.join(gpus)}")
            c = c.model_copy(update={"gpu": name})
        if c.kind == "gpu_mix" and c.min_share > c.max_share:
            raise InputError(f"constraints[{i}].min_share", c.min_share, f"exceeds max_share {c.max_share}")
        if c.kind == "power":
            unknown = [g.name for g in gpus.values() if g.power_w is None]
            if unknown:
                raise InputError(f"constraints[{i}]", "power", f"needs the power of {', '.join(unknown)}: give gpus[].power_w")
        checked.append(c)
    return tuple(checked)
