"""The model and the engine of one GPU configuration of a fleet instance (``hardware.model`` or ``hardware.config_json``,
``hardware.performance``).

Under ``preset: engine`` every pool option's iteration time comes from an
:class:`~optfleet.engine.step.EngineModel` (optfleet/engine/), reduced per
pool to the affine form the slot model uses (engine/reduce.py).  The other
presets are the paper's model, which charges no prefill compute and uses the
``hardware.iteration`` constants instead.

Sources: ``roofline`` for any catalog GPU; ``measured`` (aiconfigurator's
database) for the GPU types it measured, each catalog GPU mapped to its
system (:data:`MEASURED_SYSTEMS`); ``fit`` and ``affine`` describe one
configuration, the hardware block's, so a ``gpu_catalog`` refuses them; so does ``profile`` (a published
profile of one GPU type, DistServe's or Splitwise's, at the block's TP).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from optfleet.engine.measured import DEFAULT_MEASURED_BACKEND, MEASURED_SYSTEMS
from optfleet.engine.roofline import roofline_engine
from optfleet.engine.step import AFFINE_FIELDS, AffineStep, EngineModel
from optfleet.errors import InputError
from optfleet.hardware.catalog import ModelSpec, get_gpu, get_model
from optfleet.hardware.hf_config import model_from_hf_config
from optfleet.hardware.profiles import ProfileAssumptions
from optfleet.problems.fleet.schema import HardwareSpec, ModelOnGpusSpec, PerformanceSpec

ENGINE_PRESET = "engine"
PAPER_ITERATION_FIELDS = ("w_ms", "h_ms_per_slot")
ONE_CONFIGURATION_SOURCES = ("fit", "affine", "profile")


def model_of(spec: ModelOnGpusSpec, resolve: Callable[[str], Path], field: str = "hardware") -> ModelSpec:
    """The served model: read from ``config_json`` (``model`` then names it), else the catalog's ``model``
    (``field``: the block's path, for messages)."""
    if spec.config_json is not None:
        return model_from_hf_config(resolve(spec.config_json), name=spec.model, field=f"{field}.config_json")
    assert spec.model is not None  # the schema asks for one of the two
    return get_model(spec.model, field=f"{field}.model")


def engine_of(spec: ModelOnGpusSpec, model: ModelSpec, resolve: Callable[[str], Path], own: bool = True,
              field: str = "hardware.performance") -> EngineModel:
    """The engine model of ``spec``'s GPU configuration; ``own`` is False for a catalog option other than the
    hardware block's (module docstring)."""
    performance = spec.performance
    if not own and performance.source in ONE_CONFIGURATION_SOURCES:
        raise InputError(f"{field}.source", performance.source,
                         f"describes one configuration ({spec.gpu} x{spec.tp} is another in gpu_catalog); use roofline or measured with a gpu_catalog")
    if performance.source == "affine":
        return _affine(performance, field)
    if performance.source == "fit":
        return _fit(performance, resolve, field)
    if performance.source == "profile":
        return _profile(performance, spec, resolve, field)
    if performance.source == "measured":
        return _measured(performance, spec, model, resolve, own, field)
    given = {name: getattr(performance, name) for name in ("bandwidth_efficiency", "compute_efficiency", "allreduce_bandwidth_efficiency")
             if getattr(performance, name) is not None}
    return roofline_engine(get_gpu(spec.gpu), model, spec.tp, ProfileAssumptions(**given))


def _affine(performance: PerformanceSpec, field: str) -> AffineStep:
    """The coefficients given (those left out are 0; the schema asks for ``base_ms``)."""
    return AffineStep(**{name: float(getattr(performance, name) or 0.0) for name in AFFINE_FIELDS}, label=f"affine: given in {field}")


def _fit(performance: PerformanceSpec, resolve: Callable[[str], Path], field: str) -> AffineStep:
    from optfleet.engine.fit import fit_performance_files  # pandas readers: loaded only for a fit

    files = [performance.file] if isinstance(performance.file, str) else list(performance.file or [])
    return fit_performance_files([resolve(name) for name in files], fixed=performance.fixed, field=f"{field}.file").step


def _profile(performance: PerformanceSpec, spec: ModelOnGpusSpec, resolve: Callable[[str], Path], field: str) -> EngineModel:
    from optfleet.engine.published_profiles import profile_engine  # pandas readers: loaded only for a profile

    assert isinstance(performance.file, str)  # the schema asks for one file
    tp_field = f"{field.rsplit('.', 1)[0]}.tp" if "." in field else "tp"
    return profile_engine(resolve(performance.file), performance.profile_model, performance.profile_hardware, spec.tp,
                          field, tp_field)


def _measured(performance: PerformanceSpec, spec: ModelOnGpusSpec, model: ModelSpec, resolve: Callable[[str], Path], own: bool,
              field: str) -> EngineModel:
    from optfleet.engine.measured import MeasuredEngine  # aiconfigurator: imported only for a measured source

    gpu = get_gpu(spec.gpu).name
    system = performance.system if own and performance.system is not None else MEASURED_SYSTEMS.get(gpu)
    if system is None:
        raise InputError(f"{field}.system" if own else "gpu_catalog.gpus", gpu,
                         f"aiconfigurator's database has no system for it; measured GPUs: {', '.join(MEASURED_SYSTEMS)}"
                         + (" (or name its system)" if own else ""))
    if gpu in MEASURED_SYSTEMS and system != MEASURED_SYSTEMS[gpu]:
        raise InputError(f"{field}.system", system, f"is not hardware.gpu {gpu}'s system ({MEASURED_SYSTEMS[gpu]}): the plan would be "
                         "priced and sized on one GPU and timed on another")
    name = performance.model
    assert name is not None  # the schema asks for it
    local = resolve(name)
    engine = MeasuredEngine.build(system, performance.backend or DEFAULT_MEASURED_BACKEND, performance.version,
                                  str(local) if local.is_dir() else name, spec.tp, ep=performance.ep or 1,
                                  gemm_quant=performance.gemm_quant, moe_quant=performance.moe_quant,
                                  kvcache_quant=performance.kvcache_quant, fmha_quant=performance.fmha_quant)
    _check_same_model(engine, model, spec.tp, field)
    return engine


MODEL_WEIGHT_TOLERANCE = 0.15
"""How far the measured model's weights may be from the served model's (parameter counting conventions differ by a
few per cent: tied embeddings, norms); further apart, they are not the same model or not the same precision."""


def _check_same_model(engine: EngineModel, model: ModelSpec, tp: int, field: str) -> None:
    """Refuse a measured model whose weights (aiconfigurator's memory estimate, when it gives one) are not the served
    model's: its times would size another model's fleet.  A model whose output layer shares the embedding matrix may
    be counted with the matrix once or twice (aiconfigurator counts it twice); either count is the same model."""
    memory = getattr(engine, "memory", None)
    if memory is None:
        return
    measured_gb = memory.weights_bytes * tp / 1e9
    served_gb = model.weight_bytes() / 1e9
    counts_gb = [served_gb]
    if model.tied_embedding_params_billion is not None:
        counts_gb.append(served_gb * (1.0 + model.tied_embedding_params_billion / model.params_billion))
    if min(abs(measured_gb / gb - 1.0) for gb in counts_gb) > MODEL_WEIGHT_TOLERANCE:
        raise InputError(f"{field}.model", engine.source.split(", ")[-1],
                         f"holds {measured_gb:.1f} GB of weights over TP {tp}, the served model ({model.name}) {served_gb:.1f} GB: "
                         "they must be the same model at the same precision (set hardware.model or hardware.config_json to the "
                         "measured model)")


def check_preset_fields(preset: str, spec: HardwareSpec, field: str = "hardware") -> None:
    """Refuse a block that belongs to the other service model: the paper's W and H (or its length-scaled iteration)
    under ``preset: engine``, a ``performance`` block under the paper's presets."""
    iteration = spec.iteration
    if preset == ENGINE_PRESET:
        for name in PAPER_ITERATION_FIELDS:
            if getattr(iteration, name) is not None:
                raise InputError(f"{field}.iteration.{name}", getattr(iteration, name),
                                 "is a constant of the paper's service model, which charges no prefill compute; under preset engine give "
                                 f"{field}.performance (source: affine, base_ms, per_seq_ms, ...) or set preset: paper")
        if iteration.scaling != "flat":
            raise InputError(f"{field}.iteration.scaling", iteration.scaling,
                             "belongs to the paper's service model; under preset engine each decode step reads each request's own "
                             "context (set preset: paper or fleetsim_compatible for length_scaled)")
    elif "performance" in spec.model_fields_set:
        raise InputError(f"{field}.performance", spec.performance.source,
                         f"applies under preset engine; preset {preset} is the paper's model (hardware.iteration's W and H, no prefill compute)")
