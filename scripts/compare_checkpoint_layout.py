#!/usr/bin/python3
"""Compare two Hugging Face checkpoint folders: tensor names, dtypes and shapes, and config.json fields.

With --values, B must hold the BF16 model that A quantizes (e.g. gen_checkpoint.py outputs with the same seed, or
fixtures/glm5-tiny-dev-fp8 against fixtures/glm5-tiny-dev): every FP8 or MXFP4 tensor of A is dequantized and
checked against B's BF16 tensor element by element, within half a step of the format at that magnitude; BF16 and
F32 tensors must be bit-identical. With --requantize, A's quantized bytes must also equal the quantization of
B's tensor by the codecs of scripts/quant_formats.py, byte for byte.

Exit status 0 when everything matches, 1 otherwise. Requires only numpy; run with /usr/bin/python3.
"""

import argparse
import glob
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_formats as qf  # noqa: E402

NUMPY_DTYPES = {"F32": np.float32, "BF16": np.uint16, "F8_E4M3": np.uint8, "U8": np.uint8}


def read_checkpoint(folder: str) -> dict:
    """name -> (dtype, shape, file, absolute data offset) for every tensor of the folder's safetensors files."""
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with open(path, "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if name in tensors:
                raise SystemExit(f"{folder}: tensor {name} appears in two files")
            start, end = info["data_offsets"]
            tensors[name] = (info["dtype"], tuple(info["shape"]), path, 8 + size + start, end - start)
    if not tensors:
        raise SystemExit(f"{folder}: no safetensors files")
    check_index(folder, tensors)
    return tensors


def check_index(folder: str, tensors: dict) -> None:
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.isfile(index_path):
        return
    with open(index_path) as f:
        index = json.load(f)
    mapped = {n: os.path.join(folder, fn) for n, fn in index["weight_map"].items()}
    actual = {n: t[2] for n, t in tensors.items()}
    if mapped != actual:
        raise SystemExit(f"{index_path}: weight_map does not match the shard contents")
    total = sum(t[4] for t in tensors.values())
    if index["metadata"]["total_size"] != total:
        raise SystemExit(f"{index_path}: total_size {index['metadata']['total_size']} != {total}")


def load_array(entry) -> np.ndarray:
    dtype, shape, path, offset, nbytes = entry
    data = np.fromfile(path, dtype=np.uint8, count=nbytes, offset=offset)
    return data.view(NUMPY_DTYPES[dtype]).reshape(shape)


def compare_layout(a: dict, b: dict) -> list:
    problems = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            problems.append(f"{name}: only in {'A' if name in a else 'B'}")
        elif a[name][:2] != b[name][:2]:
            problems.append(f"{name}: A {a[name][0]} {list(a[name][1])}, B {b[name][0]} {list(b[name][1])}")
    return problems


def compare_configs(dir_a: str, dir_b: str, show_values: bool, ignore=()) -> list:
    problems = []
    for fname in ("config.json", "generation_config.json"):
        with open(os.path.join(dir_a, fname)) as f:
            ca = json.load(f)
        with open(os.path.join(dir_b, fname)) as f:
            cb = json.load(f)
        for key in sorted((set(ca) | set(cb)) - set(ignore)):
            if key not in ca or key not in cb:
                problems.append(f"{fname}: field {key} only in {'A' if key in ca else 'B'}")
            elif show_values and ca[key] != cb[key]:
                print(f"  {fname}: {key}: A {json.dumps(ca[key])[:100]}, B {json.dumps(cb[key])[:100]}")
        if "quantization_config" not in ignore and ca.get("quantization_config") != cb.get("quantization_config"):
            problems.append(f"{fname}: quantization_config differs")
    return problems


def fp8_bound(reference: np.ndarray, scale_inv: np.ndarray) -> np.ndarray:
    """Half an E4M3 step at each element's magnitude: scale * max(|v| / 16, 2^-10)."""
    rows, cols = reference.shape
    full = np.repeat(np.repeat(scale_inv, qf.FP8_BLOCK, 0), qf.FP8_BLOCK, 1)[:rows, :cols]
    return full * np.maximum(np.abs(reference) / full / 16, 2.0 ** -10)


def mxfp4_bound(reference: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Half an E2M1 step at each element's magnitude (0.25 below 2, 0.5 below 4, else 1), times the scale."""
    rows = reference.shape[0]
    unit = np.repeat(np.ldexp(np.float32(1), scales.astype(np.int32) - 127), qf.MX_GROUP, 1)
    v = np.abs(reference) / unit
    return unit * np.where(v < 2, 0.25, np.where(v < 4, 0.5, 1.0)).reshape(rows, -1)


def check_values(a: dict, b: dict, requantize: bool) -> list:
    problems, stats = [], {}
    for name in sorted(a):
        dtype = a[name][0]
        if name.endswith(("_scale_inv", "_scale")):
            continue
        if name not in b:
            continue
        reference = load_array(b[name])
        if dtype in ("BF16", "F32"):
            if not np.array_equal(load_array(a[name]), reference):
                problems.append(f"{name}: {dtype} data differs")
            continue
        ref = qf.bf16_bits_to_f32(reference)
        codes = load_array(a[name])
        if dtype == "F8_E4M3":
            scale = load_array(a[name + "_scale_inv"])
            deq, bound = qf.fp8_dequantize(codes, scale), fp8_bound(ref, scale)
            expect = (qf.fp8_block_quantize(ref, qf.fp8_block_scales(ref)), qf.fp8_block_scales(ref))
        else:
            scale = load_array(a[name + "_scale"])
            deq, bound = qf.mxfp4_dequantize(codes, scale), mxfp4_bound(ref, scale)
            expect = qf.mxfp4_quantize(ref)
        err = np.abs(deq - ref)
        worst = float((err / bound).max())
        rel = float(np.sqrt(np.mean(err ** 2) / np.mean(ref ** 2)))
        s = stats.setdefault(dtype, [0, 0.0, 0.0])
        s[0], s[1], s[2] = s[0] + 1, max(s[1], worst), max(s[2], rel)
        if worst > 1 + 1e-6:
            problems.append(f"{name}: dequantized error {worst:.3f}x the half-step bound")
        if requantize and not (np.array_equal(codes, expect[0]) and np.array_equal(scale, expect[1])):
            problems.append(f"{name}: bytes differ from quant_formats' quantization of B")
    for dtype, (count, worst, rel) in sorted(stats.items()):
        print(f"  {dtype}: {count} tensors, worst error {worst:.3f} of the half-step bound, "
              f"worst relative RMS error {rel:.4f}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="checkpoint folder A (e.g. a generated one)")
    ap.add_argument("b", help="checkpoint folder B (e.g. a fixture, or the bf16 model A quantizes)")
    ap.add_argument("--values", action="store_true", help="check A's dequantized values against B's BF16 tensors")
    ap.add_argument("--requantize", action="store_true",
                    help="with --values: A's quantized bytes must equal quant_formats' quantization of B")
    ap.add_argument("--show-config", action="store_true", help="print config fields whose values differ")
    args = ap.parse_args(argv)
    a, b = read_checkpoint(args.a), read_checkpoint(args.b)
    # A quantized model and the BF16 model it quantizes differ in quantization_config only.
    ignore = ("quantization_config",) if args.values else ()
    problems = compare_configs(args.a, args.b, args.show_config, ignore)
    if args.values:
        problems += check_values(a, b, args.requantize)
    else:
        problems += compare_layout(a, b)
    for p in problems[:50]:
        print("MISMATCH", p)
    if len(problems) > 50:
        print(f"... {len(problems) - 50} more")
    print(f"{len(a)} tensors in A, {len(b)} in B: {'OK' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
