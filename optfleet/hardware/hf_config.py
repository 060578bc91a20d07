"""Models from a Hugging Face ``config.json``, read locally: no network, no ``transformers``.

:func:`model_from_hf_config` turns a config.json (a path, a model folder
holding one, or the parsed dict) into a :class:`~optfleet.hardware.catalog.ModelSpec`:
layers, heads, KV bytes per token, resident and active parameters and the
weights' bytes per parameter, all from the config's shapes.

Notation: ``d`` hidden_size, ``V`` vocab_size, ``L`` num_hidden_layers,
``h_q`` num_attention_heads, ``h_kv`` num_key_value_heads, ``d_h`` head_dim
(or ``d / h_q``).  Parameter counts, per the layer definitions of the
architectures' reference implementations (Hugging Face ``modeling_<arch>.py``;
DeepSeek-V2 paper section 2.1 for multi-head latent attention):

* embedding ``V d``; lm_head ``V d``, 0 when ``tie_word_embeddings``;
* grouped-query attention per layer (MHA: ``h_kv = h_q``; MQA: ``h_kv = 1``):
  ``d h_q d_h`` (q) ``+ 2 d h_kv d_h`` (k, v) ``+ h_q d_h d`` (o);
* multi-head latent attention per layer (DeepSeek-V2/V3), with ``r_q``
  q_lora_rank, ``r_kv`` kv_lora_rank, ``d_nope`` qk_nope_head_dim,
  ``d_rope`` qk_rope_head_dim, ``d_v`` v_head_dim:
  ``d r_q + r_q h_q (d_nope + d_rope)`` (q; ``d h_q (d_nope + d_rope)`` when
  r_q is null) ``+ d (r_kv + d_rope)`` (kv_a) ``+ r_kv h_q (d_nope + d_v)``
  (kv_b) ``+ h_q d_v d`` (o);
* gated MLP (SwiGLU/GeGLU: gate, up and down) of width ``I``: ``3 d I``;
* MoE layer with ``n_e`` routed experts of width ``I_e``, ``k`` per token and
  shared experts of total width ``I_s``: experts ``3 d n_e I_e`` resident,
  ``3 d k I_e`` active; shared ``3 d I_s``; router ``d n_e`` (Qwen2-MoE adds
  its shared-expert gate, ``d``).

Resident parameters = embedding + lm_head + attention + dense MLPs + every
expert + shared experts + routers; active = the same with ``k`` experts in
place of ``n_e`` (embeddings and lm_head included, as Mixtral's published
12.9B and DeepSeek-V3's 37B count them; gpt-oss's published 5.1B leaves out
the input embedding, 0.58B).  Left out, each under 0.1 %: norms, biases,
rotary buffers, gpt-oss's attention sinks, DeepSeek-V3's router bias; and
multi-token-prediction layers (DeepSeek's ``num_nextn_predict_layers``, 14B
on top of V3's 671B; MiniMax-M2's ``num_mtp_modules``), loaded only for
speculative decoding.  Checked against
published totals in tests/test_hf_config.py.

KV cache per token and layer: ``2 h_kv d_h`` elements (K and V); MLA caches
the compressed latent and the shared RoPE key, ``r_kv + d_rope`` elements,
described as one KV head (``kv_heads = 1``) that every TP rank keeps whole.
Every layer is charged a full-context KV cache; sliding-window layers (Mistral
v0.1, Gemma 2/3, gpt-oss) would hold less under an engine that frees them, so
the count is an upper bound there.  The KV dtype is not in config.json: BF16
(2 bytes) unless the caller says otherwise (``kv_dtype_bytes``).

Weight bytes per parameter: the checkpoint dtype (``torch_dtype`` or
``dtype``: bfloat16/float16 -> 2; float32 -> 2 too, since vLLM and SGLang
serve a float32 checkpoint at 16 bits; absent -> BF16 assumed), and for a
quantised checkpoint (``quantization_config``, or a ModelOpt
``hf_quant_config.json`` beside the config.json) the format's bytes per
weight (:data:`WEIGHT_FORMAT_BYTES`) for the decoder layers' linear weights;
embeddings, lm_head and routers stay at the checkpoint dtype, and so does
attention (shared experts) when the quantisation's ignore list
(``modules_to_not_convert``, ``ignore``, ``exclude_modules``) names any
``self_attn`` (``shared_expert``) module.  The spec's
``weight_bytes_per_param`` is the resulting mean over all parameters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optfleet.errors import InputError
from optfleet.hardware.catalog import ModelSpec, check_positive_int, check_positive_real

MAX_CONFIG_BYTES = 4_000_000
"""Largest config file read (bytes).  A real config.json is a few kB; ModelOpt
checkpoints that list every quantised layer reach ~3 MB."""

CONFIG_FILE = "config.json"
QUANT_CONFIG_FILE = "hf_quant_config.json"
"""ModelOpt (NVIDIA) writes its quantisation here, beside config.json, when config.json has none."""

WEIGHT_FORMAT_BYTES: Mapping[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "mxfp4": 0.5 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
}
"""Bytes per weight of each storage format.  The micro-scaled 4-bit formats
carry the scale their specification fixes: MXFP4 one E8M0 byte per 32
weights (OCP MX spec), NVFP4 one FP8 byte per 16 (NVIDIA).  Other scales are
left out: FP8 block scales (4 bytes per 128 x 128 block, 0.02 %), INT4
group scales (GPTQ/AWQ, ~2.5 bytes per group of 128, 2-3 % of the INT4
bytes)."""

CHECKPOINT_DTYPES: Mapping[str, str] = {"bfloat16": "bf16", "float16": "fp16", "float32": "bf16"}
_DEFAULT_DTYPE = "bf16"
_QUANTISABLE = frozenset({"attention", "dense_mlp", "routed_experts", "shared_experts"})
_METHOD_GROUPS: Mapping[str, frozenset[str]] = {"mxfp4": frozenset({"routed_experts"})}
"""Methods that quantise fewer groups by construction: transformers' MXFP4 stores only MoE experts in MXFP4."""
_IGNORE_KEYS = ("modules_to_not_convert", "ignore", "exclude_modules")
_IGNORE_MARKERS: Mapping[str, str] = {"self_attn": "attention", "shared_expert": "shared_experts"}


# ---------------------------------------------------------------------------
# Shapes and parameter counts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionShape:
    """One layer's attention: heads, cached elements per token, parameters."""

    query_heads: int
    kv_heads: int
    head_dim: int
    params_per_layer: int
    kv_elements_per_token_per_layer: int | None = None
    """None: ``2 kv_heads head_dim`` (K and V); MLA: the latent width."""


@dataclass(frozen=True)
class MlpShape:
    """The MLP blocks: ``dense_layers`` gated MLPs of width ``dense_width``, ``moe_layers`` expert layers."""

    dense_layers: int
    dense_width: int
    moe_layers: int = 0
    experts: int = 0
    experts_per_token: int = 0
    expert_width: int = 0
    shared_width: int = 0
    router_params_per_layer: int = 0

    @property
    def per_token_width(self) -> int:
        """The widest MLP one token passes through: ``max(I, k I_e + I_s)`` over the layer kinds present."""
        dense = self.dense_width if self.dense_layers else 0
        moe = self.experts_per_token * self.expert_width + self.shared_width if self.moe_layers else 0
        return max(dense, moe)


@dataclass(frozen=True)
class ModelShape:
    """What the parameter and KV counts need from a config.json."""

    architecture: str
    layers: int
    hidden_size: int
    vocab_size: int
    tied_embeddings: bool
    attention: AttentionShape
    mlp: MlpShape


@dataclass(frozen=True)
class ParameterCounts:
    """Parameters by group (module docstring for each formula); ``routed_experts`` is every expert."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    active_routed_experts: int
    shared_experts: int
    router: int

    def group(self, name: str) -> int:
        """The count of one resident group (``"attention"``, ``"routed_experts"``, ...)."""
        return int(getattr(self, name))

    @property
    def resident(self) -> int:
        """Every weight: embedding + lm_head + attention + dense MLPs + all experts + shared + routers."""
        dense = self.embedding + self.lm_head + self.attention + self.dense_mlp
        return dense + self.routed_experts + self.shared_experts + self.router

    @property
    def active(self) -> int:
        """Weights one token uses: :attr:`resident` with the routed experts cut to the ``k`` chosen."""
        return self.resident - self.routed_experts + self.active_routed_experts


def gated_mlp_params(hidden_size: int, width: int) -> int:
    """``3 d I``: gate, up and down projections of a SwiGLU/GeGLU MLP."""
    return 3 * hidden_size * width


def gqa_attention_params(hidden_size: int, query_heads: int, kv_heads: int, head_dim: int) -> int:
    """``d h_q d_h + 2 d h_kv d_h + h_q d_h d``: q, k, v and o projections (MHA, GQA, MQA alike)."""
    return 2 * hidden_size * query_heads * head_dim + 2 * hidden_size * kv_heads * head_dim


def mla_attention_params(
    hidden_size: int, heads: int, q_lora_rank: int | None, kv_lora_rank: int, nope_dim: int, rope_dim: int, v_dim: int
) -> int:
    """Multi-head latent attention (DeepSeek-V2 paper, section 2.1): q + kv_a + kv_b + o.

    ``q = d r_q + r_q h (d_nope + d_rope)`` (``d h (d_nope + d_rope)`` without
    a query LoRA), ``kv_a = d (r_kv + d_rope)``, ``kv_b = r_kv h (d_nope + d_v)``,
    ``o = h d_v d``.
    """
    qk_dim = nope_dim + rope_dim
    q = hidden_size * heads * qk_dim if q_lora_rank is None else hidden_size * q_lora_rank + q_lora_rank * heads * qk_dim
    kv_a = hidden_size * (kv_lora_rank + rope_dim)
    kv_b = kv_lora_rank * heads * (nope_dim + v_dim)
    return q + kv_a + kv_b + heads * v_dim * hidden_size


def parameter_counts(shape: ModelShape) -> ParameterCounts:
    """Every group's parameters from the shapes (module docstring); norms and biases left out."""
    d, mlp = shape.hidden_size, shape.mlp
    embedding = shape.vocab_size * d
    expert = gated_mlp_params(d, mlp.expert_width)
    return ParameterCounts(
        embedding=embedding,
        lm_head=0 if shape.tied_embeddings else embedding,
        attention=shape.layers * shape.attention.params_per_layer,
        dense_mlp=mlp.dense_layers * gated_mlp_params(d, mlp.dense_width),
        routed_experts=mlp.moe_layers * mlp.experts * expert,
        active_routed_experts=mlp.moe_layers * mlp.experts_per_token * expert,
        shared_experts=mlp.moe_layers * gated_mlp_params(d, mlp.shared_width),
        router=mlp.moe_layers * mlp.router_params_per_layer,
    )


# ---------------------------------------------------------------------------
# Reading fields
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fields:
    """A JSON object and its field path, with checked readers that name ``path.key`` in every refusal."""

    data: Mapping[str, Any]
    path: str

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def count(self, key: str, minimum: int = 1) -> int:
        """A required integer >= ``minimum``; missing or null is refused."""
        value = self.count_or(key, None, minimum)
        if value is None:
            raise InputError(self.at(key), None, "missing from the config; the engine model needs it")
        return value

    def count_or(self, key: str, default: int | None, minimum: int = 1) -> int | None:
        """An optional integer >= ``minimum``; ``default`` when missing or null."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError(self.at(key), value, f"must be an integer >= {minimum}")
        return value

    def first_count(self, keys: Iterable[str]) -> int:
        """The first of ``keys`` present (configs rename fields across versions); refused when none is."""
        keys = tuple(keys)
        for key in keys:
            if self.data.get(key) is not None:
                return self.count(key)
        raise InputError(self.at(keys[0]), None, "missing from the config (also looked for " + ", ".join(keys[1:]) + ")")

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError(self.at(key), value, "must be true or false")
        return value

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError(self.at(key), value, "must be a string")
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise InputError(self.at(key), value, "must be a list of integers")
        return value

    def obj(self, key: str) -> _Fields | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InputError(self.at(key), value, "must be a JSON object")
        return _Fields(value, self.at(key))


# ---------------------------------------------------------------------------
# Architectures: one attention reader and one MLP reader each
# ---------------------------------------------------------------------------


def _gqa_attention(c: _Fields) -> AttentionShape:
    """Grouped-query attention: ``num_attention_heads``, ``num_key_value_heads``, ``head_dim`` (or ``d / h_q``)."""
    d = c.count("hidden_size")
    heads = c.count("num_attention_heads")
    kv_heads = c.count("num_key_value_heads")
    if heads % kv_heads:
        raise InputError(c.at("num_key_value_heads"), kv_heads, f"must divide num_attention_heads ({heads})")
    head_dim = c.count_or("head_dim", None)
    if head_dim is None:
        if d % heads:
            problem = f"missing, and hidden_size {d} is not a multiple of num_attention_heads {heads}"
            raise InputError(c.at("head_dim"), None, problem)
        head_dim = d // heads
    return AttentionShape(heads, kv_heads, head_dim, gqa_attention_params(d, heads, kv_heads, head_dim))


def _mla_attention(c: _Fields) -> AttentionShape:
    """Multi-head latent attention: one cached latent of ``kv_lora_rank + qk_rope_head_dim`` per token and layer.

    ``head_dim`` is the query-key width ``qk_nope_head_dim + qk_rope_head_dim``
    (values are ``v_head_dim`` wide, so ``4 L h_q head_dim`` overstates the
    prefill attention FLOPs, ``2 L h_q (d_qk + d_v)`` per query-key pair, by
    ``(d_qk - d_v) / (d_qk + d_v)``: 20 % for DeepSeek-V3).
    """
    heads = c.count("num_attention_heads")
    rank, rope, nope = c.count("kv_lora_rank"), c.count("qk_rope_head_dim"), c.count("qk_nope_head_dim")
    params = mla_attention_params(
        c.count("hidden_size"), heads, c.count_or("q_lora_rank", None), rank, nope, rope, c.count("v_head_dim")
    )
    return AttentionShape(heads, 1, nope + rope, params, kv_elements_per_token_per_layer=rank + rope)


def _dense_mlp(c: _Fields) -> MlpShape:
    """Every layer a gated MLP of width ``intermediate_size``."""
    return MlpShape(dense_layers=c.count("num_hidden_layers"), dense_width=c.count("intermediate_size"))


def _moe_mlp(c: _Fields, sparse: list[bool], experts_key: str, width_key: str, shared_width: int, gate: int) -> MlpShape:
    """MoE layers where ``sparse[i]``, dense ``intermediate_size`` MLPs elsewhere; router ``d n_e + gate``."""
    experts = c.count(experts_key)
    per_token = c.first_count(("num_experts_per_tok", "experts_per_token"))
    if per_token > experts:
        raise InputError(c.at("num_experts_per_tok"), per_token, f"exceeds the {experts} experts ({experts_key})")
    moe_layers = sum(sparse)
    dense_layers = len(sparse) - moe_layers
    return MlpShape(
        dense_layers=dense_layers,
        dense_width=c.count("intermediate_size") if dense_layers else 0,
        moe_layers=moe_layers,
        experts=experts,
        experts_per_token=per_token,
        expert_width=c.count(width_key),
        shared_width=shared_width,
        router_params_per_layer=c.count("hidden_size") * experts + gate,
    )


def _local_experts_mlp(c: _Fields) -> MlpShape:
    """Mixtral, gpt-oss, MiniMax-M2: every layer ``num_local_experts`` experts of width ``intermediate_size``, no
    shared expert (MiniMax-M2's ``shared_intermediate_size`` must be 0 or absent)."""
    shared = c.count_or("shared_intermediate_size", 0, minimum=0)
    if shared:
        raise InputError(c.at("shared_intermediate_size"), shared, "shared experts are not read for this architecture")
    return _moe_mlp(c, [True] * c.count("num_hidden_layers"), "num_local_experts", "intermediate_size", 0, 0)


def _qwen_moe_mlp(c: _Fields) -> MlpShape:
    """Qwen2/3-MoE: layer ``i`` is sparse unless listed in ``mlp_only_layers`` or ``(i + 1) % decoder_sparse_step``;
    Qwen2-MoE adds one shared expert of ``shared_expert_intermediate_size`` with a ``d x 1`` gate."""
    layers = c.count("num_hidden_layers")
    step = c.count_or("decoder_sparse_step", 1)
    dense_only = set(c.int_list("mlp_only_layers"))
    sparse = [i not in dense_only and (i + 1) % step == 0 for i in range(layers)]
    shared = c.count_or("shared_expert_intermediate_size", 0, minimum=0)
    gate = c.count("hidden_size") if shared else 0
    return _moe_mlp(c, sparse, "num_experts", "moe_intermediate_size", shared, gate)


def _deepseek_mlp(c: _Fields) -> MlpShape:
    """DeepSeek-V2/V3: layer ``i`` is sparse when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``;
    ``n_shared_experts`` shared experts of ``moe_intermediate_size`` each."""
    layers = c.count("num_hidden_layers")
    first = c.count_or("first_k_dense_replace", 0, minimum=0)
    freq = c.count_or("moe_layer_freq", 1)
    sparse = [i >= first and i % freq == 0 for i in range(layers)]
    shared = c.count_or("n_shared_experts", 0, minimum=0) * c.count("moe_intermediate_size")
    return _moe_mlp(c, sparse, "n_routed_experts", "moe_intermediate_size", shared, 0)


@dataclass(frozen=True)
class _Architecture:
    attention: Callable[[_Fields], AttentionShape]
    mlp: Callable[[_Fields], MlpShape]
    tied_by_default: bool = False
    """``tie_word_embeddings`` when the config omits it (the transformers config class default)."""


ARCHITECTURES: Mapping[str, _Architecture] = {
    "LlamaForCausalLM": _Architecture(_gqa_attention, _dense_mlp),
    "MistralForCausalLM": _Architecture(_gqa_attention, _dense_mlp),
    "Qwen2ForCausalLM": _Architecture(_gqa_attention, _dense_mlp),
    "Qwen3ForCausalLM": _Architecture(_gqa_attention, _dense_mlp),
    "GemmaForCausalLM": _Architecture(_gqa_attention, _dense_mlp, tied_by_default=True),
    "Gemma2ForCausalLM": _Architecture(_gqa_attention, _dense_mlp, tied_by_default=True),
    "Gemma3ForCausalLM": _Architecture(_gqa_attention, _dense_mlp, tied_by_default=True),
    "Phi3ForCausalLM": _Architecture(_gqa_attention, _dense_mlp),
    "MixtralForCausalLM": _Architecture(_gqa_attention, _local_experts_mlp),
    "Qwen2MoeForCausalLM": _Architecture(_gqa_attention, _qwen_moe_mlp),
    "Qwen3MoeForCausalLM": _Architecture(_gqa_attention, _qwen_moe_mlp),
    "DeepseekV2ForCausalLM": _Architecture(_mla_attention, _deepseek_mlp),
    "DeepseekV3ForCausalLM": _Architecture(_mla_attention, _deepseek_mlp),
    "GptOssForCausalLM": _Architecture(_gqa_attention, _local_experts_mlp),
    "MiniMaxM2ForCausalLM": _Architecture(_gqa_attention, _local_experts_mlp),
}
"""The ``architectures`` entries read, each a pair of readers (attention, MLP)."""


def _architecture_name(c: _Fields) -> str:
    value = c.data.get("architectures")
    name = value[0] if isinstance(value, list) and value else value
    if not isinstance(name, str) or name not in ARCHITECTURES:
        raise InputError(c.at("architectures"), value, "unsupported architecture; supported: " + ", ".join(ARCHITECTURES))
    return name


def model_shape(config: Mapping[str, Any], field: str = "hardware.model_config") -> ModelShape:
    """The :class:`ModelShape` of a parsed config.json; InputErrors name ``field.<key>``."""
    c = _Fields(config, field)
    name = _architecture_name(c)
    arch = ARCHITECTURES[name]
    return ModelShape(
        architecture=name,
        layers=c.count("num_hidden_layers"),
        hidden_size=c.count("hidden_size"),
        vocab_size=c.count("vocab_size"),
        tied_embeddings=c.flag("tie_word_embeddings", arch.tied_by_default),
        attention=arch.attention(c),
        mlp=arch.mlp(c),
    )


# ---------------------------------------------------------------------------
# Weight formats
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantisation:
    """A quantised checkpoint: its format and the parameter groups stored in it."""

    weight_format: str
    groups: frozenset[str]

    @property
    def bytes_per_param(self) -> float:
        return WEIGHT_FORMAT_BYTES[self.weight_format]


def checkpoint_dtype(config: Mapping[str, Any], field: str = "hardware.model_config") -> str:
    """The unquantised weights' format from ``torch_dtype`` (or ``dtype``): "bf16" or "fp16"; BF16 when absent."""
    c = _Fields(config, field)
    key = "torch_dtype" if config.get("torch_dtype") is not None else "dtype"
    value = config.get(key)
    if value is None:
        return _DEFAULT_DTYPE
    if not isinstance(value, str) or value not in CHECKPOINT_DTYPES:
        raise InputError(c.at(key), value, "unknown dtype; known: " + ", ".join(CHECKPOINT_DTYPES))
    return CHECKPOINT_DTYPES[value]


def _by_bits(q: _Fields, key: str, formats: Mapping[int, str]) -> str:
    bits = q.count(key)
    if bits not in formats:
        raise InputError(q.at(key), bits, "unsupported width; known: " + ", ".join(str(b) for b in formats))
    return formats[bits]


def _gptq_format(q: _Fields) -> str:
    return _by_bits(q, "bits", {4: "int4", 8: "int8"})


def _awq_format(q: _Fields) -> str:
    return _by_bits(q, "bits" if q.data.get("bits") is not None else "w_bit", {4: "int4"})


def _bitsandbytes_format(q: _Fields) -> str:
    if q.flag("load_in_4bit", False):
        return "int4"
    if q.flag("load_in_8bit", False):
        return "int8"
    raise InputError(q.at("load_in_4bit"), None, "bitsandbytes without load_in_4bit or load_in_8bit")


_COMPRESSED_TENSOR_FORMATS: Mapping[tuple[int, str], str] = {
    (8, "float"): "fp8",
    (8, "int"): "int8",
    (4, "int"): "int4",
    (4, "float"): "nvfp4",
}


def _compressed_tensors_format(q: _Fields) -> str:
    """compressed-tensors: every ``config_groups.<g>.weights`` must have the same ``(num_bits, type)``."""
    groups = q.obj("config_groups")
    if groups is None or not groups.data:
        raise InputError(q.at("config_groups"), None, "missing; compressed-tensors states its widths there")
    found = set()
    for key in groups.data:
        group = groups.obj(key)
        weights = group.obj("weights") if group is not None else None
        if weights is None:
            raise InputError(groups.at(key) + ".weights", None, "missing")
        found.add((weights.count("num_bits"), weights.text("type") or "int"))
    formats = {_COMPRESSED_TENSOR_FORMATS.get(bits_type) for bits_type in found}
    if None in formats or len(formats) != 1:
        known = ", ".join(f"{b}-bit {t}" for b, t in _COMPRESSED_TENSOR_FORMATS)
        raise InputError(q.at("config_groups"), sorted(found), f"needs one weight width of: {known}")
    return formats.pop()


_MODELOPT_FORMATS: Mapping[str, str] = {
    "FP8": "fp8",
    "FP8_PER_CHANNEL_PER_TOKEN": "fp8",
    "FP8_BLOCK_SCALES": "fp8",
    "NVFP4": "nvfp4",
    "W4A16_AWQ": "int4",
    "W4A8_AWQ": "int4",
    "W4A16_GPTQ": "int4",
    "INT8": "int8",
    "W8A16": "int8",
    "W8A8_SQ_PER_CHANNEL": "int8",
}


def _modelopt_format(q: _Fields) -> str:
    algo = q.text("quant_algo")
    if algo not in _MODELOPT_FORMATS:
        raise InputError(
            q.at("quant_algo"), algo,
            "unsupported ModelOpt algorithm (per-layer MIXED_PRECISION is not read: pass weight_bytes_per_param); "
            "known: " + ", ".join(_MODELOPT_FORMATS),
        )
    return _MODELOPT_FORMATS[algo]


QUANT_METHODS: Mapping[str, Callable[[_Fields], str]] = {
    "fp8": lambda q: "fp8",
    "fbgemm_fp8": lambda q: "fp8",
    "w8a8_fp8": lambda q: "fp8",
    "int8": lambda q: "int8",
    "w8a8": lambda q: "int8",
    "w8a8_int8": lambda q: "int8",
    "mxfp4": lambda q: "mxfp4",
    "awq": _awq_format,
    "gptq": _gptq_format,
    "bitsandbytes": _bitsandbytes_format,
    "compressed-tensors": _compressed_tensors_format,
    "modelopt": _modelopt_format,
}
"""``quantization_config.quant_method`` -> a reader of its weight format (a key of :data:`WEIGHT_FORMAT_BYTES`)."""


def _ignored_groups(q: _Fields) -> frozenset[str]:
    """Groups an ignore list keeps unquantised: any entry naming ``self_attn`` (``shared_expert``) keeps all attention
    (all shared experts) at the checkpoint dtype."""
    names = [str(entry) for key in _IGNORE_KEYS if isinstance(q.data.get(key), list) for entry in q.data[key]]
    return frozenset(group for marker, group in _IGNORE_MARKERS.items() if any(marker in n for n in names))


def _quantisation(q: _Fields) -> Quantisation:
    """The :class:`Quantisation` a ``quantization_config`` (or ModelOpt ``quantization``) block describes.

    The method is ``quant_method``; a block with only ``quant_algo`` is ModelOpt's.
    """
    method = q.text("quant_method") or ("modelopt" if q.data.get("quant_algo") is not None else None)
    if method not in QUANT_METHODS:
        raise InputError(q.at("quant_method"), method, "unknown quantisation method; known: " + ", ".join(QUANT_METHODS))
    weight_format = QUANT_METHODS[method](q)
    return Quantisation(weight_format, _METHOD_GROUPS.get(method, _QUANTISABLE) - _ignored_groups(q))


def mean_weight_bytes(counts: ParameterCounts, dtype: str, quant: Quantisation | None) -> float:
    """``sum_g P_g w_g / sum_g P_g``: the quantised groups at the format's width, the rest at the checkpoint dtype."""
    base = WEIGHT_FORMAT_BYTES[dtype]
    if quant is None:
        return base
    quantised = sum(counts.group(g) for g in quant.groups)
    return (quantised * quant.bytes_per_param + (counts.resident - quantised) * base) / counts.resident


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def _config_file(source: str | os.PathLike[str]) -> Path:
    """The file a path names: itself, or a folder's config.json."""
    path = Path(source)
    return path / CONFIG_FILE if path.is_dir() else path


def load_json_object(source: str | os.PathLike[str] | Mapping[str, Any], field: str) -> Mapping[str, Any]:
    """A JSON object from a file (at most :data:`MAX_CONFIG_BYTES`; a folder means its config.json) or a mapping."""
    if isinstance(source, Mapping):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(field, source, "must be a path to a config.json or a parsed JSON object")
    path = _config_file(source)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise InputError(field, str(path), f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise InputError(field, str(path), f"is larger than {MAX_CONFIG_BYTES / 1e6:g} MB; a config.json is a few kB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(field, str(path), f"is not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise InputError(field, str(path), f"is not a JSON object (found {type(data).__name__})")
    return data


def _sibling_quant_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> Path | None:
    """The ``hf_quant_config.json`` beside a ``config.json`` (or its folder), if there is one; a renamed
    ``<prefix>config.json`` (a model bundle's ``org--name_config.json``) pairs with ``<prefix>hf_quant_config.json``."""
    if isinstance(source, Mapping):
        return None
    path = _config_file(source)
    if not path.name.endswith(CONFIG_FILE):
        return None
    sibling = path.parent / (path.name[: -len(CONFIG_FILE)] + QUANT_CONFIG_FILE)
    return sibling if sibling.is_file() else None


def _read_quantisation(
    config: _Fields,
    source: str | os.PathLike[str] | Mapping[str, Any],
    quant_config: str | os.PathLike[str] | Mapping[str, Any] | None,
) -> Quantisation | None:
    """From config.json's ``quantization_config``, else from the ``quantization`` object of an hf_quant_config.json
    (``quant_config``, or the one beside the config.json); None: unquantised."""
    block = config.obj("quantization_config")
    if block is None:
        quant_config = _sibling_quant_config(source) if quant_config is None else quant_config
        if quant_config is None:
            return None
        qfield = f"{config.path}.{QUANT_CONFIG_FILE}"
        block = _Fields(load_json_object(quant_config, qfield), qfield).obj("quantization")
    return None if block is None else _quantisation(block)


def _default_name(
    source: str | os.PathLike[str] | Mapping[str, Any], config: Mapping[str, Any], architecture: str
) -> str:
    """The model folder's name for ``<model>/config.json``, the file's stem for another file, else the config's
    ``_name_or_path`` (last part), else the architecture."""
    if not isinstance(source, Mapping):
        path = _config_file(source)
        return path.parent.name if path.name == CONFIG_FILE and path.parent.name else path.stem
    given = config.get("_name_or_path")
    return Path(given).name if isinstance(given, str) and Path(given).name else architecture


def _weights_text(dtype: str, quant: Quantisation | None, mean_bytes: float) -> str:
    stored = dtype if quant is None else f"{quant.weight_format} ({', '.join(sorted(quant.groups))}), rest {dtype}"
    return f"weights {stored}, {mean_bytes:.3f} bytes/param"


def _describe(origin: str, shape: ModelShape, counts: ParameterCounts, weights: str) -> str:
    att, mlp = shape.attention, shape.mlp
    kv = "MLA latent" if att.kv_elements_per_token_per_layer is not None else f"{att.kv_heads} KV heads"
    experts = ""
    if mlp.moe_layers:
        experts = f", {mlp.experts} experts ({mlp.experts_per_token} per token) in {mlp.moe_layers} layers"
    return (
        f"{origin}: {shape.architecture}, {shape.layers} layers, {att.query_heads} query heads x {att.head_dim}, "
        f"{kv}{experts}; {counts.resident / 1e9:.2f}B params, {counts.active / 1e9:.2f}B active, counted from the "
        f"shapes (norms and biases left out); {weights}"
    )


def model_from_hf_config(
    path_or_mapping: str | os.PathLike[str] | Mapping[str, Any],
    *,
    name: str | None = None,
    field: str = "hardware.model_config",
    kv_dtype_bytes: int | None = None,
    weight_bytes_per_param: float | None = None,
    quant_config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> ModelSpec:
    """The :class:`ModelSpec` of a Hugging Face config.json (module docstring for every count).

    ``path_or_mapping`` is a config.json path, a model folder holding one, or
    the parsed object.  ``kv_dtype_bytes`` (e.g. 1 for an FP8 KV cache) is
    stored on the spec; None leaves the caller's default (BF16).
    ``weight_bytes_per_param`` replaces the width read from the checkpoint's
    dtype and quantisation (needed for per-layer mixed precision).
    ``quant_config`` is a ModelOpt hf_quant_config.json (path or object) for
    a config.json without ``quantization_config``; beside a config.json path
    it is found by itself.  Bad input raises :class:`InputError` naming
    ``field.<key>`` (``field`` alone for the file itself).
    """
    if kv_dtype_bytes is not None:
        check_positive_int("kv_dtype_bytes", kv_dtype_bytes)
    if weight_bytes_per_param is not None:
        check_positive_real("weight_bytes_per_param", weight_bytes_per_param)
    config = load_json_object(path_or_mapping, field)
    shape = model_shape(config, field)
    counts = parameter_counts(shape)
    if weight_bytes_per_param is not None:
        w, weights = float(weight_bytes_per_param), f"weights {weight_bytes_per_param:g} bytes/param (given)"
    else:
        dtype = checkpoint_dtype(config, field)
        quant = _read_quantisation(_Fields(config, field), path_or_mapping, quant_config)
        w = mean_weight_bytes(counts, dtype, quant)
        weights = _weights_text(dtype, quant, w)
    origin = str(path_or_mapping) if isinstance(path_or_mapping, (str, os.PathLike)) else "config.json object"
    mlp, att = shape.mlp, shape.attention
    return ModelSpec(
        name=name or _default_name(path_or_mapping, config, shape.architecture),
        layers=shape.layers,
        kv_heads=att.kv_heads,
        head_dim=att.head_dim,
        params_billion=counts.resident / 1e9,
        source=_describe(origin, shape, counts, weights),
        hidden_size=shape.hidden_size,
        intermediate_size=mlp.per_token_width,
        active_params_billion=counts.active / 1e9 if mlp.moe_layers else None,
        attention_heads=att.query_heads,
        kv_elements_per_token_per_layer=att.kv_elements_per_token_per_layer,
        experts=mlp.experts if mlp.moe_layers else None,
        experts_per_token=mlp.experts_per_token if mlp.moe_layers else None,
        architecture=shape.architecture,
        weight_bytes_per_param=w,
        kv_dtype_bytes=kv_dtype_bytes,
        tied_embedding_params_billion=counts.embedding / 1e9 if shape.tied_embeddings else None,
    )
