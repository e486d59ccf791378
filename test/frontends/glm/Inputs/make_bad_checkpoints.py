#!/usr/bin/env python3
"""Writes broken copies of a fixture checkpoint, one defect each.

usage: make_bad_checkpoints.py FIXTURE_DIR OUT_DIR
Each OUT_DIR/<case> is a checkpoint folder with exactly one problem.
"""
import json
import os
import shutil
import struct
import sys

src, out = sys.argv[1], sys.argv[2]


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def write_st(path, header, body):
    h = json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def case(name, config_edit=None, tensor_edit=None, raw_edit=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if config_edit:
        config_edit(cfg)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    header, body = read_st(os.path.join(src, "model.safetensors"))
    if tensor_edit:
        header, body = tensor_edit(header, body)
    write_st(os.path.join(d, "model.safetensors"), header, body)
    if raw_edit:
        raw_edit(os.path.join(d, "model.safetensors"))


def drop(name):
    def edit(h, b):
        del h[name]
        return h, b
    return edit


def reshape(name, shape):
    def edit(h, b):
        h[name]["shape"] = shape
        return h, b
    return edit


def retype(name, dtype):
    def edit(h, b):
        h[name]["dtype"] = dtype
        return h, b
    return edit


def truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 1000)


def set_model_type(cfg):
    cfg["model_type"] = "llama"


def quark_exclude_experts(cfg):
    cfg["quantization_config"]["exclude"].append("*experts*")


case("unknown-model-type", config_edit=set_model_type)
case("missing-tensor", tensor_edit=drop("model.layers.1.self_attn.o_proj.weight"))
# [512, 256] -> [512, 128] keeps the byte count consistent? No: the reader
# checks count x size = bytes first, so halve the byte range as well.
def wrong_shape(h, b):
    t = h["model.layers.0.mlp.up_proj.weight"]
    t["shape"] = [512, 128]
    begin, end = t["data_offsets"]
    t["data_offsets"] = [begin, begin + (end - begin) // 2]
    return h, b
case("wrong-shape", tensor_edit=wrong_shape)
def wrong_dtype(h, b):
    t = h["model.layers.0.input_layernorm.weight"]
    t["dtype"] = "I32"
    t["shape"] = [128]
    return h, b
case("wrong-dtype", tensor_edit=wrong_dtype)
case("truncated", raw_edit=truncate)
case("missing-config")
os.remove(os.path.join(out, "missing-config", "config.json"))

# The MXFP4 fixture with its config contradicting its tensors.
mx = os.path.join(os.path.dirname(src.rstrip("/")), "glm5-tiny-dev-mxfp4")
if os.path.isdir(mx):
    src = mx
    case("excluded-but-quantized", config_edit=quark_exclude_experts)
    # Experts stored as BF16 (taken from the BF16 fixture) while the config
    # says they are quantized.
    bf_header, bf_body = read_st(os.path.join(os.path.dirname(mx), "glm5-tiny-dev", "model.safetensors"))
    d = os.path.join(out, "quantized-but-bf16")
    os.makedirs(d, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(os.path.join(mx, f), d)
    write_st(os.path.join(d, "model.safetensors"), bf_header, bf_body)
