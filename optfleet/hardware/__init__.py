"""Hardware catalog: GPU and model specs, KV-slot formulas, instance cost."""

from optfleet.hardware.catalog import (
    GPUS,
    MODELS,
    GpuSpec,
    ModelSpec,
    catalog_rows,
    get_gpu,
    get_model,
    instance_cost_per_hour,
    kv_tokens_from_memory,
    slots_from_kv_tokens,
    slots_from_memory,
)

__all__ = [
    "GPUS",
    "MODELS",
    "GpuSpec",
    "ModelSpec",
    "catalog_rows",
    "get_gpu",
    "get_model",
    "instance_cost_per_hour",
    "kv_tokens_from_memory",
    "slots_from_kv_tokens",
    "slots_from_memory",
]
