"""The measured engine: iteration times from NVIDIA aiconfigurator's per-operation GPU database.

aiconfigurator-core (Apache-2.0, PyPI ``aiconfigurator-core``) holds latencies of each operation of a forward
pass (GEMMs, attention kernels, norms, MoE, all-reduces) measured on real GPUs (``h100_sxm``, ``h200_sxm``,
``a100_sxm``, ``b200_sxm``, ...) under a serving framework (``trtllm``, ``vllm``, ``sglang``) at a version, and
composes a model's pass from them.  Its compiled engine (``compile_engine`` / ``EngineHandle``, the SDK's stable
facade) splits one mixed iteration into three parts (``EngineHandle.mixed_step_breakdown``)::

    t(p, o, b, k) = N_pre(p + b) + A_pre(p, o) + A_dec(b, k / b)      (p > 0: the pass carries a prefill chunk)
    t(0, o, b, k) = N_dec(b)     + A_dec(b, k / b)                     (a decode-only pass)

* ``N_pre(x)``: every operation but attention (GEMMs, norms, MoE, all-reduces, the logits of the prefilled
  sequence) in a pass of ``x`` tokens that carries a prefill;
* ``N_dec(b)``: the same in a decode-only pass of ``b`` tokens (aiconfigurator's generation op list);
* ``A_pre(p, o)``: the context attention of ``p`` new tokens after ``o`` cached ones (a prefill with a prefix);
* ``A_dec(b, s)``: the generation attention of ``b`` sequences reading ``s`` KV tokens each; a decode batch of
  ``b`` sequences reading ``k`` tokens in all is priced at its mean context ``s = k / b``.

These four are measured once per configuration into numpy tables and interpolated afterwards, without
aiconfigurator.  A static prefill of a prompt of ``L`` tokens with ``o`` of them cached (aiconfigurator's
``static_ctx`` TTFT at batch 1, ``isl = L``, ``prefix = o``) is ``step_ms(L - o, 0, 0, o)``; a static decode step
of ``b`` sequences after prompts of ``I`` tokens (its ``static_gen`` TPOT at ``isl = I``, ``osl = 2``, whose
attention reads ``I + 1`` tokens) is ``step_ms(0, b, b (I + 1))``.  aiconfigurator's own mixed step prices a
chunk's attention as the whole prompt's divided by the number of chunks; here a chunk at offset ``o`` gets its own
``A_pre(p, o)`` (the same when the chunk is the whole prompt).

Tables (:class:`MeasuredTables`): ``N_pre`` and ``A_pre(p, 0)`` at every integer token count up to
:data:`DENSE_TOKENS` (the GEMM tables jump where a token count starts a new tile: a 1 % grid would miss them),
then :data:`TOKENS_PER_OCTAVE` points per doubling up to ``max_tokens``; ``N_dec`` at every batch up to
``max_batch``; the prefix increment ``A_pre(p, o) - A_pre(p, 0)`` and ``A_dec(b, s)`` on geometric grids
(:data:`ATTENTION_PER_OCTAVE` points per doubling past their first integers, refined down to adjacent integers
where the database jumps, e.g. where a kernel changes at a batch of 64), interpolated bilinearly.  Past the
grid the non-attention parts grow in proportion to the tokens and the attention parts to their work
(``pairs(p, o)``, ``b s``); below one token or sequence the non-attention parts hold their first value and the
attention parts shrink to zero with their work.

Built tables are cached in ``<user cache>/optfleet/measured/<key>.npz``, keyed by the configuration, the grid and
the aiconfigurator-core version; an unreadable file is rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.cache import cache_root
from optfleet.engine.step import EngineModel, prefill_pairs
from optfleet.errors import InputError
from optfleet.hardware.catalog import check_positive_int

FIELD = "hardware.performance"
DISTRIBUTION = "aiconfigurator-core"
LOWEST_VERSION = (0, 12)  # EngineHandle.mixed_step_breakdown, the split the tables are built from, is new in 0.12.0

DENSE_TOKENS = 16384
TOKENS_PER_OCTAVE = 32
ATTENTION_PER_OCTAVE = 8
ATTENTION_DENSE = 16  # the attention grids hold every integer up to here, then ATTENTION_PER_OCTAVE per doubling
PROBES = 8  # lines along which an attention grid's axis is refined
REFINE_RTOL = 2e-3  # refine an attention axis where a straight line between grid points misses by more
MEASURED_SYSTEMS = {"A100-80GB": "a100_sxm", "H100-SXM": "h100_sxm", "H200": "h200_sxm", "B200": "b200_sxm", "L40S": "l40s"}
"""aiconfigurator's system for each catalog GPU it measured (SXM parts; its PCIe A100/H100 are other systems)."""
DEFAULT_MEASURED_BACKEND = "vllm"
TABLE_FORMAT = 1  # bump when the grid or the decomposition changes: old cache files are then ignored

DEFAULT_MAX_TOKENS = 131072
DEFAULT_MAX_BATCH = 1024
MIN_MAX_TOKENS = 2 * ATTENTION_DENSE
MIN_MAX_BATCH = 2
QUANT_FIELDS = {"gemm_quant": "gemm_quant_mode", "moe_quant": "moe_quant_mode",
                "kvcache_quant": "kvcache_quant_mode", "fmha_quant": "fmha_quant_mode"}
QUANT_ENUMS = {"gemm_quant": "GEMMQuantMode", "moe_quant": "MoEQuantMode",
               "kvcache_quant": "KVCacheQuantMode", "fmha_quant": "FMHAQuantMode"}
MEMORY_TOKENS = 8192  # the activation footprint is sized for a pass of this many tokens (vLLM's default budget)


# ---------------------------------------------------------------------------------------------------------------
# aiconfigurator, imported lazily
# ---------------------------------------------------------------------------------------------------------------


@functools.cache
def aiconfigurator_version() -> str:
    """The installed aiconfigurator-core version; :class:`InputError` on ``hardware.performance.source`` when it is
    missing or older than 0.12.0."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(DISTRIBUTION)
    except PackageNotFoundError:
        raise InputError(f"{FIELD}.source", "measured",
                         f"needs {DISTRIBUTION}, which is not installed: pip install 'optfleet[measured]'") from None
    release = re.match(r"(\d+)\.(\d+)", found)
    if release is None or tuple(int(part) for part in release.groups()) < LOWEST_VERSION:
        raise InputError(f"{FIELD}.source", "measured",
                         f"needs {DISTRIBUTION} >= 0.12.0, found {found}: pip install 'optfleet[measured]'")
    return found


def _sdk(module: str) -> ModuleType:
    """``aiconfigurator_core.sdk.<module>``, after checking the distribution is installed."""
    aiconfigurator_version()
    return import_module(f"aiconfigurator_core.sdk.{module}")


@contextmanager
def _quiet_aiconfigurator() -> Iterator[None]:
    """Hold aiconfigurator's log below ERROR while it loads (it warns about data files of other models)."""
    logger = logging.getLogger("aiconfigurator_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# ---------------------------------------------------------------------------------------------------------------
# What the database knows
# ---------------------------------------------------------------------------------------------------------------


def measured_catalog() -> dict[str, Any]:
    """What the installed aiconfigurator-core can measure: ``{"source": "aiconfigurator-core 0.12.0",
    "systems": {system: {backend: {version: [slot names]}}}, "models": [bundled model ids]}``.

    Versions are the queryable ones (aiconfigurator's ``current`` / ``previous`` / ``next`` slots, which
    ``version`` may also name); any other model is given as a local directory holding its ``config.json``.
    """
    with _quiet_aiconfigurator():
        systems = {system: {backend: _versions(system, backend, versions)
                            for backend, versions in sorted(backends.items())}
                   for system, backends in sorted(_supported_databases().items())}
    return {"source": f"{DISTRIBUTION} {aiconfigurator_version()}", "systems": systems, "models": bundled_models()}


@functools.cache
def _supported_databases() -> dict[str, dict[str, list[str]]]:
    """aiconfigurator's ``{system: {backend: [versions]}}`` of the databases it ships (read once: a directory walk
    of ~1 s)."""
    return {system: dict(backends) for system, backends in _sdk("perf_database").get_supported_databases().items()}


def _versions(system: str, backend: str, versions: list[str]) -> dict[str, list[str]]:
    """``{version: [slot names]}`` of one system and backend's ``versions``."""
    slots = _sdk("perf_database").get_version_slots(system, backend) or {}
    return {v: sorted(name for name, slot in slots.items() if slot == v) for v in versions}


def bundled_models() -> list[str]:
    """The HuggingFace model ids whose configs aiconfigurator-core ships (usable offline)."""
    return sorted(_sdk("common").DefaultHFModels)


# ---------------------------------------------------------------------------------------------------------------
# The configuration, checked against the database
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredConfig:
    """One serving configuration as aiconfigurator names it; ``version`` is the literal database version and the
    ``*_quant`` fields are aiconfigurator quant-mode names (``None``: inferred from the checkpoint, as it does)."""

    system: str
    backend: str
    version: str
    model: str
    tp: int
    ep: int = 1
    gemm_quant: str | None = None
    moe_quant: str | None = None
    kvcache_quant: str | None = None
    fmha_quant: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_batch: int = DEFAULT_MAX_BATCH

    def label(self, aic_version: str) -> str:
        """``measured: aiconfigurator-core 0.12.0, h100_sxm, vllm 0.24.0, TP 8, <model>`` (and EP, quant modes)."""
        parallel = f"TP {self.tp}" + (f" EP {self.ep}" if self.ep > 1 else "")
        quant = "".join(f", {name} {getattr(self, name)}" for name in QUANT_FIELDS if getattr(self, name))
        return (f"measured: {DISTRIBUTION} {aic_version}, {self.system}, {self.backend} {self.version}, "
                f"{parallel}, {self.model}{quant}")


def resolve_config(system: str, backend: str, version: str | None, model: str, tp: int, *, ep: int = 1,
                   quant: Mapping[str, str | None] | None = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                   max_batch: int = DEFAULT_MAX_BATCH) -> MeasuredConfig:
    """The checked :class:`MeasuredConfig`; :class:`InputError` on ``hardware.performance.<field>`` naming what
    the database has instead."""
    with _quiet_aiconfigurator():
        versions = _check_system_backend(system, backend)
        literal = _check_version(system, backend, version, versions)
        _check_model(model)
    for name, value in (("tp", tp), ("ep", ep), ("max_tokens", max_tokens), ("max_batch", max_batch)):
        check_positive_int(f"{FIELD}.{name}", value)
    for name, value, least in (("max_tokens", max_tokens, MIN_MAX_TOKENS), ("max_batch", max_batch, MIN_MAX_BATCH)):
        if value < least:
            raise InputError(f"{FIELD}.{name}", value, f"must be at least {least} (the tables' smallest grid)")
    _check_expert_parallel(system, model, tp, ep)
    quant_modes = _check_quant(dict(quant or {}))
    return MeasuredConfig(system, backend, literal, _model_id(model), tp, ep, **quant_modes,
                          max_tokens=max_tokens, max_batch=max_batch)


def _check_system_backend(system: str, backend: str) -> list[str]:
    """The versions of ``backend`` on ``system``; InputError on the system or the backend the database lacks."""
    databases = _supported_databases()
    if system not in databases:
        raise InputError(f"{FIELD}.system", system,
                         f"{_aic()} has no measurements of it; it has: {', '.join(sorted(databases))}")
    if backend not in databases[system]:
        raise InputError(f"{FIELD}.backend", backend,
                         f"{_aic()} has no {system} measurements under it; it has: "
                         f"{', '.join(sorted(databases[system]))}")
    return list(databases[system][backend])


def _check_version(system: str, backend: str, version: str | None, versions: list[str]) -> str:
    """The literal version ``version`` names (a version, or a slot ``current`` / ``previous`` / ``next``;
    ``None`` is ``current``)."""
    slots = _sdk("perf_database").get_version_slots(system, backend) or {}
    requested = "current" if version is None else version
    literal = slots.get(requested, requested) if isinstance(requested, str) else requested
    if literal not in versions:
        named = ", ".join(v + "".join(f" ({s})" for s, sv in sorted(slots.items()) if sv == v) for v in versions)
        raise InputError(f"{FIELD}.version", version,
                         f"{_aic()} has no {backend} measurements of it on {system}; it has: {named}")
    return literal


def _check_model(model: str) -> None:
    """InputError unless ``model`` is a bundled HuggingFace id or a directory holding a ``config.json``."""
    if isinstance(model, str) and (model in _sdk("common").DefaultHFModels or (Path(model) / "config.json").is_file()):
        return
    raise InputError(f"{FIELD}.model", model,
                     f"{_aic()} has no config of it (give a local directory holding its config.json, or one of: "
                     f"{', '.join(bundled_models())})")


def _model_id(model: str) -> str:
    """A bundled id as given; a local directory as its absolute path."""
    return model if model in _sdk("common").DefaultHFModels else str(Path(model).resolve())


def _check_expert_parallel(system: str, model: str, tp: int, ep: int) -> None:
    """EP only for MoE models, dividing TP (the experts' TP is ``tp / ep``), within one node: across nodes
    aiconfigurator's CLI picks a MoE all-to-all backend that aiconfigurator-core alone does not."""
    if ep > 1 and not _is_moe(_model_id(model)):
        raise InputError(f"{FIELD}.ep", ep, f"{model} is not a mixture of experts: expert parallelism must be 1")
    if tp % ep:
        raise InputError(f"{FIELD}.ep", ep, f"must divide tp = {tp} (the experts are sharded tp / ep ways)")
    gpus_per_node = int(_sdk("perf_database").load_system_spec(system).get("node", {}).get("num_gpus_per_node", 0))
    if gpus_per_node and ep > gpus_per_node:
        raise InputError(f"{FIELD}.ep", ep, f"spans more than one {system} node ({gpus_per_node} GPUs): "
                                            "not modelled by aiconfigurator-core alone")


def _is_moe(model: str) -> bool:
    """Whether aiconfigurator reads ``model``'s config as a mixture of experts; InputError when it cannot read it."""
    try:
        return bool(_sdk("models").check_is_moe(model))
    except Exception as error:  # a local config.json aiconfigurator cannot parse
        raise InputError(f"{FIELD}.model", model, f"{DISTRIBUTION} cannot read its config: {error}") from error


def _check_quant(quant: dict[str, str | None]) -> dict[str, str | None]:
    """The quant modes by field name, each ``None`` or one of aiconfigurator's names for it."""
    unknown = sorted(set(quant) - set(QUANT_FIELDS))
    if unknown:
        raise InputError(f"{FIELD}.{unknown[0]}", quant[unknown[0]],
                         f"unknown quantisation field; known: {', '.join(QUANT_FIELDS)}")
    common = _sdk("common")
    for name, value in quant.items():
        allowed = [mode.name for mode in getattr(common, QUANT_ENUMS[name])]
        if value is not None and value not in allowed:
            raise InputError(f"{FIELD}.{name}", value, f"not an aiconfigurator mode; it has: {', '.join(allowed)}")
    return {name: quant.get(name) for name in QUANT_FIELDS}


def _aic() -> str:
    """``aiconfigurator-core <version>``, for messages."""
    return f"{DISTRIBUTION} {aiconfigurator_version()}"


# ---------------------------------------------------------------------------------------------------------------
# Querying aiconfigurator
# ---------------------------------------------------------------------------------------------------------------


@contextmanager
def _refusal_as_input_error(config: MeasuredConfig) -> Iterator[None]:
    """Turn an exception aiconfigurator raises on ``config`` (ValueError, AssertionError or its own types) into an
    :class:`InputError` on ``hardware.performance`` quoting it."""
    try:
        with _quiet_aiconfigurator():
            yield
    except Exception as error:
        raise InputError(FIELD, config.label(aiconfigurator_version()),
                         f"{DISTRIBUTION} cannot model it: {type(error).__name__}: {error}") from error


def compile_arguments(config: MeasuredConfig) -> dict[str, Any]:
    """``compile_engine``'s MoE parallelism and quant modes: the ones given, then the ones aiconfigurator's CLI
    resolves before a static estimate (``resolve_context_fmha_by_data``: the FMHA precision the data has;
    ``resolve_nvfp4_for_system``: FP4 weights emulated before Blackwell; ``resolve_dsv4_moe_arch``)."""
    models = _sdk("models")
    moe = {"moe_tp_size": config.tp // config.ep, "moe_ep_size": config.ep} if _is_moe(config.model) else {}
    with _refusal_as_input_error(config):
        model_config = _sdk("config_builders").build_model_config(
            tp_size=config.tp, pp_size=1, attention_dp_size=1, moe_tp_size=moe.get("moe_tp_size", 1),
            moe_ep_size=config.ep, **{QUANT_FIELDS[name]: getattr(config, name) for name in QUANT_FIELDS})
        database = _sdk("perf_database").get_database(config.system, config.backend, config.version)
        models.resolve_context_fmha_by_data(model_config, config.model, database, config.backend,
                                            is_context_role=True)
        models.resolve_dsv4_moe_arch(model_config, config.model, system_name=config.system,
                                     backend_name=config.backend)
        models.resolve_nvfp4_for_system(model_config, config.system, config.model, backend_name=config.backend)
    quant = {mode: getattr(model_config, mode).name for mode in QUANT_FIELDS.values()
             if getattr(model_config, mode) is not None}
    return {**moe, **quant}


def compile_handle(config: MeasuredConfig, arguments: Mapping[str, Any]) -> Any:
    """aiconfigurator's compiled ``EngineHandle`` of ``config`` (``compile_engine`` with :func:`compile_arguments`,
    the model as its CLI's static estimate sets it up)."""
    engine = _sdk("engine")
    with _refusal_as_input_error(config):
        spec = engine.compile_engine(config.model, config.system, config.backend, config.version,
                                     tp_size=config.tp, **arguments)
        return engine.EngineHandle(spec)


def measure(config: MeasuredConfig) -> tuple[MeasuredTables, MeasuredMemory | None]:
    """``config`` compiled in aiconfigurator, queried into its tables, and its memory facts."""
    arguments = compile_arguments(config)
    handle = compile_handle(config, arguments)
    with _refusal_as_input_error(config):
        tables = measure_tables(handle, config.max_tokens, config.max_batch)
    return tables, measure_memory(config, arguments)


def _prefill_pass(handle: Any, tokens: int) -> tuple[float, float]:
    """``(N_pre, A_pre(tokens, 0))``: one prompt of ``tokens`` prefilled alone, split as aiconfigurator does."""
    _, non_attention, attention, _ = handle.mixed_step_breakdown(tokens, 0, tokens, 2, 0)
    return non_attention, attention


def _chunk_attention(handle: Any, tokens: int, offset: int) -> float:
    """``A_pre(tokens, offset)``: the context attention of ``tokens`` new tokens after ``offset`` cached ones."""
    prompt = tokens + offset
    return handle.mixed_step_breakdown(prompt, 0, prompt, 2, offset)[2]


def _decode_attention(handle: Any, seqs: int, context: int) -> float:
    """``A_dec(seqs, context)``: aiconfigurator's decode attention at ``s = isl + osl // 2 + 1 = context``."""
    return handle.mixed_step_breakdown(1, seqs, context - 1, 1, 0)[3]


def _decode_pass(handle: Any, seqs: int) -> float:
    """``N_dec(seqs)``: a decode step of ``seqs`` sequences less its attention (both at context 3)."""
    return handle.decode_step_latency(seqs, 1, 2) - handle.mixed_step_breakdown(1, seqs, 1, 2, 0)[3]


# ---------------------------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------------------------


def token_axis(first: int, last: int, dense_to: int, per_octave: int) -> NDArray[np.float64]:
    """Every integer from ``first`` to ``min(dense_to, last)``, then ``per_octave`` rounded points per doubling up
    to ``last`` (included)."""
    dense = np.arange(first, min(dense_to, last) + 1, dtype=np.float64)
    octaves = math.log2(last / dense_to) if last > dense_to else 0.0
    sparse = np.round(dense_to * np.exp2(np.arange(1, math.ceil(octaves * per_octave) + 1) / per_octave))
    return np.unique(np.concatenate([dense, np.minimum(sparse, last), [float(last)]]))


@dataclass(frozen=True)
class MeasuredTables:
    """The four parts of an iteration (module docstring) on their grids, in ms.

    ``prefill_pass_ms[i] = N_pre(pass_tokens[i])``, ``prefill_attention_ms[i] = A_pre(pass_tokens[i], 0)``,
    ``offset_attention_ms[i, j] = A_pre(chunk_tokens[i], offsets[j]) - A_pre(chunk_tokens[i], 0)``,
    ``decode_pass_ms[i] = N_dec(decode_seqs[i])``, ``decode_attention_ms[i, j] = A_dec(attention_seqs[i],
    contexts[j])``.
    """

    pass_tokens: NDArray[np.float64]
    prefill_pass_ms: NDArray[np.float64]
    prefill_attention_ms: NDArray[np.float64]
    chunk_tokens: NDArray[np.float64]
    offsets: NDArray[np.float64]
    offset_attention_ms: NDArray[np.float64]
    decode_seqs: NDArray[np.float64]
    decode_pass_ms: NDArray[np.float64]
    attention_seqs: NDArray[np.float64]
    contexts: NDArray[np.float64]
    decode_attention_ms: NDArray[np.float64]

    def is_consistent(self) -> bool:
        """Every axis strictly increasing with two points or more, every table shaped by its axes, every value
        finite (what a file read back must satisfy)."""
        axes = (self.pass_tokens, self.chunk_tokens, self.offsets, self.decode_seqs, self.attention_seqs,
                self.contexts)
        shapes = ((self.prefill_pass_ms, (len(self.pass_tokens),)),
                  (self.prefill_attention_ms, (len(self.pass_tokens),)),
                  (self.offset_attention_ms, (len(self.chunk_tokens), len(self.offsets))),
                  (self.decode_pass_ms, (len(self.decode_seqs),)),
                  (self.decode_attention_ms, (len(self.attention_seqs), len(self.contexts))))
        return (all(a.ndim == 1 and len(a) >= 2 and bool(np.all(np.diff(a) > 0)) for a in axes)
                and all(table.shape == shape and bool(np.all(np.isfinite(table))) for table, shape in shapes))


def measure_tables(handle: Any, max_tokens: int, max_batch: int) -> MeasuredTables:
    """Query ``handle`` on every grid point (module docstring); the attention grids are refined first
    (:func:`refine_axes`)."""
    pass_tokens = token_axis(1, max_tokens, DENSE_TOKENS, TOKENS_PER_OCTAVE)
    decode_seqs = np.arange(1, max_batch + 1, dtype=np.float64)
    prefill = np.array([_prefill_pass(handle, int(x)) for x in pass_tokens])
    decode_pass = np.array([_decode_pass(handle, int(b)) for b in decode_seqs])

    def chunk_attention(p: int, o: int) -> float:
        return _chunk_attention(handle, p, o)

    def decode_attention(b: int, s: int) -> float:
        return _decode_attention(handle, b, s)

    chunk_tokens, offsets = refine_axes(chunk_attention, _attention_axis(1, max_tokens),
                                        np.concatenate([[0.0], _attention_axis(1, max_tokens)]))
    attention_seqs, contexts = refine_axes(decode_attention, _attention_axis(1, max_batch),
                                           _attention_axis(2, max_tokens))
    at_zero = np.array([chunk_attention(int(p), 0) for p in chunk_tokens])
    offset_attention = _table(chunk_attention, chunk_tokens, offsets) - at_zero[:, None]
    return MeasuredTables(pass_tokens, prefill[:, 0], prefill[:, 1], chunk_tokens, offsets, offset_attention,
                          decode_seqs, decode_pass, attention_seqs, contexts,
                          _table(decode_attention, attention_seqs, contexts))


def _attention_axis(first: int, last: int) -> NDArray[np.float64]:
    """The starting axis of an attention grid: every integer to :data:`ATTENTION_DENSE`, then
    :data:`ATTENTION_PER_OCTAVE` points per doubling."""
    return token_axis(first, last, ATTENTION_DENSE, ATTENTION_PER_OCTAVE)


def _table(query: Callable[[int, int], float], rows: NDArray[np.float64],
           columns: NDArray[np.float64]) -> NDArray[np.float64]:
    """``query(row, column)`` on every grid point."""
    return np.array([[query(int(r), int(c)) for c in columns] for r in rows])


def refine_axes(query: Callable[[int, int], float], rows: NDArray[np.float64],
                columns: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Both axes of a 2-D grid of ``query`` refined by :func:`refine_axis`, each probed along
    :data:`PROBES` lines of the other axis (log-spaced over it)."""
    row_lines, column_lines = _probe_lines(columns), _probe_lines(rows)
    refined_rows = refine_axis(lambda r: np.array([query(r, c) for c in row_lines]), rows)
    refined_columns = refine_axis(lambda c: np.array([query(r, c) for r in column_lines]), columns)
    return refined_rows, refined_columns


def _probe_lines(axis: NDArray[np.float64]) -> list[int]:
    """:data:`PROBES` integers log-spaced over ``axis`` (its positive part), the first left out."""
    positive = axis[axis > 0]
    return sorted({int(round(v)) for v in np.geomspace(positive[0], positive[-1], PROBES + 1)[1:]})


def refine_axis(probe: Callable[[int], NDArray[np.float64]], axis: NDArray[np.float64],
                rtol: float = REFINE_RTOL) -> NDArray[np.float64]:
    """``axis`` with the integer midpoint of a cell added, recursively, wherever ``probe`` there is further than
    ``rtol`` (relative) from the straight line between the cell's ends: the database's jumps (a kernel or a tile
    that starts at a batch size) end up between adjacent integers instead of inside a cell."""
    known = {float(x): probe(int(x)) for x in axis}
    cells = list(zip(axis[:-1].tolist(), axis[1:].tolist()))
    while cells:
        low, high = cells.pop()
        if high - low < 2:
            continue
        middle = float((low + high) // 2)
        value = probe(int(middle))
        line = known[low] + (known[high] - known[low]) * (middle - low) / (high - low)
        if np.any(np.abs(value - line) > rtol * np.abs(value)):
            known[middle] = value
            cells += [(low, middle), (middle, high)]
    return np.array(sorted(known))


# ---------------------------------------------------------------------------------------------------------------
# The on-disk cache
# ---------------------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The ``measured`` folder of optfleet's cache (:func:`optfleet.cache.cache_root`)."""
    return cache_root() / "measured"


def cache_key(config: MeasuredConfig, aic_version: str) -> str:
    """A hash of everything the tables depend on: the configuration, a local model's config.json, the grid and
    the aiconfigurator-core version."""
    model_file = Path(config.model) / "config.json"
    identity = {**asdict(config), "aiconfigurator_core": aic_version, "format": TABLE_FORMAT,
                "grid": [DENSE_TOKENS, TOKENS_PER_OCTAVE, ATTENTION_DENSE, ATTENTION_PER_OCTAVE, PROBES, REFINE_RTOL],
                "model_config": hashlib.sha256(model_file.read_bytes()).hexdigest() if model_file.is_file() else None}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def read_cached(path: Path, key: str) -> tuple[MeasuredTables, MeasuredMemory | None] | None:
    """The tables and memory stored at ``path`` under ``key``; ``None`` when the file is missing, unreadable,
    from another key, or incomplete."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:
                return None
            tables = MeasuredTables(**{f.name: np.asarray(data[f.name], dtype=np.float64)
                                       for f in fields(MeasuredTables)})
            memory = MeasuredMemory.from_array(data["memory"])
    except Exception:  # a truncated, corrupt or foreign file is rebuilt, never trusted
        return None
    return (tables, memory) if tables.is_consistent() else None


def write_cached(path: Path, key: str, tables: MeasuredTables, memory: MeasuredMemory | None) -> None:
    """Store the tables atomically (a temporary file renamed over ``path``); an unwritable cache is skipped."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".", suffix=".npz", delete=False) as out:
            temporary = Path(out.name)
            np.savez(out, key=np.array(key), memory=MeasuredMemory.to_array(memory),
                     **{f.name: getattr(tables, f.name) for f in fields(MeasuredTables)})
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            temporary.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------------------------
# Memory facts (per GPU), as aiconfigurator's estimate_kv_cache reports them
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredMemory:
    """Per-GPU memory of the configuration by aiconfigurator's ``estimate_kv_cache`` (bytes): the GPU's capacity,
    the weights' share, one token's KV cache, the activations of a pass of :data:`MEMORY_TOKENS` tokens and the
    framework's runtime and communication overheads."""

    gpu_bytes: float
    weights_bytes: float
    kv_bytes_per_token: float
    activations_bytes: float
    overhead_bytes: float

    @staticmethod
    def to_array(memory: MeasuredMemory | None) -> NDArray[np.float64]:
        """The fields in order, or NaNs for no memory facts."""
        if memory is None:
            return np.full(len(fields(MeasuredMemory)), np.nan)
        return np.array([getattr(memory, f.name) for f in fields(MeasuredMemory)], dtype=np.float64)

    @staticmethod
    def from_array(values: NDArray[np.float64]) -> MeasuredMemory | None:
        """The inverse of :meth:`to_array`."""
        values = np.asarray(values, dtype=np.float64)
        return None if np.isnan(values).any() else MeasuredMemory(*(float(v) for v in values))


def measure_memory(config: MeasuredConfig, arguments: Mapping[str, Any]) -> MeasuredMemory | None:
    """aiconfigurator's memory facts of ``config`` (``arguments``: :func:`compile_arguments`), or
    ``None`` when it cannot estimate them (they are optional)."""
    kind = "of_free" if config.backend == "trtllm" else "of_total"
    try:
        with _quiet_aiconfigurator():
            report = _sdk("memory").estimate_kv_cache(
                config.model, config.system, config.backend, config.version, max_num_tokens=MEMORY_TOKENS,
                max_batch_size=config.max_batch, memory_fraction_kind=kind, memory_fraction_value=0.9,
                tp_size=config.tp, **arguments)
    except Exception:  # the memory facts are a by-product: their absence must not cost the engine
        return None
    parts = report["memory_breakdown"]
    return MeasuredMemory(float(report["total_gpu_capacity_bytes"]), float(parts["weights_bytes"]),
                          float(report["kv_size_per_token_bytes"]), float(parts["activations_bytes"]),
                          float(parts["runtime_overhead_bytes"] + parts["comm_overhead_bytes"]))


# ---------------------------------------------------------------------------------------------------------------
# Interpolation
# ---------------------------------------------------------------------------------------------------------------


def clamp(value: NDArray[np.float64], axis: NDArray[np.float64]) -> NDArray[np.float64]:
    """``value`` held within ``axis``'s range (``np.clip`` is several times slower on scalars)."""
    return np.minimum(np.maximum(value, axis[0]), axis[-1])


def _cell(axis: NDArray[np.float64], value: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The grid cell ``i`` holding ``value`` (within the axis) and its position ``t`` in ``[0, 1]``."""
    i = np.minimum(np.searchsorted(axis, value, side="right") - 1, len(axis) - 2)
    return i, (value - axis[i]) / (axis[i + 1] - axis[i])


def bilinear(rows: NDArray[np.float64], columns: NDArray[np.float64], table: NDArray[np.float64],
             row: NDArray[np.float64], column: NDArray[np.float64]) -> NDArray[np.float64]:
    """``table`` interpolated bilinearly at ``(row, column)``, both within the grid."""
    i, s = _cell(rows, row)
    j, t = _cell(columns, column)
    return ((1 - s) * ((1 - t) * table[i, j] + t * table[i, j + 1])
            + s * ((1 - t) * table[i + 1, j] + t * table[i + 1, j + 1]))


def per_token(axis: NDArray[np.float64], values: NDArray[np.float64],
              tokens: NDArray[np.float64]) -> NDArray[np.float64]:
    """``values`` interpolated at ``tokens``: held below the axis, in proportion to the tokens above it."""
    return np.interp(tokens, axis, values) * np.maximum(1.0, tokens / axis[-1])


# ---------------------------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MeasuredEngine(EngineModel):
    """The iteration time of one configuration from aiconfigurator's measured database (module docstring).

    Build it with :meth:`build`; :meth:`step_ms` then only interpolates numpy tables.
    """

    config: MeasuredConfig
    tables: MeasuredTables
    aiconfigurator_version: str
    memory: MeasuredMemory | None = None

    @classmethod
    def build(cls, system: str, backend: str, version: str | None, model: str, tp: int = 1, *, ep: int = 1,
              gemm_quant: str | None = None, moe_quant: str | None = None, kvcache_quant: str | None = None,
              fmha_quant: str | None = None, max_tokens: int = DEFAULT_MAX_TOKENS,
              max_batch: int = DEFAULT_MAX_BATCH, cache: bool = True) -> MeasuredEngine:
        """The engine of ``model`` on ``tp`` GPUs of ``system`` under ``backend`` at ``version`` (``None``:
        aiconfigurator's ``current``), its tables read from the cache or measured (5-15 s at the default limits) and
        cached (unless ``cache`` is false).

        ``ep`` is the expert parallelism of a MoE model (its experts sharded ``tp / ep`` ways each); the
        ``*_quant`` arguments are aiconfigurator's quant modes of the GEMM weights, the MoE experts, the KV cache
        and the attention (``None``: inferred from the checkpoint).  The tables reach ``max_tokens`` tokens (a
        chunk, its offset, a decode context) and ``max_batch`` decoding sequences; beyond, they are extrapolated.
        """
        aic_version = aiconfigurator_version()
        config = resolve_config(system, backend, version, model, tp, ep=ep, max_tokens=max_tokens,
                                max_batch=max_batch, quant={"gemm_quant": gemm_quant, "moe_quant": moe_quant,
                                                            "kvcache_quant": kvcache_quant, "fmha_quant": fmha_quant})
        key = cache_key(config, aic_version)
        path = cache_dir() / f"{key}.npz"
        cached = read_cached(path, key) if cache else None
        if cached is None:
            cached = measure(config)
            if cache:
                write_cached(path, key, *cached)
        return cls(config, cached[0], aic_version, cached[1])

    @property
    def source(self) -> str:
        return self.config.label(self.aiconfigurator_version)

    def step_ms(self, prefill_tokens: ArrayLike, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike,
                prefill_offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        p, b, k, o = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in
                                           (prefill_tokens, decode_seqs, decode_kv_tokens, prefill_offset_tokens)))
        t = self.tables
        non_attention = np.where(p > 0, per_token(t.pass_tokens, t.prefill_pass_ms, p + b),
                                 per_token(t.decode_seqs, t.decode_pass_ms, b))
        return non_attention + self.prefill_attention_ms(p, o) + self.decode_attention_ms(b, k)

    def prefill_attention_ms(self, prefill_tokens: ArrayLike, offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        """``A_pre(p, o)``: the chunk's context attention; beyond the grid in proportion to ``pairs(p, o)``."""
        t = self.tables
        p = np.asarray(prefill_tokens, dtype=np.float64)
        o = np.asarray(offset_tokens, dtype=np.float64)
        p_grid = clamp(p, t.chunk_tokens)
        o_grid = clamp(o, t.offsets)
        on_grid = (np.interp(p_grid, t.pass_tokens, t.prefill_attention_ms)
                   + bilinear(t.chunk_tokens, t.offsets, t.offset_attention_ms, p_grid, o_grid))
        return np.where(p > 0, on_grid * prefill_pairs(p, o) / prefill_pairs(p_grid, o_grid), 0.0)

    def decode_attention_ms(self, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike) -> NDArray[np.float64]:
        """``A_dec(b, k / b)``: the decodes' attention at their mean context; beyond the grid in proportion to
        ``k``."""
        t = self.tables
        b = np.asarray(decode_seqs, dtype=np.float64)
        k = np.asarray(decode_kv_tokens, dtype=np.float64)
        s = np.divide(k, b, out=np.zeros(np.broadcast(k, b).shape), where=b > 0)
        b_grid = clamp(b, t.attention_seqs)
        s_grid = clamp(s, t.contexts)
        on_grid = bilinear(t.attention_seqs, t.contexts, t.decode_attention_ms, b_grid, s_grid)
        return np.where((b > 0) & (k > 0), on_grid * k / (b_grid * s_grid), 0.0)
