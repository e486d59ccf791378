#!/usr/bin/python3
"""Generate random Hugging Face-style GLM checkpoints for tests and benchmarks.

Writes a folder that a checkpoint reader cannot tell from a real one: config.json (the full field set of the
family), generation_config.json, tokenizer files copied from a fixture, and safetensors weights (one file, or N
shards plus model.safetensors.index.json).

Families (chosen by the preset):
  glm_moe_dsa  GLM-5.x: MLA + DSA indexer with IndexShare `indexer_types` (shared layers carry no indexer
               tensors); MTP layer `model.layers.{L}.*` with enorm/hnorm/eh_proj/shared_head.norm.
  glm4_moe     GLM-4.5/4.6/4.7: GQA with q/k/v biases and optional qk-norm; the MTP layer carries its own
               embed_tokens and shared_head.head.

Forms (the fixture layouts of test/fixtures/README.md):
  bf16              BF16 weights, router correction bias F32.
  fp8               official block FP8: F8_E4M3 weight + F32 weight_scale_inv per 128x128 block (a multiplier,
                    amax/448), for every linear except mlp.gate, indexer.weights_proj, eh_proj,
                    shared_head.head and lm_head.
  mxfp4             AMD Quark MXFP4: routed and shared experts of the main layers as uint8 [out, in/2]
                    (two E2M1, even element in the low nibble) + uint8 E8M0 weight_scale [out, in/32].
  mxfp4-routedonly  the same with shared experts kept BF16.

Quantized weights are the genuine quantization of the BF16 matrix the bf16 form would hold for the same seed
(tensor values depend only on --seed and the tensor name), with the rules the fixtures were produced with:
FP8 round-to-nearest-even with saturation at 448; MXFP4 Quark "even" scales and half-even elements saturating at
6. Neither writes a negative zero. --direct-mxfp4 writes random packed bytes and plausible random scales instead.

Weights are streamed: every header is computed from the shapes first, then each tensor is generated and written
in row chunks, so memory stays at a few chunk sizes even for the multi-GB glm5-width model.
Requires only numpy; run with /usr/bin/python3.
"""

import argparse
import copy
import json
import math
import os
import re
import shutil
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional

import numpy as np

from quant_formats import (E2M1_VALUES, FP8_BLOCK, MX_GROUP, f32_to_bf16_bits, fp8_block_quantize,
                           fp8_block_scales, mxfp4_quantize, round_to_bf16)

# --------------------------------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------------------------------

# Field sets and order of the fixture configs (test/fixtures/*/config.json); values are the tiny presets.
GLM5_TINY = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "dtype": "bfloat16",
    "eos_token_id": [2036, 2043, 2045],
    "pad_token_id": 2036,
    "first_k_dense_replace": 1,
    "head_dim": 16,
    "hidden_act": "silu",
    "hidden_size": 256,
    "index_head_dim": 32,
    "index_n_heads": 4,
    "index_topk": 64,
    "index_topk_freq": 2,
    "index_skip_topk_offset": 2,
    "index_topk_pattern": None,
    "indexer_types": ["full", "full", "shared", "full"],
    "index_share_for_mtp_iteration": False,
    "indexer_rope_interleave": True,
    "initializer_range": 0.02,
    "intermediate_size": 512,
    "kv_lora_rank": 64,
    "max_position_embeddings": 2048,
    "moe_intermediate_size": 128,
    "moe_layer_freq": 1,
    "moe_router_dtype": "float32",
    "n_group": 1,
    "n_routed_experts": 16,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 8,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 4,
    "num_key_value_heads": 8,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 128,
    "qk_head_dim": 48,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "rms_norm_eps": 1e-05,
    "rope_interleave": True,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "transformers_version": "5.8.1",
    "use_cache": True,
    "v_head_dim": 32,
    "vocab_size": 2048,
}

GLM45_TINY = {
    "architectures": ["Glm4MoeForCausalLM"],
    "model_type": "glm4_moe",
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": [2036, 2043, 2045],
    "pad_token_id": 2036,
    "first_k_dense_replace": 1,
    "head_dim": 32,
    "hidden_act": "silu",
    "hidden_size": 128,
    "initializer_range": 0.02,
    "intermediate_size": 256,
    "max_position_embeddings": 2048,
    "moe_intermediate_size": 64,
    "n_group": 1,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 8,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 3,
    "num_key_value_heads": 2,
    "num_nextn_predict_layers": 1,
    "partial_rotary_factor": 0.5,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.54.0",
    "use_cache": True,
    "use_qk_norm": True,
    "vocab_size": 2048,
}

# GLM-5 widths (GLM.md 2.1, GLM-5.2 rope/context from 2.2), two MoE layers.
GLM5_WIDTH = {
    "first_k_dense_replace": 0,
    "hidden_size": 6144,
    "index_head_dim": 128,
    "index_n_heads": 32,
    "index_topk": 2048,
    "index_topk_freq": 4,
    "index_skip_topk_offset": 3,
    "intermediate_size": 12288,
    "kv_lora_rank": 512,
    "max_position_embeddings": 1048576,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 64,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 2,
    "num_key_value_heads": 64,
    "q_lora_rank": 2048,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "rope_parameters": {"rope_theta": 8000000, "rope_type": "default"},
    "v_head_dim": 256,
    "vocab_size": 154880,
}

# A memory-bound model for benchmarks that must finish in minutes on 2 cores: GLM-5's MLA and indexer head
# sizes and top-k, 64 experts top-8 at hidden 2048, 8 layers (1 dense), the tiny fixtures' vocab and tokenizer.
GLM5_MID = {
    "first_k_dense_replace": 1,
    "hidden_size": 2048,
    "index_head_dim": 128,
    "index_n_heads": 32,
    "index_topk": 2048,
    "index_topk_freq": 4,
    "index_skip_topk_offset": 3,
    "intermediate_size": 4096,
    "kv_lora_rank": 512,
    "max_position_embeddings": 32768,
    "moe_intermediate_size": 768,
    "n_routed_experts": 64,
    "n_shared_experts": 1,
    "num_attention_heads": 16,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 8,
    "num_key_value_heads": 16,
    "q_lora_rank": 1024,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "v_head_dim": 256,
}

# name -> (base config, overrides, defaults for options the preset implies)
PRESETS = {
    "tiny": (GLM5_TINY, {}, {"form": "bf16", "direct_mxfp4": False, "quantize_mtp": False}),
    "tiny-glm45": (GLM45_TINY, {}, {"form": "bf16", "direct_mxfp4": False, "quantize_mtp": False}),
    "glm5-width": (GLM5_TINY, GLM5_WIDTH, {"form": "mxfp4", "direct_mxfp4": True, "quantize_mtp": True}),
    "mid": (GLM5_TINY, GLM5_MID, {"form": "bf16", "direct_mxfp4": True, "quantize_mtp": True}),
}

GENERATION_CONFIG = {
    "glm_moe_dsa": {"_from_model_config": True, "do_sample": True, "eos_token_id": None, "pad_token_id": None,
                    "temperature": 1.0, "top_p": 0.95, "transformers_version": "5.8.1"},
    "glm4_moe": {"_from_model_config": True, "eos_token_id": None, "pad_token_id": None,
                 "transformers_version": "4.54.0"},
}

# Quark quantization_config of the glm5-tiny-dev-mxfp4 fixture (amd/GLM-5.2-MXFP4 structure); `exclude` is
# filled per model.
QUARK_MX_SPEC = {
    "ch_axis": -1, "dtype": "fp4", "group_size": 32, "is_scale_quant": False, "mx_element_dtype": None,
    "observer_cls": "PerBlockMXObserver", "qscheme": "per_group", "round_method": "half_even",
    "scale_calculation_mode": "even", "scale_format": "e8m0", "scale_type": "float", "symmetric": None,
}


def quark_quantization_config(exclude: List[str]) -> dict:
    return {
        "algo_config": None,
        "exclude": exclude,
        "export": {"kv_cache_group": [], "min_kv_scale": 0.0, "pack_method": "reorder",
                   "weight_format": "real_quantized", "weight_merge_groups": None},
        "global_quant_config": {
            "bias": None,
            "input_tensors": dict(QUARK_MX_SPEC, is_dynamic=True),
            "output_tensors": None,
            "target_device": None,
            "weight": dict(QUARK_MX_SPEC, is_dynamic=False),
        },
        "kv_cache_quant_config": {},
        "layer_quant_config": {},
        "layer_type_quant_config": {},
        "quant_method": "quark",
        "quant_mode": "eager_mode",
        "softmax_quant_spec": None,
        "version": "0.11",
    }


def fp8_quantization_config(not_converted: List[str]) -> dict:
    return {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
            "weight_block_size": [FP8_BLOCK, FP8_BLOCK], "modules_to_not_convert": not_converted}


class UsageError(Exception):
    """A bad option or config value; reported by argparse as a usage error."""


def parse_override(text: str):
    """'key=value' or 'a.b=value' -> (path list, value); the value is JSON, or else a plain string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--set expects KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.split("."), value


def apply_overrides(cfg: dict, overrides: List[str]) -> set:
    """Applies --set values in place; returns the top-level keys set explicitly."""
    explicit = set()
    for text in overrides:
        path, value = parse_override(text)
        if path[0] in ("model_type", "architectures", "quantization_config"):
            raise UsageError(f"--set {path[0]} is not allowed: the preset and --form decide it")
        if path[0] not in cfg:
            print(f"note: {path[0]!r} is not a field of the {cfg['model_type']} config; adding it",
                  file=sys.stderr)
        node = cfg
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = value
        explicit.add(path[0])
    return explicit


def indexer_schedule(num_layers: int, freq: int, offset: int) -> List[str]:
    """GLM-5.2 IndexShare: layer i is full iff max(i - offset + 1, 0) % freq == 0 (GLM.md 2.2)."""
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(num_layers)]


def derive_fields(cfg: dict, explicit: set) -> None:
    """Recomputes fields that follow from others, unless --set gave them."""
    if cfg["model_type"] != "glm_moe_dsa":
        return
    if "qk_head_dim" not in explicit:
        cfg["qk_head_dim"] = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    if "head_dim" in cfg and "head_dim" not in explicit:
        cfg["head_dim"] = cfg["qk_rope_head_dim"]
    if "indexer_types" not in explicit:
        if cfg.get("index_topk_freq"):
            cfg["indexer_types"] = indexer_schedule(cfg["num_hidden_layers"], cfg["index_topk_freq"],
                                                    cfg.get("index_skip_topk_offset", 0))
        else:
            cfg["indexer_types"] = ["full"] * cfg["num_hidden_layers"]


def check_positive_ints(cfg: dict, keys: List[str]) -> None:
    for key in keys:
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise UsageError(f"config {key} must be a positive integer, got {value!r}")


def validate_config(cfg: dict) -> None:
    common = ["hidden_size", "vocab_size", "num_hidden_layers", "intermediate_size", "moe_intermediate_size",
              "n_routed_experts", "num_experts_per_tok", "num_attention_heads"]
    if "moe_layer_freq" in cfg:
        common.append("moe_layer_freq")
    if cfg["model_type"] == "glm_moe_dsa":
        check_positive_ints(cfg, common + ["q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                           "v_head_dim", "index_n_heads", "index_head_dim"])
        if cfg["qk_head_dim"] != cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]:
            raise UsageError("config qk_head_dim must equal qk_nope_head_dim + qk_rope_head_dim")
        kinds = cfg["indexer_types"]
        if len(kinds) != cfg["num_hidden_layers"] or any(k not in ("full", "shared") for k in kinds):
            raise UsageError(f"config indexer_types must list 'full'/'shared' for each of the "
                             f"{cfg['num_hidden_layers']} layers, got {kinds!r}")
        if kinds[0] != "full":
            raise UsageError("config indexer_types[0] must be 'full': layer 0 has no earlier indexer to share")
    else:
        check_positive_ints(cfg, common + ["head_dim", "num_key_value_heads"])
        if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
            raise UsageError("config num_attention_heads must be a multiple of num_key_value_heads")
    for key in ("first_k_dense_replace", "n_shared_experts", "num_nextn_predict_layers"):
        if not isinstance(cfg.get(key), int) or cfg[key] < 0:
            raise UsageError(f"config {key} must be a non-negative integer, got {cfg.get(key)!r}")
    if cfg["num_experts_per_tok"] > cfg["n_routed_experts"]:
        raise UsageError("config num_experts_per_tok exceeds n_routed_experts")


# --------------------------------------------------------------------------------------------------------------
# Model plan: one Param per stored tensor of the BF16 model
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Param:
    name: str            # tensor name, e.g. "model.layers.1.mlp.experts.0.gate_proj.weight"
    kind: str            # linear | embed | norm | bias | router_bias
    shape: tuple
    encoding: str = ""   # bf16 | f32 | fp8 | mxfp4 | mxfp4-direct (set by assign_encodings)
    mtp: bool = False    # belongs to an MTP layer

    @property
    def module(self) -> str:
        return self.name.rsplit(".", 1)[0]


def linear(name: str, out_dim: int, in_dim: int, mtp: bool) -> Param:
    return Param(f"{name}.weight", "linear", (out_dim, in_dim), mtp=mtp)


def norm(name: str, dim: int, mtp: bool) -> Param:
    return Param(f"{name}.weight", "norm", (dim,), mtp=mtp)


def mlp_params(prefix: str, hidden: int, inter: int, mtp: bool) -> List[Param]:
    return [linear(f"{prefix}.gate_proj", inter, hidden, mtp), linear(f"{prefix}.up_proj", inter, hidden, mtp),
            linear(f"{prefix}.down_proj", hidden, inter, mtp)]


def moe_params(cfg: dict, prefix: str, mtp: bool) -> List[Param]:
    hidden, inter, experts = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    params = [linear(f"{prefix}.mlp.gate", experts, hidden, mtp),
              Param(f"{prefix}.mlp.gate.e_score_correction_bias", "router_bias", (experts,), mtp=mtp)]
    for e in range(experts):
        params += mlp_params(f"{prefix}.mlp.experts.{e}", hidden, inter, mtp)
    if cfg["n_shared_experts"]:
        params += mlp_params(f"{prefix}.mlp.shared_experts", hidden, inter * cfg["n_shared_experts"], mtp)
    return params


def mla_params(cfg: dict, prefix: str, with_indexer: bool, mtp: bool) -> List[Param]:
    h, heads, q_rank, kv_rank = cfg["hidden_size"], cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    a = f"{prefix}.self_attn"
    params = [linear(f"{a}.q_a_proj", q_rank, h, mtp), norm(f"{a}.q_a_layernorm", q_rank, mtp),
              linear(f"{a}.q_b_proj", heads * (nope + rope), q_rank, mtp),
              linear(f"{a}.kv_a_proj_with_mqa", kv_rank + rope, h, mtp), norm(f"{a}.kv_a_layernorm", kv_rank, mtp),
              linear(f"{a}.kv_b_proj", heads * (nope + v), kv_rank, mtp), linear(f"{a}.o_proj", h, heads * v, mtp)]
    if with_indexer:
        ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]
        i = f"{a}.indexer"
        params += [linear(f"{i}.wq_b", ih * idim, q_rank, mtp), linear(f"{i}.wk", idim, h, mtp),
                   norm(f"{i}.k_norm", idim, mtp), Param(f"{i}.k_norm.bias", "bias", (idim,), mtp=mtp),
                   linear(f"{i}.weights_proj", ih, h, mtp)]
    return params


def gqa_params(cfg: dict, prefix: str, mtp: bool) -> List[Param]:
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    q_dim, kv_dim = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    a = f"{prefix}.self_attn"
    params = []
    for proj, dim in (("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)):
        params.append(linear(f"{a}.{proj}", dim, h, mtp))
        if cfg.get("attention_bias"):
            params.append(Param(f"{a}.{proj}.bias", "bias", (dim,), mtp=mtp))
    params.append(linear(f"{a}.o_proj", h, q_dim, mtp))
    if cfg.get("use_qk_norm"):
        params += [norm(f"{a}.q_norm", hd, mtp), norm(f"{a}.k_norm", hd, mtp)]
    return params


def is_moe_layer(cfg: dict, i: int) -> bool:
    return i >= cfg["first_k_dense_replace"] and i % cfg.get("moe_layer_freq", 1) == 0


def decoder_layer_params(cfg: dict, i: int, mtp: bool) -> List[Param]:
    prefix, h = f"model.layers.{i}", cfg["hidden_size"]
    if cfg["model_type"] == "glm_moe_dsa":
        full = mtp or cfg["indexer_types"][i] == "full"
        params = mla_params(cfg, prefix, full, mtp)
    else:
        params = gqa_params(cfg, prefix, mtp)
    params += [norm(f"{prefix}.input_layernorm", h, mtp), norm(f"{prefix}.post_attention_layernorm", h, mtp)]
    if mtp or is_moe_layer(cfg, i):
        params += moe_params(cfg, prefix, mtp)
    else:
        params += mlp_params(f"{prefix}.mlp", h, cfg["intermediate_size"], mtp)
    return params


def mtp_layer_params(cfg: dict, i: int) -> List[Param]:
    prefix, h, vocab = f"model.layers.{i}", cfg["hidden_size"], cfg["vocab_size"]
    params = [norm(f"{prefix}.enorm", h, True), norm(f"{prefix}.hnorm", h, True),
              linear(f"{prefix}.eh_proj", h, 2 * h, True), norm(f"{prefix}.shared_head.norm", h, True)]
    if cfg["model_type"] == "glm4_moe":  # GLM-4.x MTP layers carry their own copies (GLM.md 4.3)
        params += [Param(f"{prefix}.embed_tokens.weight", "embed", (vocab, h), mtp=True),
                   linear(f"{prefix}.shared_head.head", vocab, h, True)]
    return params + decoder_layer_params(cfg, i, True)


def model_params(cfg: dict) -> List[Param]:
    h, vocab, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    params = [Param("model.embed_tokens.weight", "embed", (vocab, h))]
    for i in range(layers):
        params += decoder_layer_params(cfg, i, False)
    for i in range(layers, layers + cfg["num_nextn_predict_layers"]):
        params += mtp_layer_params(cfg, i)
    return params + [norm("model.norm", h, False), linear("lm_head", vocab, h, False)]


# --------------------------------------------------------------------------------------------------------------
# Forms: which linears are quantized, and the matching quantization_config
# --------------------------------------------------------------------------------------------------------------

FP8_KEEP_SUFFIXES = ("mlp.gate", "indexer.weights_proj", "eh_proj", "shared_head.head")


def fp8_keeps_bf16(module: str) -> bool:
    return module == "lm_head" or module.endswith(FP8_KEEP_SUFFIXES)


def mxfp4_quantizes(param: Param, form: str, quantize_mtp: bool) -> bool:
    if param.mtp and not quantize_mtp:
        return False
    return ".mlp.experts." in param.name or (form == "mxfp4" and ".mlp.shared_experts." in param.name)


def assign_encodings(params: List[Param], form: str, direct: bool, quantize_mtp: bool) -> Optional[dict]:
    """Sets Param.encoding; returns the quantization_config for the form (None for bf16)."""
    kept = []
    for p in params:
        p.encoding = "f32" if p.kind == "router_bias" else "bf16"
        if p.kind != "linear":
            continue
        if form == "fp8":
            quantized = not fp8_keeps_bf16(p.module)
            p.encoding = "fp8" if quantized else "bf16"
        elif form.startswith("mxfp4"):
            quantized = mxfp4_quantizes(p, form, quantize_mtp)
            p.encoding = ("mxfp4-direct" if direct else "mxfp4") if quantized else "bf16"
        else:
            quantized = True
        if not quantized:
            kept.append(p.module)
    if form == "fp8":
        return fp8_quantization_config(sorted(kept))
    if form.startswith("mxfp4"):
        return quark_quantization_config(sorted(m for m in kept if m != "lm_head") + ["lm_head"])
    return None


def check_quantizable(params: List[Param]) -> None:
    for p in params:
        if p.encoding.startswith("mxfp4") and p.shape[1] % MX_GROUP:
            raise UsageError(f"{p.name}: MXFP4 needs an input width divisible by {MX_GROUP}, got {p.shape[1]}")


# --------------------------------------------------------------------------------------------------------------
# Tensor data: deterministic random sources, streamed in row chunks
# --------------------------------------------------------------------------------------------------------------

CHUNK_ELEMENTS = 1 << 22      # rows per chunk are a multiple of 128 holding about this many elements
NORM_JITTER = 0.02            # norms are 1 + N(0, NORM_JITTER)
E2M1_UNIFORM_RMS = math.sqrt(float(np.mean(E2M1_VALUES.astype(np.float64) ** 2)))
# Direct MXFP4 scales: the typical exponent, one step up in 3 of 16 blocks (as quantized N(0, std) blocks are).
SCALE_JITTER = np.array([0] * 13 + [1] * 3, np.int16)

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F8_E4M3": 1, "U8": 1}
# safetensors writes tensors by dtype (descending enum order), then name.
DTYPE_ORDER = {"F32": 0, "BF16": 1, "F8_E4M3": 2, "U8": 3}


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: tuple
    chunks: Callable[[], Iterator[np.ndarray]] = field(repr=False)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def chunk_rows(shape: tuple) -> int:
    if len(shape) == 1:
        return 1
    return max(FP8_BLOCK, CHUNK_ELEMENTS // shape[1] // FP8_BLOCK * FP8_BLOCK)


def source_chunks(param: Param, seed: int, std: float) -> Iterator[np.ndarray]:
    """float32 values of the unquantized tensor, in row chunks (a 1-D tensor is one chunk)."""
    rng = rng_for(seed, param.name)
    if len(param.shape) == 1:
        chunks = [param.shape]
    else:
        rows, cols = param.shape
        step = chunk_rows(param.shape)
        chunks = [(min(step, rows - r), cols) for r in range(0, rows, step)]
    for shape in chunks:
        x = rng.standard_normal(shape, dtype=np.float32)
        if param.kind == "norm":
            x = x * np.float32(NORM_JITTER) + np.float32(1)
        else:
            x *= np.float32(std)
        yield x


def bf16_source_chunks(param: Param, seed: int, std: float) -> Iterator[np.ndarray]:
    for x in source_chunks(param, seed, std):
        yield round_to_bf16(x)


def direct_mxfp4_chunks(name: str, seed: int, rows: int, cols: int, scale_byte: Optional[int]):
    """Random packed E2M1 bytes, or (given scale_byte) E8M0 scales of scale_byte or one step above."""
    rng = rng_for(seed, name)
    step = max(1, CHUNK_ELEMENTS // cols)
    for r in range(0, rows, step):
        n = min(step, rows - r) * cols
        raw = rng.bit_generator.random_raw(-(-n // 8)).view(np.uint8)[:n]
        if scale_byte is not None:
            raw = (scale_byte + SCALE_JITTER[raw & 15]).astype(np.uint8)
        yield raw.reshape(-1, cols)


def direct_scale_byte(std: float) -> int:
    """E8M0 byte whose scale makes uniformly random E2M1 codes have an RMS near std."""
    return int(round(math.log2(std / E2M1_UNIFORM_RMS))) + 127


def param_tensors(p: Param, seed: int, std: float) -> List[Tensor]:
    """The stored tensors of one parameter in its encoding (weight plus scale for quantized linears)."""
    if p.encoding == "bf16":
        return [Tensor(p.name, "BF16", p.shape,
                       lambda: (f32_to_bf16_bits(x) for x in source_chunks(p, seed, std)))]
    if p.encoding == "f32":
        return [Tensor(p.name, "F32", p.shape, lambda: source_chunks(p, seed, std))]
    out_dim, in_dim = p.shape
    if p.encoding == "fp8":
        scale_shape = (-(-out_dim // FP8_BLOCK), -(-in_dim // FP8_BLOCK))
        return [
            Tensor(p.name, "F8_E4M3", p.shape,
                   lambda: (fp8_block_quantize(w, fp8_block_scales(w)) for w in bf16_source_chunks(p, seed, std))),
            Tensor(p.name + "_scale_inv", "F32", scale_shape,
                   lambda: (fp8_block_scales(w) for w in bf16_source_chunks(p, seed, std))),
        ]
    packed_shape, scale_shape = (out_dim, in_dim // 2), (out_dim, in_dim // MX_GROUP)
    if p.encoding == "mxfp4":
        return [
            Tensor(p.name, "U8", packed_shape,
                   lambda: (mxfp4_quantize(w)[0] for w in bf16_source_chunks(p, seed, std))),
            Tensor(p.name + "_scale", "U8", scale_shape,
                   lambda: (mxfp4_quantize(w)[1] for w in bf16_source_chunks(p, seed, std))),
        ]
    assert p.encoding == "mxfp4-direct", p.encoding
    return [
        Tensor(p.name, "U8", packed_shape, lambda: direct_mxfp4_chunks(p.name, seed, *packed_shape, None)),
        Tensor(p.name + "_scale", "U8", scale_shape,
               lambda: direct_mxfp4_chunks(p.name + "_scale", seed, *scale_shape, direct_scale_byte(std))),
    ]


# --------------------------------------------------------------------------------------------------------------
# safetensors writing and sharding
# --------------------------------------------------------------------------------------------------------------


def natural_key(name: str):
    """Sort key that orders layer/expert numbers numerically and puts lm_head last."""
    parts = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]
    return (name.startswith("lm_head"), [(0, t) if isinstance(t, int) else (1, t) for t in parts])


def file_order(tensors: List[Tensor]) -> List[Tensor]:
    return sorted(tensors, key=lambda t: (DTYPE_ORDER[t.dtype], t.name))


def safetensors_header(tensors: List[Tensor]) -> bytes:
    header, offset = {}, 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + b" " * (-len(text) % 8)


def write_safetensors(path: str, tensors: List[Tensor], progress: Callable[[int], None]) -> int:
    """Streams the tensors into one safetensors file; returns its size in bytes."""
    tensors = file_order(tensors)
    header = safetensors_header(tensors)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        for t in tensors:
            written = 0
            for chunk in t.chunks():
                data = np.ascontiguousarray(chunk)
                f.write(memoryview(data).cast("B"))
                written += data.nbytes
            if written != t.nbytes:
                raise RuntimeError(f"internal error: {t.name} produced {written} bytes, expected {t.nbytes}")
            progress(written)
        return f.tell()


def split_shards(groups: List[List[Tensor]], count: int) -> List[List[Tensor]]:
    """Splits groups (a parameter's tensors stay together), in natural name order, into `count` shards of
    about equal size."""
    groups = sorted(groups, key=lambda g: natural_key(g[0].name))
    total = sum(t.nbytes for g in groups for t in g)
    shards: List[List[Tensor]] = [[] for _ in range(count)]
    start = 0
    for g in groups:
        shards[min(count - 1, start * count // max(total, 1))].extend(g)
        start += sum(t.nbytes for t in g)
    if any(not s for s in shards):
        raise UsageError(f"cannot fill {count} shards: some tensor groups are larger than 1/{count} of the model")
    return shards


def plan_files(groups: List[List[Tensor]], shards: int) -> List[tuple]:
    """(file name, tensors) for model.safetensors, or for each of the shards."""
    if shards == 1:
        return [("model.safetensors", [t for g in groups for t in g])]
    parts = split_shards(groups, shards)
    return [(f"model-{i + 1:05d}-of-{shards:05d}.safetensors", part) for i, part in enumerate(parts)]


def write_weights(out_dir: str, files: List[tuple], quiet: bool) -> List[tuple]:
    """Writes the planned files, plus model.safetensors.index.json for shards; returns (file, bytes) rows."""
    total = sum(t.nbytes for _, part in files for t in part)
    done, started = 0, time.time()
    last_report = started

    def progress(n: int) -> None:
        nonlocal done, last_report
        done += n
        if not quiet and time.time() - last_report > 10:
            last_report = time.time()
            print(f"  {done / 2**30:.2f} / {total / 2**30:.2f} GiB, {time.time() - started:.0f} s", file=sys.stderr)

    rows = [(name, write_safetensors(os.path.join(out_dir, name), part, progress)) for name, part in files]
    if len(files) > 1:
        weight_map = {t.name: name for name, part in files for t in part}
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        index_path = os.path.join(out_dir, "model.safetensors.index.json")
        write_json(index_path, index)
        rows.append(("model.safetensors.index.json", os.path.getsize(index_path)))
    return rows


# --------------------------------------------------------------------------------------------------------------
# Tokenizer, JSON files, command line
# --------------------------------------------------------------------------------------------------------------

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
EOS_TOKENS = ("<|endoftext|>", "<|user|>", "<|observation|>")   # GLM eos list; pad = <|endoftext|>


def default_tokenizer_dir() -> Optional[str]:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The bundled fixture first, then a fixtures folder beside the checkout (as test/lit.cfg.py looks).
    for candidate in (os.path.join(repo, "test", "fixtures", "glm5-tiny-dev"),
                      os.path.join(repo, "..", "shared", "fixtures", "glm5-tiny-dev")):
        if os.path.isfile(os.path.join(candidate, "tokenizer.json")):
            return os.path.normpath(candidate)
    return None


def tokenizer_ids(tokenizer_dir: str):
    """(largest token id, {special token content: id}) of a tokenizer.json."""
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    specials = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    ids = list(tok["model"]["vocab"].values()) + list(specials.values())
    return max(ids), specials


def set_special_ids(cfg: dict, explicit: set, tokenizer_dir: str) -> None:
    """Takes eos/pad ids from the tokenizer (unless --set) and checks the vocabulary covers the tokenizer."""
    max_id, specials = tokenizer_ids(tokenizer_dir)
    if max_id >= cfg["vocab_size"]:
        raise UsageError(f"vocab_size {cfg['vocab_size']} is smaller than the tokenizer in {tokenizer_dir} "
                         f"(largest id {max_id})")
    missing = [t for t in EOS_TOKENS if t not in specials]
    if missing and not {"eos_token_id", "pad_token_id"} <= explicit:
        raise UsageError(f"tokenizer in {tokenizer_dir} lacks {missing}; give eos_token_id and pad_token_id "
                         f"with --set")
    if "eos_token_id" not in explicit:
        cfg["eos_token_id"] = [specials[t] for t in EOS_TOKENS]
    if "pad_token_id" not in explicit:
        cfg["pad_token_id"] = specials[EOS_TOKENS[0]]
    eos = cfg["eos_token_id"] if isinstance(cfg["eos_token_id"], list) else [cfg["eos_token_id"]]
    for tid in eos + [cfg["pad_token_id"]]:
        if not isinstance(tid, int) or not 0 <= tid < cfg["vocab_size"]:
            raise UsageError(f"token id {tid!r} in eos_token_id/pad_token_id is outside the vocabulary")


def write_json(path: str, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)


def generation_config(cfg: dict) -> dict:
    gen = copy.deepcopy(GENERATION_CONFIG[cfg["model_type"]])
    gen["eos_token_id"], gen["pad_token_id"] = cfg["eos_token_id"], cfg["pad_token_id"]
    return gen


def prepare_out_dir(out_dir: str, force: bool) -> None:
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        if not force:
            raise UsageError(f"output folder {out_dir} is not empty (use --force to overwrite)")
        for name in os.listdir(out_dir):
            if name.endswith(".safetensors") or name == "model.safetensors.index.json":
                os.remove(os.path.join(out_dir, name))
    os.makedirs(out_dir, exist_ok=True)


EPILOG = """\
examples (run from the checkout; out/ is git-ignored):
  gen_checkpoint.py --out out/g5 --preset tiny                        # like test/fixtures/glm5-tiny-dev
  gen_checkpoint.py --out out/g5fp8 --preset tiny --form fp8 --sharded 2
  gen_checkpoint.py --out out/g45 --preset tiny-glm45 --set num_hidden_layers=5 --set use_qk_norm=false
  gen_checkpoint.py --out out/wide --preset glm5-width                # 20.5 GB (MTP experts MXFP4), ~2 min
  gen_checkpoint.py --out out/wide --preset glm5-width --no-mtp       # 14.8 GB
  gen_checkpoint.py --out out/mid --preset mid [--form mxfp4]         # memory-bound benchmark model, 5.0 GiB
  gen_checkpoint.py --out out/g5 --preset tiny --set rope_parameters.rope_theta=1e6

Same --seed and --set values give the same BF16 model in every form, so a quantized output can be checked
against the bf16 one (scripts/compare_checkpoint_layout.py --values).
"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created; must be empty unless --force)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                    help="sizes and family: tiny (glm_moe_dsa like fixtures/glm5-tiny-dev), tiny-glm45 "
                         "(glm4_moe like fixtures/glm45-tiny-random), glm5-width (GLM-5 widths, 2 MoE layers, "
                         "vocab 154880; defaults to --form mxfp4 --direct-mxfp4 --quantize-mtp), mid (memory-bound benchmark model: "
                         "hidden 2048, 8 layers, 64 experts top-8, GLM-5 MLA/indexer heads; ~5 GB BF16). "
                         "Default: tiny")
    ap.add_argument("--form", choices=["bf16", "fp8", "mxfp4", "mxfp4-routedonly"],
                    help="weight format (default: the preset's, bf16 except glm5-width)")
    ap.add_argument("--direct-mxfp4", action=argparse.BooleanOptionalAction, default=None,
                    help="MXFP4 forms: write random packed bytes and plausible scales instead of quantizing a "
                         "random BF16 matrix (fast; default on for glm5-width)")
    ap.add_argument("--quantize-mtp", action=argparse.BooleanOptionalAction, default=None,
                    help="MXFP4 forms: quantize the MTP layer's experts like the main layers' (amd/GLM-5.1 "
                         "style) instead of keeping the MTP layer BF16 (amd/GLM-5.2 style, the fixtures'). "
                         "Default on for glm5-width only, where BF16 MTP experts would add 19 GB")
    ap.add_argument("--no-mtp", action="store_true", help="omit the MTP layer (num_nextn_predict_layers = 0)")
    ap.add_argument("--sharded", type=int, default=1, metavar="N",
                    help="write N shards plus model.safetensors.index.json (default 1: one model.safetensors)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field; VALUE is JSON (a bare word is taken as a string); "
                         "a.b=VALUE sets a nested field. Repeatable")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--tokenizer-from", metavar="DIR",
                    help="folder with tokenizer.json (+ tokenizer_config.json) to copy; eos/pad ids come from it "
                         "(default: the glm5-tiny-dev fixture via ../shared/fixtures or test/fixtures)")
    ap.add_argument("--force", action="store_true", help="write into a non-empty output folder")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the config and the tensor count and size, write nothing")
    ap.add_argument("--quiet", action="store_true", help="print only errors")
    return ap


def resolve_options(args) -> None:
    """Fills preset defaults into args and rejects combinations that mean nothing."""
    defaults = PRESETS[args.preset][2]
    if args.form and not args.form.startswith("mxfp4"):
        for flag in ("direct_mxfp4", "quantize_mtp"):
            if getattr(args, flag):
                raise UsageError(f"--{flag.replace('_', '-')} applies only to the mxfp4 forms")
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.sharded < 1:
        raise UsageError("--sharded must be at least 1")
    if args.tokenizer_from is None:
        args.tokenizer_from = default_tokenizer_dir()
        if args.tokenizer_from is None:
            raise UsageError("no glm5-tiny-dev fixture found for the tokenizer; pass --tokenizer-from DIR")
    if not os.path.isfile(os.path.join(args.tokenizer_from, "tokenizer.json")):
        raise UsageError(f"--tokenizer-from {args.tokenizer_from}: no tokenizer.json there")


def build_config(args) -> dict:
    base, overrides, _ = PRESETS[args.preset]
    cfg = copy.deepcopy(base)
    cfg.update(copy.deepcopy(overrides))
    explicit = apply_overrides(cfg, args.set)
    if args.no_mtp:
        cfg["num_nextn_predict_layers"] = 0
    derive_fields(cfg, explicit)
    validate_config(cfg)
    set_special_ids(cfg, explicit, args.tokenizer_from)
    return cfg


def generate(args) -> None:
    started = time.time()
    cfg = build_config(args)
    params = model_params(cfg)
    quant = assign_encodings(params, args.form, args.direct_mxfp4, args.quantize_mtp)
    check_quantizable(params)
    if quant is not None:
        cfg["quantization_config"] = quant
    std = float(cfg.get("initializer_range", 0.02))
    groups = [param_tensors(p, args.seed, std) for p in params]
    files = plan_files(groups, args.sharded)
    if args.dry_run:
        data = sum(t.nbytes for g in groups for t in g)
        print(json.dumps(cfg, indent=2))
        print(f"{cfg['model_type']} {args.form}: {sum(len(g) for g in groups)} tensors, {data:,} bytes of weights "
              f"({data / 2**30:.2f} GiB)")
        return

    prepare_out_dir(args.out, args.force)
    write_json(os.path.join(args.out, "config.json"), cfg)
    write_json(os.path.join(args.out, "generation_config.json"), generation_config(cfg))
    for name in TOKENIZER_FILES:
        src = os.path.join(args.tokenizer_from, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(args.out, name))
    rows = write_weights(args.out, files, args.quiet)

    if not args.quiet:
        tensors = sum(len(g) for g in groups)
        data = sum(t.nbytes for g in groups for t in g)
        for name, size in rows:
            print(f"  {name}: {size:,} bytes")
        print(f"wrote {args.out}: {cfg['model_type']} {args.form}, {tensors} tensors, {data:,} bytes of weights "
              f"({data / 2**30:.2f} GiB), {time.time() - started:.1f} s")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        resolve_options(args)
        generate(args)
    except UsageError as e:
        parser.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
