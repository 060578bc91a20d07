"""Models from a Hugging Face config.json: parameter counts against published totals, KV bytes, dtypes, refusals,
and the memory fit.

The configs below are the relevant fields of the published config.json files (huggingface.co/<repo>/blob/main/
config.json), copied verbatim; the published totals are from each model card, cited where used.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.hardware import GPUS, MODELS, MemoryFit, ModelSpec, derive_profile, memory_fit, model_from_hf_config
from optfleet.hardware.hf_config import (
    ARCHITECTURES,
    MAX_CONFIG_BYTES,
    QUANT_METHODS,
    WEIGHT_FORMAT_BYTES,
    model_shape,
    parameter_counts,
)
from optfleet.hardware.profiles import ProfileAssumptions, instance_kv_bytes_per_token, kv_free_bytes
from support import REPO

pytestmark = pytest.mark.unit

FIELD = "hardware.model_config"

LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
LLAMA_31_70B = {  # meta-llama/Llama-3.1-70B
    "architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
MISTRAL_7B = {  # mistralai/Mistral-7B-v0.1
    "architectures": ["MistralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "sliding_window": 4096, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 32000,
}
QWEN3_32B = {  # Qwen/Qwen3-32B
    "architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 5120, "intermediate_size": 25600,
    "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 151936,
}
QWEN3_235B = {  # Qwen/Qwen3-235B-A22B
    "architectures": ["Qwen3MoeForCausalLM"], "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 4096,
    "intermediate_size": 12288, "mlp_only_layers": [], "moe_intermediate_size": 1536, "num_attention_heads": 64,
    "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94, "num_key_value_heads": 4,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936,
}
QWEN2_57B = {  # Qwen/Qwen2-57B-A14B: one shared expert
    "architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1, "hidden_size": 3584, "intermediate_size": 18944,
    "moe_intermediate_size": 2560, "num_attention_heads": 28, "num_experts": 64, "num_experts_per_tok": 8,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "shared_expert_intermediate_size": 20480,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936,
}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000,
}
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3
    "architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_size": 7168,
    "intermediate_size": 18432, "kv_lora_rank": 512, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 129280,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
GPT_OSS_120B = {  # openai/gpt-oss-120b
    "architectures": ["GptOssForCausalLM"], "experts_per_token": 4, "head_dim": 64, "hidden_size": 2880,
    "intermediate_size": 2880, "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "sliding_window": 128, "tie_word_embeddings": False,
    "vocab_size": 201088,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
}
GEMMA_2B = {  # google/gemma-2b: multi-query attention, embeddings tied by default
    "architectures": ["GemmaForCausalLM"], "head_dim": 256, "hidden_size": 2048, "intermediate_size": 16384,
    "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1, "torch_dtype": "bfloat16",
    "vocab_size": 256000,
}
GEMMA2_9B = {  # google/gemma-2-9b (float32 checkpoint)
    "architectures": ["Gemma2ForCausalLM"], "head_dim": 256, "hidden_size": 3584, "intermediate_size": 14336,
    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8, "torch_dtype": "float32",
    "vocab_size": 256000,
}
PHI3_MINI = {  # microsoft/Phi-3-mini-4k-instruct
    "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32064,
}


def _with(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``config`` with keys changed; a value of ``...`` removes the key."""
    out = {**config, **changes}
    return {k: v for k, v in out.items() if v is not ...}


# --- parameter counts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "total_billion", "active_billion"),
    [
        (LLAMA_31_8B, 8.03, None),  # model card: 8.03B
        (LLAMA_31_70B, 70.6, None),  # model card: 70.6B
        (MISTRAL_7B, 7.24, None),  # model card: 7.24B
        (QWEN3_32B, 32.8, None),  # model card: 32.8B
        (GEMMA_2B, 2.51, None),  # model card: 2.51B
        (GEMMA2_9B, 9.24, None),  # model card: 9.24B
        (PHI3_MINI, 3.82, None),  # model card: 3.8B (3.82B on the hub)
        (QWEN3_235B, 235.0, 22.0),  # model card: 235B total, 22B activated
        (QWEN2_57B, 57.4, 14.0),  # model card: 57B total (57.4B on the hub), 14B activated
        (MIXTRAL_8X7B, 46.7, 12.9),  # Mistral AI, "Mixtral of experts": 46.7B total, 12.9B per token
        (DEEPSEEK_V3, 671.0, 37.0),  # DeepSeek-V3 technical report: 671B total, 37B activated per token
        (GPT_OSS_120B, 116.83, None),  # gpt-oss model card table: 116.83B total (active: test below)
    ],
    ids=lambda v: v["architectures"][0] if isinstance(v, dict) else None,
)
def test_parameter_counts_match_published_totals(config: dict, total_billion: float, active_billion: float | None) -> None:
    model = model_from_hf_config(config)
    assert model.params_billion == pytest.approx(total_billion, rel=0.02)
    if active_billion is not None:
        assert model.active_params_billion == pytest.approx(active_billion, rel=0.02)


def test_dense_models_have_no_separate_active_count() -> None:
    model = model_from_hf_config(LLAMA_31_8B)
    assert model.active_params_billion is None and model.active_params == model.params_billion * 1e9
    assert model.experts is None and model.experts_per_token is None


def test_gpt_oss_active_count_differs_from_the_card_by_the_input_embedding() -> None:
    # The card's 5.13B active counts the unembedding but not the input embedding (a lookup, not a matmul).
    counts = parameter_counts(model_shape(GPT_OSS_120B))
    assert counts.embedding == 201088 * 2880
    assert (counts.active - counts.embedding) / 1e9 == pytest.approx(5.13, rel=0.02)


def test_llama_8b_count_by_hand() -> None:
    # 2 V d (embedding + lm_head) + L (attention 2 d^2 + 2 d 8 128 + MLP 3 d I)
    d, v, layers, inter = 4096, 128256, 32, 14336
    expected = 2 * v * d + layers * (2 * d * d + 2 * d * 8 * 128 + 3 * d * inter)
    assert parameter_counts(model_shape(LLAMA_31_8B)).resident == expected


def test_tied_embeddings_drop_the_lm_head() -> None:
    untied = parameter_counts(model_shape(_with(QWEN3_32B, tie_word_embeddings=False)))
    tied = parameter_counts(model_shape(_with(QWEN3_32B, tie_word_embeddings=True)))
    assert untied.resident - tied.resident == 151936 * 5120
    assert parameter_counts(model_shape(GEMMA_2B)).lm_head == 0  # Gemma ties by default


def test_deepseek_structure() -> None:
    model = model_from_hf_config(DEEPSEEK_V3)
    assert (model.experts, model.experts_per_token, model.attention_heads) == (256, 8, 128)
    assert model.kv_heads == 1 and model.head_dim == 128 + 64
    assert model.intermediate_size == 18432  # 8 routed + 1 shared expert of 2048 = the dense layers' 18432
    counts = parameter_counts(model_shape(DEEPSEEK_V3))
    assert counts.dense_mlp == 3 * 3 * 7168 * 18432  # first_k_dense_replace = 3 dense layers
    assert counts.shared_experts == 58 * 3 * 7168 * 2048


def test_qwen_moe_dense_layers_follow_mlp_only_layers_and_sparse_step() -> None:
    every_other = parameter_counts(model_shape(_with(QWEN3_235B, decoder_sparse_step=2)))
    assert every_other.dense_mlp == 47 * 3 * 4096 * 12288
    listed = parameter_counts(model_shape(_with(QWEN3_235B, mlp_only_layers=[0, 93])))
    assert listed.dense_mlp == 2 * 3 * 4096 * 12288


@pytest.mark.parametrize("name", sorted(MODELS))
def test_catalog_models_agree_with_their_configs(name: str) -> None:
    config = {"Llama-3-8B": LLAMA_31_8B, "Llama-3-70B": LLAMA_31_70B, "Qwen3-32B": QWEN3_32B,
              "Qwen3-235B-A22B": QWEN3_235B}[name]
    read, listed = model_from_hf_config(config), MODELS[name]
    for attr in ("layers", "kv_heads", "head_dim", "hidden_size", "intermediate_size", "attention_heads",
                 "experts", "experts_per_token", "architecture"):
        assert getattr(read, attr) == getattr(listed, attr), attr
    assert read.params_billion == pytest.approx(listed.params_billion, rel=0.02)
    assert read.active_params == pytest.approx(listed.active_params, rel=0.02)


# --- KV bytes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (LLAMA_31_8B, 2 * 32 * 8 * 128 * 2),  # GQA
        (QWEN3_235B, 2 * 94 * 4 * 128 * 2),  # GQA, MoE
        (GEMMA_2B, 2 * 18 * 1 * 256 * 2),  # MQA
        (DEEPSEEK_V3, 61 * (512 + 64) * 2),  # MLA: latent + RoPE key, 70,272 bytes (DeepSeek-V2 paper, table 1)
    ],
)
def test_kv_bytes_per_token(config: dict, expected: int) -> None:
    model = model_from_hf_config(config)
    assert model.kv_bytes_per_token() == expected
    assert model.kv_bytes_per_token(1) == expected // 2
    assert model_from_hf_config(config, kv_dtype_bytes=1).kv_bytes_per_token() == expected // 2


# --- weight formats --------------------------------------------------------------------------------


def _mean_bytes(config: dict, quantised_groups: tuple[str, ...], width: float) -> float:
    counts = parameter_counts(model_shape(config))
    quantised = sum(getattr(counts, g) for g in quantised_groups)
    return (quantised * width + (counts.resident - quantised) * 2.0) / counts.resident


LINEAR = ("attention", "dense_mlp", "routed_experts", "shared_experts")


@pytest.mark.parametrize("dtype", [{"torch_dtype": "bfloat16"}, {"torch_dtype": "float16"}, {"dtype": "bfloat16"},
                                   {"torch_dtype": "float32"}, {"torch_dtype": ...}])
def test_unquantised_checkpoints_are_16_bit(dtype: dict) -> None:
    model = model_from_hf_config(_with(LLAMA_31_8B, **dtype))
    assert model.weight_bytes_per_param == 2.0
    assert model.weight_bytes() == pytest.approx(model.params_billion * 2e9)


@pytest.mark.parametrize(
    ("quant", "width"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, 1.0),
        ({"quant_method": "fbgemm_fp8"}, 1.0),
        ({"quant_method": "w8a8_int8"}, 1.0),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5),
        ({"quant_method": "gptq", "bits": 8}, 1.0),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}}}, 1.0),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "int"}}}}, 1.0),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}}, 0.5),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 0.5 + 1 / 16),
        ({"quant_algo": "FP8", "config_groups": {}}, 1.0),  # ModelOpt block inlined without quant_method
    ],
)
def test_quantised_linear_weights(quant: dict, width: float) -> None:
    model = model_from_hf_config(_with(QWEN3_32B, quantization_config=quant))
    assert model.weight_bytes_per_param == pytest.approx(_mean_bytes(QWEN3_32B, LINEAR, width))
    assert width <= model.weight_bytes_per_param < width + 0.1  # embeddings and lm_head stay BF16


def test_format_table() -> None:
    assert {k: WEIGHT_FORMAT_BYTES[k] for k in ("bf16", "fp16", "fp8", "int8", "int4")} == {
        "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def test_mxfp4_quantises_only_the_experts() -> None:
    model = model_from_hf_config(GPT_OSS_120B)
    assert model.weight_bytes_per_param == pytest.approx(_mean_bytes(GPT_OSS_120B, ("routed_experts",), 0.5 + 1 / 32))
    # The published checkpoint is 65.3 GB (60.8 GiB) of safetensors.
    assert model.weight_bytes() / 1e9 == pytest.approx(65.3, rel=0.02)


def test_ignored_attention_stays_at_the_checkpoint_dtype() -> None:
    quant = {"quant_method": "fp8", "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn.q_proj"]}
    model = model_from_hf_config(_with(QWEN3_32B, quantization_config=quant))
    assert model.weight_bytes_per_param == pytest.approx(_mean_bytes(QWEN3_32B, ("dense_mlp",), 1.0))


def test_hf_quant_config_beside_the_config(tmp_path: Path) -> None:
    folder = tmp_path / "Llama-3.1-70B-Instruct-FP8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_31_70B))
    (folder / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                                            "exclude_modules": ["lm_head"]}}))
    expected = _mean_bytes(LLAMA_31_70B, LINEAR, 1.0)
    for source in (folder, folder / "config.json"):
        model = model_from_hf_config(source)
        assert model.name == "Llama-3.1-70B-Instruct-FP8"
        assert model.weight_bytes_per_param == pytest.approx(expected)
    plain = tmp_path / "llama.json"
    plain.write_text(json.dumps(LLAMA_31_70B))
    assert model_from_hf_config(plain).weight_bytes_per_param == 2.0  # only a file named ...config.json has a sibling
    assert model_from_hf_config(plain, quant_config=folder / "hf_quant_config.json").weight_bytes_per_param == pytest.approx(expected)
    # a bundle's renamed pair: <prefix>config.json beside <prefix>hf_quant_config.json
    (tmp_path / "nvidia--Llama-3.1-70B-Instruct-FP8_config.json").write_text(json.dumps(LLAMA_31_70B))
    (tmp_path / "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json").write_text((folder / "hf_quant_config.json").read_text())
    bundled = model_from_hf_config(tmp_path / "nvidia--Llama-3.1-70B-Instruct-FP8_config.json")
    assert bundled.weight_bytes_per_param == pytest.approx(expected)


def test_weight_width_override() -> None:
    model = model_from_hf_config(_with(QWEN3_32B, quantization_config={"quant_method": "unheard-of"}),
                                 weight_bytes_per_param=0.75)
    assert model.weight_bytes_per_param == 0.75 and "0.75 bytes/param (given)" in model.source
    assert model.weight_bytes() == pytest.approx(model.params_billion * 0.75e9)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"weight_bytes_per_param": 0.0}, "model.weight_bytes_per_param"),
        ({"weight_bytes_per_param": math.inf}, "model.weight_bytes_per_param"),
        ({"kv_dtype_bytes": 0}, "model.kv_dtype_bytes"),
        ({"attention_heads": 0}, "model.attention_heads"),
        ({"kv_elements_per_token_per_layer": 1.5}, "model.kv_elements_per_token_per_layer"),
        ({"experts": 8}, "model.experts_per_token"),
        ({"experts": 8, "experts_per_token": 9}, "model.experts_per_token"),
    ],
)
def test_model_spec_checks_its_new_fields(fields: dict, field: str) -> None:
    assert _refusal(lambda: ModelSpec("M", 2, 2, 64, 0.1, "test", **fields)).field == field


# --- refusals ---------------------------------------------------------------------------------------


def _refusal(call: Callable[[], object]) -> InputError:
    with pytest.raises(InputError) as err:
        call()
    return err.value


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        (_with(LLAMA_31_8B, num_key_value_heads=...), f"{FIELD}.num_key_value_heads", "missing"),
        (_with(LLAMA_31_8B, num_hidden_layers=...), f"{FIELD}.num_hidden_layers", "missing"),
        (_with(LLAMA_31_8B, vocab_size=None), f"{FIELD}.vocab_size", "missing"),
        (_with(LLAMA_31_8B, num_hidden_layers=0), f"{FIELD}.num_hidden_layers", "integer >= 1"),
        (_with(LLAMA_31_8B, num_attention_heads=-32), f"{FIELD}.num_attention_heads", "integer >= 1"),
        (_with(LLAMA_31_8B, head_dim=128.5), f"{FIELD}.head_dim", "integer >= 1"),
        (_with(LLAMA_31_8B, hidden_size="4096"), f"{FIELD}.hidden_size", "integer >= 1"),
        (_with(LLAMA_31_8B, num_hidden_layers=True), f"{FIELD}.num_hidden_layers", "integer >= 1"),
        (_with(LLAMA_31_8B, num_key_value_heads=5), f"{FIELD}.num_key_value_heads", "must divide"),
        (_with(LLAMA_31_8B, hidden_size=4100), f"{FIELD}.head_dim", "not a multiple"),
        (_with(LLAMA_31_8B, tie_word_embeddings="no"), f"{FIELD}.tie_word_embeddings", "true or false"),
        (_with(LLAMA_31_8B, architectures=["FalconForCausalLM"]), f"{FIELD}.architectures", "MixtralForCausalLM"),
        (_with(LLAMA_31_8B, architectures=...), f"{FIELD}.architectures", "supported"),
        (_with(LLAMA_31_8B, architectures={"a": 1}), f"{FIELD}.architectures", "supported"),
        (_with(LLAMA_31_8B, architectures=[["LlamaForCausalLM"]]), f"{FIELD}.architectures", "supported"),
        (_with(LLAMA_31_8B, torch_dtype="int3"), f"{FIELD}.torch_dtype", "bfloat16"),
        (_with(LLAMA_31_8B, quantization_config={"quant_method": "hqq"}), f"{FIELD}.quantization_config.quant_method", "awq"),
        (_with(LLAMA_31_8B, quantization_config={"quant_method": "gptq", "bits": 3}), f"{FIELD}.quantization_config.bits", "4, 8"),
        (_with(LLAMA_31_8B, quantization_config={"quant_algo": "MIXED_PRECISION"}), f"{FIELD}.quantization_config.quant_algo",
         "weight_bytes_per_param"),
        (_with(LLAMA_31_8B, quantization_config={"quant_method": "compressed-tensors", "config_groups": {
            "a": {"weights": {"num_bits": 8, "type": "float"}}, "b": {"weights": {"num_bits": 4, "type": "int"}}}}),
         f"{FIELD}.quantization_config.config_groups", "one weight width"),
        (_with(LLAMA_31_8B, quantization_config=[]), f"{FIELD}.quantization_config", "JSON object"),
        (_with(MIXTRAL_8X7B, num_experts_per_tok=9), f"{FIELD}.num_experts_per_tok", "exceeds"),
        (_with(MIXTRAL_8X7B, num_local_experts=...), f"{FIELD}.num_local_experts", "missing"),
        (_with(DEEPSEEK_V3, kv_lora_rank=...), f"{FIELD}.kv_lora_rank", "missing"),
        (_with(DEEPSEEK_V3, first_k_dense_replace=-1), f"{FIELD}.first_k_dense_replace", "integer >= 0"),
        (_with(QWEN3_235B, mlp_only_layers="all"), f"{FIELD}.mlp_only_layers", "list of integers"),
        (_with(GPT_OSS_120B, num_experts_per_tok=..., experts_per_token=...), f"{FIELD}.num_experts_per_tok", "missing"),
    ],
)
def test_bad_config_names_the_field(config: dict, field: str, words: str) -> None:
    err = _refusal(lambda: model_from_hf_config(config))
    assert err.field == field
    assert words in str(err) and str(err).startswith(field)


def test_field_prefix_is_the_callers() -> None:
    err = _refusal(lambda: model_from_hf_config(_with(LLAMA_31_8B, num_key_value_heads=...), field="pools[1].config"))
    assert err.field == "pools[1].config.num_key_value_heads"


def test_unknown_architecture_lists_the_supported_ones() -> None:
    err = _refusal(lambda: model_from_hf_config(_with(LLAMA_31_8B, architectures=["Llama4ForConditionalGeneration"])))
    assert all(name in err.problem for name in ARCHITECTURES)


def test_unknown_method_lists_the_known_ones() -> None:
    err = _refusal(lambda: model_from_hf_config(_with(LLAMA_31_8B, quantization_config={"quant_method": "eetq"})))
    assert all(name in err.problem for name in QUANT_METHODS)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "is not JSON"),
        (b"\xff\xfe\x00", "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b"", "is not JSON"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    err = _refusal(lambda: model_from_hf_config(path))
    assert err.field == FIELD and words in err.problem


def test_missing_and_oversized_files_are_refused(tmp_path: Path) -> None:
    assert "cannot be read" in _refusal(lambda: model_from_hf_config(tmp_path / "absent.json")).problem
    assert "cannot be read" in _refusal(lambda: model_from_hf_config(tmp_path)).problem  # a folder without config.json
    big = tmp_path / "config.json"
    big.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    assert "larger than" in _refusal(lambda: model_from_hf_config(big)).problem
    assert _refusal(lambda: model_from_hf_config(42)).field == FIELD  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"kv_dtype_bytes": 0}, "kv_dtype_bytes"), ({"kv_dtype_bytes": 1.5}, "kv_dtype_bytes"),
     ({"weight_bytes_per_param": 0.0}, "weight_bytes_per_param"),
     ({"weight_bytes_per_param": math.nan}, "weight_bytes_per_param")],
)
def test_bad_arguments_are_refused(kwargs: dict, field: str) -> None:
    assert _refusal(lambda: model_from_hf_config(LLAMA_31_8B, **kwargs)).field == field


# --- the shipped example -----------------------------------------------------------------------------


def test_shipped_example_config() -> None:
    folder = REPO / "instances" / "fleet" / "models"
    model = model_from_hf_config(folder / "example_config.json")
    assert model.architecture == "Qwen3ForCausalLM"
    assert model.params_billion == pytest.approx(8.2, rel=0.02)  # Qwen3-8B model card: 8.2B
    assert model.kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2
    assert len((folder / "README.md").read_text().strip().splitlines()) == 3


# --- memory fit ------------------------------------------------------------------------------------------


def test_shortfall_names_the_gigabytes() -> None:
    fit = memory_fit(GPUS["L4"], model_from_hf_config(LLAMA_31_70B, name="Llama-3.1-70B"), 1, 8192)
    assert not fit.fits and fit.max_sequences == 0 and fit.kv_tokens == 0
    match = re.fullmatch(
        r"Llama-3.1-70B needs ([\d.]+) GB of weights per GPU, ([\d.]+) GB usable on 1 x L4: short by ([\d.]+) GB",
        fit.infeasible_reason or "",
    )
    assert match is not None, fit.infeasible_reason
    needs, usable, short = map(float, match.groups())
    assert needs == pytest.approx(141.1, abs=0.01)  # 70.55B x 2 bytes
    assert short == pytest.approx(needs - usable, abs=0.011)
    err = _refusal(fit.require)
    assert err.field == "hardware.tp" and "short by" in str(err)


def test_fit_uses_the_profiles_accounting() -> None:
    fit = memory_fit("H100-SXM", "Llama-3-8B", 1, 8192)
    a = ProfileAssumptions()
    assert fit.kv_tokens == math.floor(kv_free_bytes(GPUS["H100-SXM"], MODELS["Llama-3-8B"], 1, a) / 131072)
    assert fit.kv_tokens == derive_profile("H100-SXM", "Llama-3-8B", 1, 8192).kv_tokens
    assert fit.max_sequences == fit.kv_tokens // 8192 and fit.require() is fit
    assert fit.weight_gb_per_gpu == pytest.approx(16.06)


def test_fit_reads_the_checkpoint_width() -> None:
    bf16 = model_from_hf_config(QWEN3_32B)
    fp8 = model_from_hf_config(_with(QWEN3_32B, quantization_config={"quant_method": "fp8"}))
    assert not memory_fit("L40S", bf16, 1, 8192).fits
    fit = memory_fit("L40S", fp8, 1, 8192)
    assert fit.fits and fit.weight_bytes_per_param == fp8.weight_bytes_per_param
    assert fit.weight_gb_per_gpu == pytest.approx(fp8.weight_bytes() / 1e9)
    fp8_kv = memory_fit("L40S", model_from_hf_config(_with(QWEN3_32B, quantization_config={"quant_method": "fp8"}),
                                                       kv_dtype_bytes=1), 1, 8192)
    assert fp8_kv.kv_bytes_per_token * 2 == fit.kv_bytes_per_token and fp8_kv.kv_tokens >= 2 * fit.kv_tokens - 1


def test_mla_latent_is_kept_whole_on_every_gpu() -> None:
    model = model_from_hf_config(DEEPSEEK_V3)
    fit = memory_fit("H200", model, 8, 8192)
    assert fit.fits
    assert fit.kv_bytes_per_token == 8 * 70272 == instance_kv_bytes_per_token(model, 8, 2)


def test_fit_refuses_split_heads_and_short_windows() -> None:
    split = memory_fit("H100-SXM", "Llama-3-8B", 3, 8192)
    assert not split.fits and "does not divide 8 KV heads" in (split.infeasible_reason or "")
    queries = memory_fit("H200", model_from_hf_config(QWEN2_57B), 8, 8192)  # 4 KV heads replicated, 28 query heads
    assert not queries.fits and "does not divide 28 query heads" in (queries.infeasible_reason or "")
    assert memory_fit("H200", model_from_hf_config(QWEN2_57B), 4, 8192).fits
    short = memory_fit("L4", "Llama-3-8B", 1, 1 << 20)
    assert not short.fits and "no full window" in (short.infeasible_reason or "") and short.kv_tokens > 0
    assert isinstance(short, MemoryFit)
    assert _refusal(lambda: memory_fit("L4", "Llama-3-8B", 0, 8192)).field == "tp"
    assert _refusal(lambda: memory_fit("L4", "Llama-3-8B", 1, 0)).field == "window_tokens"


# --- properties ----------------------------------------------------------------------------------------


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """A small random config of a dense, a Qwen-MoE or a DeepSeek (MLA) model."""
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    base = {
        "hidden_size": 64 * draw(st.integers(1, 64)),
        "intermediate_size": 64 * draw(st.integers(1, 256)),
        "num_attention_heads": kv_heads * draw(st.integers(1, 8)),
        "num_key_value_heads": kv_heads,
        "head_dim": draw(st.sampled_from([64, 128, 256])),
        "num_hidden_layers": draw(st.integers(1, 96)),
        "vocab_size": draw(st.integers(1000, 300_000)),
        "tie_word_embeddings": draw(st.booleans()),
    }
    kind = draw(st.sampled_from(["LlamaForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM"]))
    if kind == "LlamaForCausalLM":
        return {"architectures": [kind], **base}
    experts = draw(st.integers(1, 256))
    moe = {"num_experts_per_tok": draw(st.integers(1, experts)), "moe_intermediate_size": 64 * draw(st.integers(1, 64))}
    if kind == "Qwen3MoeForCausalLM":
        return {"architectures": [kind], **base, **moe, "num_experts": experts}
    return {"architectures": [kind], **base, **moe, "n_routed_experts": experts,
            "n_shared_experts": draw(st.integers(0, 2)), "first_k_dense_replace": draw(st.integers(0, 3)),
            "kv_lora_rank": 64 * draw(st.integers(1, 16)), "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
            "v_head_dim": 128, "q_lora_rank": draw(st.sampled_from([None, 1536]))}


@settings(max_examples=60, deadline=None)
@given(config=configs())
def test_resident_covers_active_and_kv_scales_with_layers(config: dict) -> None:
    model = model_from_hf_config(config)
    assert model.params_billion * 1e9 >= model.active_params > 0
    doubled = model_from_hf_config({**config, "num_hidden_layers": 2 * config["num_hidden_layers"]})
    assert doubled.kv_bytes_per_token() == 2 * model.kv_bytes_per_token()
    assert doubled.params_billion > model.params_billion


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 1 << 20) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(
    base=st.sampled_from([LLAMA_31_8B, DEEPSEEK_V3, GPT_OSS_120B, QWEN2_57B]),
    key=st.sampled_from(sorted({*LLAMA_31_8B, *DEEPSEEK_V3, *GPT_OSS_120B, *QWEN2_57B, "head_dim", "dtype"})),
    value=JSON_VALUES,
)
def test_any_json_value_gives_a_model_or_an_input_error(base: dict, key: str, value: Any) -> None:
    try:
        model = model_from_hf_config({**base, key: value})
    except InputError as err:
        assert err.field.startswith(FIELD)
    else:
        assert model.params_billion > 0 and model.kv_bytes_per_token() > 0


def test_tied_embeddings_are_named_in_the_spec() -> None:
    tied = model_from_hf_config(_with(QWEN3_32B, tie_word_embeddings=True))
    untied = model_from_hf_config(QWEN3_32B)
    embedding = QWEN3_32B["vocab_size"] * QWEN3_32B["hidden_size"] / 1e9
    assert tied.tied_embedding_params_billion == pytest.approx(embedding) and untied.tied_embedding_params_billion is None
    assert untied.params_billion - tied.params_billion == pytest.approx(embedding)  # the output layer counted once
