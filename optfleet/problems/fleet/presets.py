"""Named presets and hardware profiles, merged *under* an instance's own values.

* ``hardware.profile: fleetopt_a100_llama3_70b`` — the FleetOpt calibration:
  A100-80GB serving Llama-3-70B, ``W = 8 ms``, ``H = 0.65 ms/slot``, chunk 512,
  ``kv_tokens_per_gpu = 1048576`` (16 slots at 65,536 tokens and
  ``floor(1048576 / B)`` at B), $2.21/GPU-hour (FleetOpt paper; the same
  constants are the A100 profile of inference-fleet-sim, vllm-project/
  semantic-router ``src/fleet-sim``).
* ``preset: fleetsim_compatible`` — switches the service model to what
  inference-fleet-sim implements, so results can be compared with it:
  length-scaled iteration ``W + H n_max L_total / 8192``, a fixed 0.2 output
  fraction, the peer's slot formula ``min(128*8192 // C, 65536 // ceil(C/16))``
  and its TTFT check (P99 wait + mean prefill at one active slot,
  ``ceil(L_in/chunk) (W + H)``, no first-decode iteration).
* ``preset: engine`` (default) — the engine model (optfleet/engine/,
  pool_config.py): iteration times from ``hardware.performance`` (first
  principles by default), prefill compute charged to the iterations that
  carry each chunk, decode steps reading each request's own context.
* ``preset: paper`` — FleetOpt, Chen et al. 2026: flat iteration
  ``W + H n_max``, TTFT = P99 wait + P99 over the pool of (prefill + one
  iteration), and **no prefill compute** (a chunk costs one decode iteration).
  The FleetOpt hardware profile fills it in when the file names no preset,
  since its W and H are that model's calibration.

Precedence: a hardware profile only fills what the file leaves out; a
preset other than ``paper`` and ``engine`` overrides the service-model fields
it names (that is what switching the model means), whatever the file or
profile say.
"""

from __future__ import annotations

import copy
from typing import Any

from optfleet.errors import InputError

HARDWARE_PROFILES: dict[str, dict[str, Any]] = {
    "fleetopt_a100_llama3_70b": {
        "gpu": "A100-80GB",
        "model": "Llama-3-70B",
        "tp": 1,
        "iteration": {"w_ms": 8.0, "h_ms_per_slot": 0.65, "chunk_tokens": 512, "scaling": "flat"},
        "slots": {"kv_tokens_per_gpu": 1048576},
        "cost_per_gpu_hour": 2.21,
        "preset": "paper",
    },
}

DEFAULT_PRESET = "engine"

PRESETS: dict[str, dict[str, Any]] = {
    "engine": {},
    "paper": {},
    "fleetsim_compatible": {
        "workload": {"split": {"rule": "fixed_output_fraction", "output_fraction": 0.2}},
        "hardware": {"iteration": {"scaling": "length_scaled", "length_scale_tokens": 8192}, "slots": {"formula": "fleetsim"}},
        "slo": {"ttft_rule": "fleetsim"},
    },
}

# Blocks that are a choice of one alternative: a preset replaces them whole.
_ALTERNATIVE_BLOCKS = {("hardware", "slots"), ("workload", "split")}


def apply_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """Return ``data`` with its hardware profile merged under it and its preset over it."""
    merged = copy.deepcopy(data)
    hardware = merged.get("hardware")
    if isinstance(hardware, dict) and hardware.get("profile") is not None:
        name = hardware["profile"]
        if not isinstance(name, str) or name not in HARDWARE_PROFILES:
            raise InputError("hardware.profile", name, f"unknown hardware profile; known: {', '.join(HARDWARE_PROFILES)}")
        profile = dict(HARDWARE_PROFILES[name])
        price = profile.pop("cost_per_gpu_hour")
        merged.setdefault("preset", profile.pop("preset"))
        merged["hardware"] = _merge(profile, hardware, ("hardware",))  # the file wins; its slots block replaces the profile's whole
        cost = merged.setdefault("cost", {})
        if isinstance(cost, dict):
            cost.setdefault("cost_per_gpu_hour", price)
    preset = merged.setdefault("preset", DEFAULT_PRESET)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise InputError("preset", preset, f"unknown preset; known: {', '.join(PRESETS)}")
    return _merge(merged, PRESETS[preset], ())


def _merge(base: Any, override: dict[str, Any], path: tuple[str, ...]) -> Any:
    """Deep merge with ``override`` winning; alternative blocks are replaced whole."""
    if not isinstance(base, dict):
        return copy.deepcopy(override)
    result = dict(base)
    for key, value in override.items():
        here = (*path, key)
        if isinstance(value, dict) and here not in _ALTERNATIVE_BLOCKS and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value, here)
        else:
            result[key] = copy.deepcopy(value)
    return result
