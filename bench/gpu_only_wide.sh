#!/usr/bin/env bash
# The synthetic GLM-5-width model (gen_checkpoint.py --preset glm5-width
# --no-mtp: GLM-5's widths, 2 MoE layers of 256 experts, 14.8 GB Quark MXFP4)
# as a GPU-only artifact, through the GPU IR interpreter: each weight stored
# once (kiln-dump byte counts, test/e2e/check_gpu_only.py), then a run of a
# 4-token prompt and N generated tokens on CHIP through the interpreter's HIP
# library, with its wall time and peak memory, then the same prompt on the
# CPU from a CPU artifact compiled after the GPU-only one is deleted (the
# disk need not hold both), and the two runs' last-position logits compared
# (test/e2e/compare_logits.py; gfx950 quantizes activations to MXFP4, so
# compare on gfx942).
#   bench/gpu_only_wide.sh WORKDIR [CHIP] [N]
# Needs about 30 GB free in WORKDIR and an hour on 2 cores.
set -euo pipefail
work=$1 chip=${2:-gfx942} n=${3:-1}
bin=${KILN_BIN:-build/bin}
interp=${KILN_INTERP_HIP:-build/lib/interp-hip/libinterp_amdhip64.so}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
ckpt=$work/glm5w
[[ -f $ckpt/model.safetensors ]] ||
  /usr/bin/python3 "$here/scripts/gen_checkpoint.py" --quiet --preset glm5-width --no-mtp --out "$ckpt"
timed() { # LOG COMMAND...: runs it under /usr/bin/time, prints wall and peak RSS
  local log=$1
  shift
  /usr/bin/time -f "%e s wall, %M KB peak RSS" -o "$log.time" "$@" >"$log" 2>&1
  echo "  $(cat "$log.time")"
}
echo "== GPU-only compile (--target=$chip)"
timed "$work/compile-gpu.log" "$bin/kiln-compile" "$ckpt" --target="$chip" -o "$work/gpu.kiln"
"$bin/kiln-dump" "$work/gpu.kiln" --weights >"$work/gpu.json"
/usr/bin/python3 "$here/test/e2e/check_gpu_only.py" "$work/gpu.json"
echo "== $chip through the interpreter: 4 prompt tokens, $n generated"
timed "$work/run-gpu.log" env KILN_HIP_LIBRARY="$interp" "$bin/kiln-run" "$work/gpu.kiln" --device=hip \
  --gpu-target="$chip" --prompt-ids 1,2,3,4 -n "$n" --dump-logits "$work/gpu.npy" --output-format=json
tail -1 "$work/run-gpu.log"
rm -f "$work/gpu.kiln"
echo "== CPU"
timed "$work/compile-cpu.log" "$bin/kiln-compile" "$ckpt" --target=cpu -o "$work/cpu.kiln"
timed "$work/run-cpu.log" "$bin/kiln-run" "$work/cpu.kiln" --prompt-ids 1,2,3,4 -n "$n" \
  --dump-logits "$work/cpu.npy" --output-format=json
tail -1 "$work/run-cpu.log"
rm -f "$work/cpu.kiln"
/usr/bin/python3 "$here/test/e2e/compare_logits.py" "$work/gpu.npy" "$work/cpu.npy" --tol 2e-2
