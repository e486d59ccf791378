// RUN: kiln-opt %s -kiln-lower-gpu-launches | FileCheck %s
// The launches print and parse back unchanged.
// RUN: kiln-opt %s -kiln-lower-gpu-launches | kiln-opt | FileCheck %s
// Without the cpu target a dispatch no GPU kernel covers is an error at the
// dispatch.
// RUN: not kiln-opt %s -kiln-lower-gpu-launches='targets=gfx950' 2>&1 | FileCheck %s --check-prefix=NOCPU
// RUN: not kiln-opt %s -kiln-lower-gpu-launches='targets=cpu,gfx1100' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kiln-opt %s -kiln-lower-gpu-launches='targets=cpu' 2>&1 | FileCheck %s --check-prefix=NOGPU

kiln_plan.weight @w0 dense "embed" bf16 shape [16, 64]
kiln_plan.weight @w1 dense "norm" f32 shape [64]
kiln_plan.weight @w2 mxfp4_quant "q" f4E2M1FN shape [128, 64]
kiln_plan.weight @w3 dense "o" bf16 shape [64, 128]
kiln_plan.weight @w4 dense "p" f32 shape [3, 64]
kiln_plan.plan @decode {
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %a = kiln_plan.buffer tokens "t1" row [64] f32
  %b = kiln_plan.buffer tokens "t2" row [64] f32
  %c = kiln_plan.buffer tokens "t3" row [128] f32
  %d = kiln_plan.buffer tokens "t4" row [64] f32
  %e = kiln_plan.buffer tokens "t5" row [64] f32
  %g = kiln_plan.buffer gathered "t6" row [64] f32
  %f = kiln_plan.buffer tokens "t7" row [3] f32
  // CHECK: dispatch embedding(%{{.*}}, @w0, %{{.*}}) attributes {gpu_launches = [#kiln_plan.launch<"kiln_embedding_h64_v16_dt1", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.dispatch embedding(%ids, @w0, %a)
  // CHECK: dispatch rms_norm({{.*}}) {eps = {{.*}}} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c64_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32}
  // An MXFP4 weight a matmul reads gets the GPU layout copy: its scales
  // are an argument. Decode keeps one M tile.
  // CHECK: dispatch matmul(%{{.*}}, @w2, %{{.*}}) attributes {gpu_launches = [#kiln_plan.launch<"kiln_mx_gemm_n128_k64_t1x4", grid [(0, 2, 1), (1, 0, 16), (0, 1, 1)], args [data 0, data 1, scales 1, data 2, rows]>]}
  kiln_plan.dispatch matmul(%b, @w2, %c)
  // CHECK: dispatch matmul(%{{.*}}, @w3, %{{.*}}) attributes {gpu_launches = [#kiln_plan.launch<"kiln_bf16_gemm_n64_k128_t1x4"
  kiln_plan.dispatch matmul(%c, @w3, %d)
  // A residual add is the binary kernel, its rows those of the full operand.
  // CHECK: dispatch add({{.*}}) attributes {gpu_launches = [#kiln_plan.launch<"kiln_binary_op0_c64_bc0_w4", grid [(64, 0, 1024) of 0, (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2, rows_of 0]>]}
  kiln_plan.dispatch add(%d, %a, %e)
  // An all-reduce is the communicator's gather and the rank-order sum, whose
  // arguments the communicator passes; the grid covers the row's elements.
  // CHECK: dispatch all_reduce({{.*}}) {group = 2 : i64} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rank_sum_w4", grid [(64, 0, 1024), (0, 1, 1), (0, 1, 1)], args []>]}
  kiln_plan.dispatch all_reduce(%e, %a) {group = 2 : i64}
  // Data-parallel attention's row exchanges: the gather is the
  // communicator's alone (no launch); the scatter's parts are added by the
  // rank-order sum, as the all-reduce's.
  // CHECK: dispatch all_gather_rows({{.*}}) {group = 1 : i64} attributes {gpu_launches = []}
  kiln_plan.dispatch all_gather_rows(%a, %g) {group = 1 : i64}
  // CHECK: dispatch reduce_scatter_rows({{.*}}) {group = 1 : i64} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rank_sum_w4", grid [(64, 0, 1024), (0, 1, 1), (0, 1, 1)], args []>]}
  kiln_plan.dispatch reduce_scatter_rows(%g, %b) {group = 1 : i64}
  // No GPU kernel (an f32 weight): the dispatch keeps no launches and runs
  // on the CPU.
  // CHECK: dispatch matmul(%{{.*}}, @w4, %{{.*}}){{$}}
  // NOCPU: error: plan 'decode' dispatch 8 (matmul) has no GPU kernel for its shapes and weights, and targets 'gfx950' have no cpu to run it: add cpu to --target
  // NOCPU-NOT: error
  kiln_plan.dispatch matmul(%a, @w4, %f)
  kiln_plan.return %a
}
// TARGET: error: target 'gfx1100': expected cpu, gfx950 or gfx942
// NOGPU: error: targets 'cpu' name no GPU: nothing to lower
