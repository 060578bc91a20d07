"""A placement server's timing and KV capacity from the engine model: a GPU, a model and a performance source.

A server given ``hardware: {gpu, model (or config_json), tp, performance}`` instead of ``timing`` takes its
iteration time from the same engine model as the fleet kinds (optfleet/engine/: ``roofline``, ``measured``,
``fit`` or ``affine``), reduced to the affine form over the server's operating region
(:func:`~optfleet.engine.reduce.affine_reduction`: up to ``min(max_running_seqs, KV tokens / mean request tokens)``
decoding sequences, as many as the KV memory holds at the workload's mean request length; contexts and chunk offsets
up to the workload's longest request; chunks up to ``prefill_budget_tokens``), and maps it to the simulator's terms
(schema.TimingSpec):

    step_base_ms = base_ms,  step_ms_per_seq = per_seq_ms,  prefill_ms_per_token = per_prefill_token_ms,
    prefill_ms_per_pair = per_prefill_pair_ms,  step_ms_per_kv_block = per_kv_token_ms x block_tokens.

The one approximation beyond the reduction's (its ``max_error``, stated in the output): the engine's KV term reads
the decoding sequences' contexts, the simulator's counts the blocks held on the server, which also holds the
prefilling requests' blocks and every running request's reserved output (server.py reserves prompt and output at
admission).  So the KV term is charged on more tokens than attention reads, by up to the reserved outputs: the
simulated iterations are at least the engine's, never shorter.

``kv_capacity_blocks`` left out is the KV memory of ``tp`` x ``gpu`` holding the model's weights
(:func:`~optfleet.hardware.memory.memory_fit`, vLLM's accounting) in whole blocks; a model whose weights do not fit,
or whose KV memory holds not even the longest request, is an error naming the shortfall.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.reduce import affine_reduction
from optfleet.engine.step import AffineStep
from optfleet.errors import InputError
from optfleet.hardware.catalog import get_gpu
from optfleet.hardware.memory import memory_fit
from optfleet.problems.fleet.performance import engine_of, model_of
from optfleet.problems.fleet.schema import ModelOnGpusSpec


@dataclass(frozen=True)
class ServerTiming:
    """The simulator's numbers of one server type: its timing terms, its KV capacity in blocks, and where they came
    from (``source``: the engine's, with the reduction's largest relative error over the region)."""

    prefill_ms_per_token: float
    step_base_ms: float
    step_ms_per_seq: float
    step_ms_per_kv_block: float
    prefill_ms_per_pair: float
    kv_capacity_blocks: int
    source: str


def server_timing(hardware: ModelOnGpusSpec, resolve: Callable[[str], Path], *, max_running_seqs: int, prefill_budget_tokens: int,
                  kv_capacity_blocks: int | None, request_tokens: NDArray[np.int64], block_tokens: int, field: str) -> ServerTiming:
    """The :class:`ServerTiming` of a server described by ``hardware`` for the workload's requests of
    ``request_tokens`` (prompt and output) each (module docstring); ``field`` is the block's path
    (``servers.0.hardware``) for messages."""
    get_gpu(hardware.gpu, field=f"{field}.gpu")
    model = model_of(hardware, resolve, field=field)
    longest = int(request_tokens.max())
    fit = memory_fit(hardware.gpu, model, hardware.tp, longest).require(f"{field}.tp")
    capacity = kv_capacity_blocks if kv_capacity_blocks is not None else fit.kv_tokens // block_tokens
    engine = engine_of(hardware, model, resolve, field=f"{field}.performance")
    seqs = max(1, min(max_running_seqs, int(capacity * block_tokens // max(1.0, float(request_tokens.mean())))))
    step = affine_reduction(engine, seqs, longest, min(prefill_budget_tokens, longest))
    _check_prefill_cost(step, f"{field}.performance")
    reduced = "" if step.max_error == 0 else (f"; reduced to the affine form over {seqs} sequences, {longest:,} tokens: "
                                              f"max error {100 * step.max_error:.1f} %")
    return ServerTiming(step.per_prefill_token_ms, step.base_ms, step.per_seq_ms, step.per_kv_token_ms * block_tokens, step.per_prefill_pair_ms,
                        capacity, f"{engine.source}{reduced}")


def _check_prefill_cost(step: AffineStep, field: str) -> None:
    """The exact views divide by the per-token prefill time (bounds.py's pooled machine): an engine whose reduction
    charges no per-token prefill cost (all of it in the pair term) cannot be bounded that way."""
    if step.per_prefill_token_ms <= 0:
        raise InputError(field, step.source, "its affine reduction charges no time per prefill token (per_prefill_token_ms 0); "
                                             "the placement bounds need one: give it (source affine) or measure prefill at several lengths")
