"""A placement server's timing and KV capacity from the engine model: a GPU, a model and a performance source.

A server given ``hardware: {gpu, model (or config_json), tp, performance}`` instead of ``timing`` takes its
iteration time from the same engine model as the fleet kinds (optfleet/engine/: ``roofline``, ``measured``,
``fit`` or ``affine``), reduced to the affine form over the server's operating region
(:func:`~optfleet.engine.reduce.affine_reduction`): ``min(max_running_seqs, KV tokens / mean request tokens)``
decoding sequences, as many as the KV memory holds at the workload's mean request length; contexts and chunk offsets
up to the workload's longest request ``L``; full chunks of ``min(prefill_budget_tokens, L / 2)`` tokens (half the
longest request at most, so that the offsets excite the pair term).  The form maps to the simulator's terms
(schema.TimingSpec):

    step_base_ms = base_ms,  step_ms_per_seq = per_seq_ms,  prefill_ms_per_token = per_prefill_token_ms,
    prefill_ms_per_pair = per_prefill_pair_ms,  step_ms_per_kv_block = per_kv_token_ms x block_tokens.

How far the form is from the engine is stated in the output (``reduction``): its largest error on the fitted grid,
and its least and largest error at chunks of 1/64 to 1/2 of the budget
(:func:`~optfleet.engine.reduce.short_chunk_error`), which the fit leaves out and a roofline's form overstates (a
short chunk reads the weights at the memory's pace).  One more approximation: the engine's KV term reads the decoding
sequences' contexts, the simulator's counts the blocks held on the server, which also holds the prefilling requests'
blocks and every running request's reserved output (server.py reserves prompt and output at admission), so the KV
term is charged on more tokens than attention reads.

``kv_capacity_blocks`` left out is the KV memory of ``tp`` x ``gpu`` after the model's weights
(:func:`~optfleet.hardware.memory.memory_fit`, vLLM's accounting) in whole blocks; weights that do not fit, or a KV
memory that holds not even the largest request, is an error naming the shortfall.  A given capacity is refused when
its bytes exceed the GPUs' whole memory.  Derived terms beyond the limits ``timing:`` allows are refused, naming the
engine coefficient they come from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.reduce import affine_reduction, short_chunk_error
from optfleet.engine.step import AffineStep, EngineModel
from optfleet.errors import InputError
from optfleet.hardware.catalog import GpuSpec, get_gpu
from optfleet.hardware.memory import MemoryFit, memory_fit
from optfleet.hardware.profiles import structural_problem
from optfleet.problems.fleet.performance import engine_of, model_of
from optfleet.problems.fleet.schema import ModelOnGpusSpec
from optfleet.problems.placement.schema import MAX_PREFILL_MS_PER_PAIR, MAX_PREFILL_MS_PER_TOKEN, MAX_STEP_MS


@dataclass(frozen=True)
class ServerTiming:
    """The simulator's numbers of one server type: its timing terms, its KV capacity in blocks, where they came from
    (``source``: the engine's) and how far the affine form is from that engine (``reduction``; empty for an engine
    that is affine already: a fit or given coefficients)."""

    prefill_ms_per_token: float
    step_base_ms: float
    step_ms_per_seq: float
    step_ms_per_kv_block: float
    prefill_ms_per_pair: float
    kv_capacity_blocks: int
    source: str
    reduction: str


def server_timing(hardware: ModelOnGpusSpec, resolve: Callable[[str], Path], *, max_running_seqs: int, prefill_budget_tokens: int,
                  kv_capacity_blocks: int | None, request_tokens: NDArray[np.int64], block_tokens: int, field: str) -> ServerTiming:
    """The :class:`ServerTiming` of a server described by ``hardware`` for the workload's requests of
    ``request_tokens`` (prompt and output) each (module docstring); ``field`` is the block's path
    (``servers.0.hardware``) for messages."""
    with _fields_under(field):
        gpu = get_gpu(hardware.gpu, field=f"{field}.gpu")
        model = model_of(hardware, resolve, field=field)
        problem = structural_problem(gpu, model, hardware.tp)
        if problem is not None:
            raise InputError(f"{field}.tp", hardware.tp, problem)
        longest = int(request_tokens.max())
        memory = memory_fit(gpu, model, hardware.tp, 1).require(f"{field}.tp")
        capacity = _capacity_blocks(memory, kv_capacity_blocks, gpu, hardware.tp, -(-longest // block_tokens), block_tokens, field)
        engine = engine_of(hardware, model, resolve, field=f"{field}.performance")
    seqs = max(1, min(max_running_seqs, int(capacity * block_tokens // max(1.0, float(request_tokens.mean())))))
    chunk = min(prefill_budget_tokens, max(1, longest // 2))  # offsets up to half the longest request excite the pair term
    step = affine_reduction(engine, seqs, longest, chunk)
    timing = ServerTiming(step.per_prefill_token_ms, step.base_ms, step.per_seq_ms, step.per_kv_token_ms * block_tokens, step.per_prefill_pair_ms,
                          capacity, engine.source, "" if isinstance(engine, AffineStep) else _reduced(engine, step, seqs, longest, chunk))
    _check_limits(timing, f"{field}.performance")
    return timing


@contextmanager
def _fields_under(field: str) -> Iterator[None]:
    """Errors of the fleet's helpers name the fleet's ``hardware`` block: re-root them at the server's (``field``)."""
    try:
        yield
    except InputError as error:
        if error.field == "hardware" or error.field.startswith("hardware."):
            raise InputError(field + error.field[len("hardware"):], error.value, error.problem) from None
        raise


def _capacity_blocks(memory: MemoryFit, given: int | None, gpu: GpuSpec, tp: int, largest_blocks: int, block_tokens: int, field: str) -> int:
    """The KV blocks the server holds: ``given``, if its bytes fit the GPUs' whole memory; else the memory's after the
    weights, which must hold the largest request."""
    if given is not None:
        hbm_tokens = tp * gpu.hbm_gb * 1e9 / memory.kv_bytes_per_token
        if given * block_tokens > hbm_tokens:
            raise InputError(f"{field.rsplit('.', 1)[0]}.kv_capacity_blocks", given,
                             f"{given * block_tokens:,} tokens of KV cache, more than {tp} x {gpu.name}'s whole memory holds "
                             f"({hbm_tokens:,.0f} tokens at {memory.kv_bytes_per_token:,} bytes each)")
        return given
    blocks = memory.kv_tokens // block_tokens
    if blocks < largest_blocks:
        raise InputError(f"{field}.tp", tp,
                         f"{tp} x {gpu.name} hold {blocks:,} KV blocks of {block_tokens} tokens after {memory.model}'s weights, fewer than "
                         f"the largest request's {largest_blocks:,} (prompt and output): a larger tp or GPU, or kv_capacity_blocks if measured")
    return blocks


def _reduced(engine: EngineModel, step: AffineStep, seqs: int, longest: int, chunk: int) -> str:
    """How far the affine form is from the engine: its error on the fitted grid and at shorter chunks (reduce.py)."""
    low, high = short_chunk_error(engine, step, seqs, longest, chunk)
    return (f"affine over {seqs:,} sequence{'s' * (seqs != 1)} and {longest:,} tokens: within "
            f"{100 * step.max_error:.1f} % on decode steps and {chunk:,}-token chunks, {100 * low:+.0f} to {100 * high:+.0f} % on "
            f"chunks of 1/64 to 1/2 of that")


LIMITS = (("prefill_ms_per_token", "per_prefill_token_ms", MAX_PREFILL_MS_PER_TOKEN, "ms per token"),
          ("step_base_ms", "base_ms", MAX_STEP_MS, "ms"), ("step_ms_per_seq", "per_seq_ms", MAX_STEP_MS, "ms"),
          ("step_ms_per_kv_block", "per_kv_token_ms", MAX_STEP_MS, "ms"),
          ("prefill_ms_per_pair", "per_prefill_pair_ms", MAX_PREFILL_MS_PER_PAIR, "ms per pair"))
"""Each timing term, the engine coefficient it comes from, and the limit ``timing:`` puts on it (schema.py)."""


def _check_limits(timing: ServerTiming, field: str) -> None:
    """The derived terms within the limits a given ``timing`` has (schema.TimingSpec), and a per-token prefill time
    above 0: the exact views divide by it (bounds.py's pooled machine)."""
    for term, coefficient, limit, unit in LIMITS:
        value = getattr(timing, term)
        if value > limit:
            raise InputError(f"{field}.{coefficient}", value, f"gives the server's {term} {value:.4g}, above the limit of {limit:g} {unit} "
                                                              "that servers[].timing allows: no real server is that slow")
    if timing.prefill_ms_per_token <= 0:
        raise InputError(f"{field}.per_prefill_token_ms", 0.0, "the engine's affine form charges no time per prefill token; the placement "
                                                               "bounds need one: give it (source affine) or measure prefill at several lengths")
