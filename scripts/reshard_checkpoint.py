#!/usr/bin/python3
"""Re-shards a checkpoint folder: N safetensors shards + model.safetensors.index.json.

  reshard_checkpoint.py SRC_DIR OUT_DIR [--shards N]   (default 2)

Copies the top-level files of SRC_DIR except the weights (config.json, tokenizer files, ...; not sub-folders
such as golden/) and writes its tensors, byte for byte, into N shards split as scripts/gen_checkpoint.py splits
them (natural name order, about equal sizes; a weight and its scales stay in one shard). The tests make the
sharded form of a fixture with it instead of storing a second copy.
Requires only numpy; run with /usr/bin/python3.
"""

import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

from gen_checkpoint import DTYPE_BYTES, Tensor, plan_files, write_weights


def read_header(path: str):
    """(header dict without __metadata__, offset of the data section) of a safetensors file."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header, 8 + size


def source_tensors(src_dir: str):
    """The tensors of SRC_DIR (model.safetensors, or the shards its index lists), reading from the source."""
    index = os.path.join(src_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = []
    for name in files:
        path = os.path.join(src_dir, name)
        header, base = read_header(path)
        for tname, info in header.items():
            if info["dtype"] not in DTYPE_BYTES:
                sys.exit(f"reshard_checkpoint: {path}: {tname} has dtype {info['dtype']}, not one of "
                         f"{sorted(DTYPE_BYTES)}")
            begin, end = info["data_offsets"]

            def chunks(path=path, offset=base + begin, count=end - begin):
                yield np.fromfile(path, dtype=np.uint8, count=count, offset=offset)

            tensors.append(Tensor(tname, info["dtype"], tuple(info["shape"]), chunks))
    return tensors


def groups_of(tensors):
    """A weight and its scales (`x.weight`, `x.weight_scale`, `x.weight_scale_inv`) form one group."""
    groups = {}
    for t in tensors:
        groups.setdefault(re.sub(r"\.weight_scale(_inv)?$", ".weight", t.name), []).append(t)
    return list(groups.values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--shards", type=int, default=2)
    args = ap.parse_args(argv)
    if args.shards < 2:
        ap.error("--shards must be at least 2")
    os.makedirs(args.out, exist_ok=True)
    for name in sorted(os.listdir(args.src)):
        path = os.path.join(args.src, name)
        if os.path.isfile(path) and not name.endswith(".safetensors") and name != "model.safetensors.index.json":
            shutil.copyfile(path, os.path.join(args.out, name))
    write_weights(args.out, plan_files(groups_of(source_tensors(args.src)), args.shards), quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
