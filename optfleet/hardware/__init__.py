"""Hardware catalog (GPU and model specs, KV-slot formulas, instance cost), models from a Hugging Face config.json,
memory fit and derived GPU profiles."""

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
from optfleet.hardware.hf_config import model_from_hf_config
from optfleet.hardware.memory import MemoryFit, memory_fit
from optfleet.hardware.profiles import (
    GpuProfile,
    IterationTerms,
    ProfileAssumptions,
    ProfileOverrides,
    derive_profile,
    pool_profiles,
    profile_grid,
)

__all__ = [
    "GPUS",
    "MODELS",
    "GpuProfile",
    "GpuSpec",
    "IterationTerms",
    "MemoryFit",
    "ModelSpec",
    "ProfileAssumptions",
    "ProfileOverrides",
    "catalog_rows",
    "derive_profile",
    "get_gpu",
    "get_model",
    "instance_cost_per_hour",
    "kv_tokens_from_memory",
    "memory_fit",
    "model_from_hf_config",
    "pool_profiles",
    "profile_grid",
    "slots_from_kv_tokens",
    "slots_from_memory",
]
