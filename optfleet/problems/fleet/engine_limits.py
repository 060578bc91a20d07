"""A serving engine's batch limits, applied to every pool option: concurrent sequences and tokens per iteration.

Real engines cap the sequences running at once (vLLM ``--max-num-seqs``) and the
tokens scheduled in one iteration (``--max-num-batched-tokens``), whatever the KV
cache could hold.  For a pool option with ``s_KV`` KV slots per instance and the
instance's prefill chunk ``C``:

    slots per instance   n_max = min(s_KV, max_num_seqs)
    prefill chunk        C'    = max_num_batched_tokens when no chunk is given (the engine fills its budget),
                               else the chunk given, which must not exceed the budget (problem.py refuses it)

and everything else follows from these (pool_config.py): ``t_iter = W + H n_max``,
``S = (ceil(L_in / C') + L_out) t_iter``.  The evaluator, the sweep, the MILP and the
simulator (both modes) all read the pool option's ``PoolConfig``, so they see the
same limits.  The chunk bound leaves out the decode tokens of the other running
sequences, which vLLM also counts against the token budget (their cost is in the
iteration time ``H n_max``).

``defaults: vllm`` fills what is not given with vLLM's OpenAI-server defaults
(``EngineArgs.get_batch_defaults`` in vLLM's ``engine/arg_utils.py``, v0.9-v0.11):
GPUs with at least 70 GiB of device memory other than the A100 (H100, H200, MI300X):
``max_num_seqs`` 1,024 and ``max_num_batched_tokens`` 8,192; every other GPU (the
A100 included, whose throughput a larger budget lowers): 256 and 2,048.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from optfleet.hardware.catalog import GpuSpec

if TYPE_CHECKING:
    from optfleet.problems.fleet.schema import EngineLimitsSpec

GIB_BYTES = 2**30
VLLM_LARGE_GPU_GIB = 70
VLLM_LARGE = (1024, 8192)  # (max_num_seqs, max_num_batched_tokens): >= 70 GiB, not an A100
VLLM_OTHER = (256, 2048)


@dataclass(frozen=True)
class EngineLimits:
    """The resolved limits of one GPU configuration (None: no limit)."""

    max_num_seqs: int | None
    max_num_batched_tokens: int | None

    def slots(self, kv_slots: int) -> int:
        """``min(s_KV, max_num_seqs)``."""
        return kv_slots if self.max_num_seqs is None else min(kv_slots, self.max_num_seqs)

    def chunk_tokens(self, chunk_tokens: int) -> int:
        """``min(C, max_num_batched_tokens)``: the chunk a budget allows."""
        return chunk_tokens if self.max_num_batched_tokens is None else min(chunk_tokens, self.max_num_batched_tokens)


def vllm_defaults(gpu: GpuSpec) -> tuple[int, int]:
    """vLLM's OpenAI-server ``(max_num_seqs, max_num_batched_tokens)`` for ``gpu`` (module docstring)."""
    large = gpu.hbm_bytes >= VLLM_LARGE_GPU_GIB * GIB_BYTES and "a100" not in gpu.name.lower()
    return VLLM_LARGE if large else VLLM_OTHER


def resolve_limits(spec: EngineLimitsSpec | None, gpu: GpuSpec) -> EngineLimits:
    """The limits of a ``hardware.engine`` block (None: no block) on ``gpu``."""
    if spec is None:
        return EngineLimits(None, None)
    seqs, tokens = vllm_defaults(gpu) if spec.defaults == "vllm" else (None, None)
    return EngineLimits(spec.max_num_seqs if spec.max_num_seqs is not None else seqs,
                        spec.max_num_batched_tokens if spec.max_num_batched_tokens is not None else tokens)
