"""Hardware catalog: spec tables, name lookup, KV-slot formulas, instance cost."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.hardware import (
    GPUS,
    MODELS,
    catalog_rows,
    get_gpu,
    get_model,
    instance_cost_per_hour,
    kv_tokens_from_memory,
    slots_from_kv_tokens,
    slots_from_memory,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Llama-3-8B", 131072),  # 2 * 32 * 8 * 128 * 2
        ("Llama-3-70B", 327680),  # 2 * 80 * 8 * 128 * 2
        ("Qwen3-32B", 262144),  # 2 * 64 * 8 * 128 * 2
        ("Qwen3-235B-A22B", 192512),  # 2 * 94 * 4 * 128 * 2
    ],
)
def test_kv_bytes_per_token_bf16(name: str, expected: int) -> None:
    assert MODELS[name].kv_bytes_per_token() == expected
    assert MODELS[name].kv_bytes_per_token(dtype_bytes=1) == expected // 2


def test_weight_bytes() -> None:
    assert MODELS["Llama-3-8B"].weight_bytes() == pytest.approx(16.06e9)
    assert MODELS["Llama-3-8B"].weight_bytes(1.0) == pytest.approx(8.03e9)


def test_slots_from_kv_tokens() -> None:
    assert slots_from_kv_tokens(1048576, 65536) == 16
    assert slots_from_kv_tokens(1048576, 4096) == 256
    assert slots_from_kv_tokens(4095, 4096) == 0


def test_slots_from_memory_hand_computed() -> None:
    # Llama-3-8B on one A100-80GB, u = 0.9, BF16 weights and KV, window 8192:
    # free = 0.9 * 80e9 - 8.03e9 * 2 = 55.94e9 bytes; per token 131072 bytes.
    kv_tokens = math.floor((0.9 * 80e9 - 8.03e9 * 2) / (2 * 32 * 8 * 128 * 2))
    assert kv_tokens == 426788
    gpu, model = get_gpu("A100-80GB"), get_model("Llama-3-8B")
    assert kv_tokens_from_memory(gpu, model, memory_utilisation=0.9) == kv_tokens
    assert slots_from_memory(gpu, model, 8192, memory_utilisation=0.9) == kv_tokens // 8192 == 52


def test_reserved_memory_is_per_gpu() -> None:
    # tp = 4 H100, 5 GB reserved on each: free = 4 * (0.9 * 80e9 - 5e9) - 70.6e9 * 2.
    expected = math.floor((4 * (0.9 * 80e9 - 5e9) - 70.6e9 * 2) / 327680)
    assert expected == 386962
    h100, llama70 = get_gpu("H100-SXM"), get_model("Llama-3-70B")
    assert kv_tokens_from_memory(h100, llama70, tp=4, reserved_gb_per_gpu=5.0) == expected
    # On two GPUs the same reservation leaves less than the weights: clipped at 0.
    assert kv_tokens_from_memory(h100, llama70, tp=2, reserved_gb_per_gpu=5.0) == 0


def test_model_that_does_not_fit_gives_zero() -> None:
    assert slots_from_memory(get_gpu("A10G"), get_model("Llama-3-70B"), 8192) == 0
    assert kv_tokens_from_memory(get_gpu("A10G"), get_model("Llama-3-70B")) == 0


def test_tensor_parallel_makes_room() -> None:
    h100, llama70 = get_gpu("H100-SXM"), get_model("Llama-3-70B")
    assert slots_from_memory(h100, llama70, 8192, tp=1) == 0
    assert slots_from_memory(h100, llama70, 8192, tp=2) > 0
    assert slots_from_memory(h100, llama70, 8192, tp=4) > slots_from_memory(
        h100, llama70, 8192, tp=2
    )


@pytest.mark.parametrize(
    "query", ["A10G", "a10g", " a100-80gb ", "A100_80GB", "H100_SXM", "h100 sxm"]
)
def test_gpu_name_normalisation(query: str) -> None:
    assert get_gpu(query).name in GPUS


def test_gpu_and_model_names_resolve_to_expected_entries() -> None:
    assert get_gpu(" a100-80gb ") is GPUS["A100-80GB"]
    assert get_gpu("H100_SXM") is GPUS["H100-SXM"]
    assert get_model("llama_3_70b") is MODELS["Llama-3-70B"]
    assert get_model("QWEN3 235B a22b") is MODELS["Qwen3-235B-A22B"]


def test_unknown_gpu_names_field_and_known_names() -> None:
    with pytest.raises(InputError) as err:
        get_gpu("V100", field="pools[0].gpu")
    assert err.value.field == "pools[0].gpu"
    message = str(err.value)
    assert message.startswith("pools[0].gpu = 'V100'")
    assert all(name in message for name in GPUS)


def test_unknown_model_names_field_and_known_names() -> None:
    with pytest.raises(InputError) as err:
        get_model("GPT-5")
    assert err.value.field == "hardware.model"
    assert all(name in str(err.value) for name in MODELS)


def test_non_string_name_is_an_input_error() -> None:
    with pytest.raises(InputError):
        get_gpu(None)  # type: ignore[arg-type]


def test_instance_cost_is_tp_times_price() -> None:
    a100 = get_gpu("A100-80GB")
    assert a100.cost_per_gpu_hour == 2.21  # FleetOpt paper calibration
    assert instance_cost_per_hour(a100) == pytest.approx(2.21)
    assert instance_cost_per_hour(a100, tp=4) == pytest.approx(4 * 2.21)
    assert instance_cost_per_hour(a100, tp=2, cost_per_gpu_hour=1.5) == pytest.approx(3.0)
    for gpu in GPUS.values():
        assert instance_cost_per_hour(gpu, tp=8) == pytest.approx(8 * gpu.cost_per_gpu_hour)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: slots_from_kv_tokens(1024, 0), "window_tokens"),
        (lambda: slots_from_kv_tokens(-1, 1024), "kv_tokens_per_gpu"),
        (lambda: slots_from_memory(GPUS["H200"], MODELS["Qwen3-32B"], 0), "window_tokens"),
        (lambda: slots_from_memory(GPUS["H200"], MODELS["Qwen3-32B"], 8192, tp=0), "tp"),
        (
            lambda: kv_tokens_from_memory(GPUS["H200"], MODELS["Qwen3-32B"], memory_utilisation=0),
            "memory_utilisation",
        ),
        (
            lambda: kv_tokens_from_memory(
                GPUS["H200"], MODELS["Qwen3-32B"], memory_utilisation=1.01
            ),
            "memory_utilisation",
        ),
        (
            lambda: kv_tokens_from_memory(
                GPUS["H200"], MODELS["Qwen3-32B"], reserved_gb_per_gpu=-1.0
            ),
            "reserved_gb_per_gpu",
        ),
        (
            lambda: kv_tokens_from_memory(
                GPUS["H200"], MODELS["Qwen3-32B"], weight_bytes_per_param=0.0
            ),
            "weight_bytes_per_param",
        ),
        (
            lambda: kv_tokens_from_memory(GPUS["H200"], MODELS["Qwen3-32B"], kv_dtype_bytes=0),
            "kv_dtype_bytes",
        ),
        (lambda: instance_cost_per_hour(GPUS["L4"], tp=0), "tp"),
        (lambda: instance_cost_per_hour(GPUS["L4"], cost_per_gpu_hour=-1.0), "cost_per_gpu_hour"),
    ],
)
def test_impossible_arguments_name_the_argument(call: Callable[[], object], field: str) -> None:
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field


def test_memory_utilisation_one_is_allowed() -> None:
    assert kv_tokens_from_memory(GPUS["H200"], MODELS["Qwen3-32B"], memory_utilisation=1.0) > 0


def test_every_spec_has_source_and_positive_numbers() -> None:
    for spec in [*GPUS.values(), *MODELS.values()]:
        assert spec.source.strip()
        for field in dataclasses.fields(spec):
            value = getattr(spec, field.name)
            if isinstance(value, (int, float)):
                assert value > 0, (spec.name, field.name)


def test_lookups_are_read_only_and_specs_frozen() -> None:
    with pytest.raises(TypeError):
        GPUS["X"] = GPUS["L4"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPUS["L4"].hbm_gb = 1.0  # type: ignore[misc]


def test_catalog_rows() -> None:
    rows = catalog_rows()
    assert [r["name"] for r in rows] == [*GPUS, *MODELS]
    for row in rows:
        assert row["kind"] in {"gpu", "model"}
        assert list(row)[:2] == ["kind", "name"]
        assert list(row)[-1] == "source" and row["source"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["H100-SXM"]["hbm_gb"] == 80.0
    assert by_name["Qwen3-235B-A22B"]["kv_bytes_per_token"] == 192512


@given(
    gpu=st.sampled_from(sorted(GPUS)),
    model=st.sampled_from(sorted(MODELS)),
    tp=st.integers(min_value=1, max_value=16),
    window=st.integers(min_value=1, max_value=1 << 20),
    extra_window=st.integers(min_value=0, max_value=1 << 20),
    u=st.floats(min_value=0.05, max_value=1.0),
    reserved=st.floats(min_value=0.0, max_value=20.0),
)
def test_slots_monotone_in_tp_and_window(
    gpu: str, model: str, tp: int, window: int, extra_window: int, u: float, reserved: float
) -> None:
    kwargs = {"memory_utilisation": u, "reserved_gb_per_gpu": reserved}
    g, m = GPUS[gpu], MODELS[model]
    base = slots_from_memory(g, m, window, tp=tp, **kwargs)
    assert base >= 0
    assert slots_from_memory(g, m, window, tp=tp + 1, **kwargs) >= base
    assert slots_from_memory(g, m, window + extra_window, tp=tp, **kwargs) <= base


def test_every_gpu_has_link_data_and_every_model_its_widths() -> None:
    for gpu in GPUS.values():
        assert gpu.interconnect in {"nvlink", "xgmi", "pcie"}, gpu.name
        assert gpu.interconnect_gb_s is not None and gpu.interconnect_gb_s > 0
    for model in MODELS.values():
        assert model.hidden_size and model.intermediate_size, model.name
    assert GPUS["H100-SXM"].interconnect_gb_s == 450.0  # NVLink 4: 900 GB/s bidirectional
    assert GPUS["L4"].interconnect == "pcie" and GPUS["L4"].interconnect_gb_s == 32.0


def test_active_params_default_to_all_params() -> None:
    assert MODELS["Llama-3-70B"].active_params == pytest.approx(70.6e9)
    assert MODELS["Qwen3-235B-A22B"].active_params == pytest.approx(22e9)


def test_specs_without_new_fields_still_construct() -> None:
    from optfleet.hardware import GpuSpec, ModelSpec

    gpu = GpuSpec("X", 10.0, 1.0, 10.0, 1.0, "test")
    model = ModelSpec("Y", 2, 2, 64, 0.1, "test")
    assert gpu.interconnect is None and gpu.interconnect_gb_s is None
    assert model.hidden_size is None and model.active_params == pytest.approx(0.1e9)
