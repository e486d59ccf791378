#!/usr/bin/env python3
"""A GPU-only artifact holds each weight once, in the layout GPUs read.

usage: check_gpu_only.py GPU_ONLY.json [CPU_AND_GPU.json]

Both files are `kiln-dump --weights` of one checkpoint compiled with
--target=gfx950,... (no cpu) and with cpu added. Checks: the GPU-only
artifact names no x86_64 target and reports no CPU bytes; every byte it
stores is one the GPU kernels read (no weight twice: no tensor has a
gpu_data copy, no CPU row panels); its MXFP4 matmul weights are Mxfp4Gpu
and exactly the weights that carry a GPU copy in the CPU-and-GPU artifact;
the GPU reads the same bytes from both artifacts, and the CPU-and-GPU one
stores its CPU bytes plus those GPU copies. Prints one line per check and
the cost of the CPU-and-GPU form; exit 1 on a failure. Without the second
file (a model too large to store in both forms), the checks of the GPU-only
artifact alone, and its MXFP4 matmul weights are counted.
"""
import json
import sys

gpu_only = json.load(open(sys.argv[1]))
both = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
failures = 0


def report(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += 0 if ok else 1


g = gpu_only["weights"]
if both is None:
    report("x86_64" not in gpu_only["targets"], "targets: %s" % gpu_only["targets"])
else:
    report("x86_64" not in gpu_only["targets"] and "x86_64" in both["targets"],
           "targets: %s vs %s" % (gpu_only["targets"], both["targets"]))
report("cpu" not in g["by_target"] and g["by_target"]["gpu"]["unreadable_weights"] == 0,
       "GPU-only by target: %s" % g["by_target"])
report(g["stored_bytes"] == g["by_target"]["gpu"]["bytes"] == g["bytes"],
       "GPU-only stores each weight once: %d bytes stored, %d read by the GPU"
       % (g["stored_bytes"], g["by_target"]["gpu"]["bytes"]))
tensors = {t["name"]: t for t in g["tensors"]}
report(not any("gpu_data" in t or "Panel4" in t["layout"] for t in tensors.values()),
       "no GPU-only tensor has a second copy or CPU row panels")
gpu_layout = sorted(n for n, t in tensors.items() if t["layout"] == "Mxfp4Gpu")
if both is None:
    report(gpu_layout and all(tensors[n]["dtype"] == "F4E2M1" for n in gpu_layout),
           "%d MXFP4 matmul weights: Mxfp4Gpu alone, %d bytes"
           % (len(gpu_layout), sum(tensors[n]["bytes"] for n in gpu_layout)))
    sys.exit(1 if failures else 0)
b = both["weights"]
copied = sorted(t["name"] for t in b["tensors"] if "gpu_data" in t)
report(copied and copied == gpu_layout,
       "%d MXFP4 matmul weights: Mxfp4Gpu alone, where the CPU-and-GPU "
       "artifact has a copy beside the checkpoint layout" % len(gpu_layout))
report(b["by_target"]["gpu"]["bytes"] == g["by_target"]["gpu"]["bytes"],
       "the GPU reads %d bytes from either artifact" % g["by_target"]["gpu"]["bytes"])
copies = sum(t["gpu_data"]["bytes"] + t["gpu_scales"]["bytes"]
             for t in b["tensors"] if "gpu_data" in t)
report(b["stored_bytes"] == b["by_target"]["cpu"]["bytes"] + copies,
       "CPU-and-GPU stores %d bytes = CPU %d + GPU copies %d (x%.2f the GPU-only)"
       % (b["stored_bytes"], b["by_target"]["cpu"]["bytes"], copies,
          b["stored_bytes"] / g["stored_bytes"]))
sys.exit(1 if failures else 0)
