"""Does a model fit on ``tp`` GPUs, and how many sequences of a window does the KV cache hold?

The accounting is the profile's (:mod:`optfleet.hardware.profiles`:
:func:`~optfleet.hardware.profiles.kv_free_bytes` and
:func:`~optfleet.hardware.profiles.instance_kv_bytes_per_token`, vLLM's
budget), called here, not restated:

    usable per GPU   = u M - R_act - R_run
    weights per GPU  = P w / tp
    kv_tokens        = floor((tp usable - P w) / (b r))      (0 when negative)
    max_sequences    = floor(kv_tokens / C)

with ``w`` the assumptions' ``weight_bytes_per_param`` when they give one,
else the model's (a checkpoint read by
:func:`optfleet.hardware.hf_config.model_from_hf_config` knows its width),
else 2; the KV dtype likewise (:func:`~optfleet.hardware.profiles.resolved_assumptions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from optfleet.errors import InputError
from optfleet.hardware.catalog import GpuSpec, ModelSpec, check_positive_int, get_gpu, get_model
from optfleet.hardware.profiles import ProfileAssumptions, instance_kv_bytes_per_token, kv_free_bytes, resolved_assumptions

_BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class MemoryFit:
    """The memory verdict of ``tp`` x ``gpu`` serving ``model`` at ``window_tokens``.

    ``kv_bytes_per_token`` is per instance (heads replicated when ``tp >
    kv_heads`` count each copy), ``kv_tokens`` per instance;
    ``max_sequences`` is 0 whenever ``infeasible_reason`` is set (weights
    that do not fit, no full window, a TP degree that splits a KV head).
    """

    gpu: str
    model: str
    tp: int
    window_tokens: int
    weight_bytes_per_param: float
    kv_dtype_bytes: int
    weight_gb_per_gpu: float
    usable_gb_per_gpu: float
    kv_bytes_per_token: int
    kv_tokens: int
    max_sequences: int
    infeasible_reason: str | None

    @property
    def fits(self) -> bool:
        """True when the instance holds at least one sequence of the window."""
        return self.infeasible_reason is None

    def require(self, field: str = "hardware.tp") -> MemoryFit:
        """This fit, or an :class:`InputError` on ``field`` (value: ``tp``) stating the reason."""
        if self.infeasible_reason is not None:
            raise InputError(field, self.tp, self.infeasible_reason)
        return self


def _shortfall(model: ModelSpec, gpu: GpuSpec, tp: int, weights_gb: float, usable_gb: float) -> str:
    return (
        f"{model.name} needs {weights_gb:.2f} GB of weights per GPU, {usable_gb:.2f} GB usable on {tp} x {gpu.name}: "
        f"short by {weights_gb - usable_gb:.2f} GB"
    )


def memory_fit(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    tp: int,
    window_tokens: int,
    assumptions: ProfileAssumptions | None = None,
) -> MemoryFit:
    """The :class:`MemoryFit` of ``tp`` x ``gpu`` serving ``model`` at ``window_tokens`` (module docstring).

    A configuration that does not fit is returned with ``infeasible_reason``
    set (``.require()`` raises it); invalid arguments raise :class:`InputError`.
    """
    g = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu, field="gpu")
    m = model if isinstance(model, ModelSpec) else get_model(model, field="model")
    check_positive_int("tp", tp)
    check_positive_int("window_tokens", window_tokens)
    a = resolved_assumptions(m, assumptions)
    weights = m.weight_bytes(a.weight_bytes_per_param)
    free = kv_free_bytes(g, m, tp, a)
    kv_bytes = instance_kv_bytes_per_token(m, tp, a.kv_dtype_bytes)
    kv_tokens = max(0, int(free // kv_bytes))
    weights_gb, usable_gb = weights / tp / _BYTES_PER_GB, (free + weights) / tp / _BYTES_PER_GB
    reason = None
    if m.tp_problem(tp) is not None:
        reason = f"tp {tp} {m.tp_problem(tp)}"
    elif free <= 0:
        reason = _shortfall(m, g, tp, weights_gb, usable_gb)
    elif kv_tokens < window_tokens:
        reason = f"KV budget of {kv_tokens} tokens holds no full window of {window_tokens} tokens"
    return MemoryFit(
        gpu=g.name,
        model=m.name,
        tp=tp,
        window_tokens=window_tokens,
        weight_bytes_per_param=a.weight_bytes_per_param,
        kv_dtype_bytes=a.kv_dtype_bytes,
        weight_gb_per_gpu=weights_gb,
        usable_gb_per_gpu=usable_gb,
        kv_bytes_per_token=kv_bytes,
        kv_tokens=kv_tokens,
        max_sequences=0 if reason is not None else kv_tokens // window_tokens,
        infeasible_reason=reason,
    )
