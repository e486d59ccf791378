// RUN: kiln-opt %s -kiln-estimate-cost="chip=gfx942 batch=2 context=99999" -o /dev/null | FileCheck %s
// With the GPU launches in the plan (kiln-lower-gpu-launches), each launch
// costs its 5 us: matmul 1, moe 5 (route, align, gate/up, down, combine),
// mla_attention 4 in a decode plan (absorb, attend split over the keys,
// merge the splits, up-project); and a dispatch whose widest launch has W
// workgroups runs at W / 304 of the MI300X's roofline: matmul 16 (1024 /
// 64 columns) -> 0.80 us x 19 + 5 = 20.1; moe gate/up 16 x ceil((2 x 2 +
// 120) / 16) = 128 -> 2.09 x 304 / 128 + 25 = 30.0; MLA attention 2 rows x
// 4 heads x 8 splits = 64 -> 6.04 x 304 / 64 + 20 = 48.7.
// RUN: kiln-opt %s -kiln-lower-gpu-launches -kiln-estimate-cost="chip=gfx942 batch=2 context=99999" -o /dev/null | FileCheck %s --check-prefix=LAUNCHES
// RUN: not kiln-opt %s -kiln-estimate-cost="chip=gfx1100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not kiln-opt %s -kiln-estimate-cost="plan=prefill" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: not kiln-opt %s -kiln-estimate-cost="batch=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BATCH

// Hand-computed, batch 2 on gfx942 (MI300X: 5.3 TB/s, 1307.4 TFLOP/s BF16,
// 5 us a launch):
//  matmul: W bf16 [1024, 2048] 4,194,304 B + x 2x2048x4 + out 2x1024x4 =
//    4,218,880 B (0.80 us at 5.3 TB/s) -> 5.8 us; 2x2x1024x2048 = 8.389 MFLOP.
//  moe: 8 experts, top 2, batch 2: 8 (1 - (6/8)^2) = 3.5 experts reached,
//    3.5 x 3 x 512x1024x2 B = 11,010,048 B + router f32 32,768 + bias 32 +
//    x and out 16,384 = 11,059,232 B (2.09 us) -> 7.1 us; routed 2x2x2x3x512x1024
//    = 12,582,912 FLOP on bf16-mfma, router 2x2x8x1024 = 32,768 on vector.
//  mla_attention: 4 heads, 100,000 keys (context 99,999 + 1, no top-k),
//    latent width 80 bf16: 2 x 100,000 x 160 = 32,000,000 B, kv_b bf16
//    [64, 64] 8,192 B, buffers 2x(32+64+32)x4 + seq and pos 16 = 1,040 B:
//    32,009,232 B (6.04 us); vector FLOPs 2x2x4 x (8x64 + 100,000x80 +
//    100,000x64 + 64x8) = 230,416,384 (1.41 us at 163.4 TFLOP/s) -> 11.0 us.

// CHECK: kiln-estimate-cost: plan @decode on gfx942 (MI300X), batch 2, context 99999: a roofline prediction, not a measurement
// CHECK: kernel            count       HBM MB        GFLOP      time us   share
// CHECK: matmul                1         4.22        0.008          5.8
// CHECK: mla_attention         1        32.01        0.230         11.0
// CHECK: moe                   1        11.06        0.013          7.1
// CHECK: flops by unit: bf16-mfma 0.021 GFLOP fp8-mfma 0.000 GFLOP mxfp4-mfma 0.000 GFLOP vector 0.230 GFLOP
// CHECK: step: 3 dispatches, 47.29 MB, predicted 23.9 us (15.0 us of it 3 launches)
// LAUNCHES: matmul                1         4.22        0.008         20.1
// LAUNCHES: mla_attention         1        32.01        0.230         48.7
// LAUNCHES: moe                   1        11.06        0.013         30.0
// LAUNCHES: step: 3 dispatches, 47.29 MB, predicted 98.8 us (50.0 us of it 10 launches)
// LAUNCHES: slowest dispatches:
// LAUNCHES-NEXT: 48.7 us  mla_attention {{.*}} (memory-bound, 32.01 MB, 0.230 GFLOP, 64 workgroups for 304 CUs)
// LAUNCHES-NEXT: 30.0 us  moe {{.*}}, 128 workgroups for 304 CUs)
// LAUNCHES-NEXT: 20.1 us  matmul {{.*}}, 16 workgroups for 304 CUs)
// CHECK: slowest dispatches:
// CHECK-NEXT: 11.0 us  mla_attention model.layers.2.self_attn.kv_b_proj.weight (memory-bound, 32.01 MB, 0.230 GFLOP)
// CHECK-NEXT: 7.1 us  moe model.layers.1.mlp.gate.weight (memory-bound, 11.06 MB, 0.013 GFLOP)
// CHECK-NEXT: 5.8 us  matmul model.layers.0.proj.weight (memory-bound, 4.22 MB, 0.008 GFLOP)

// CHIP: kiln-estimate-cost: unknown chip 'gfx1100' (the model knows gfx950 and gfx942)
// PLAN: kiln-estimate-cost: the module has no plan @prefill
// BATCH: kiln-estimate-cost: batch must be >= 1 and context >= 0

module {
  kiln_plan.weight @w0 dense "model.layers.0.proj.weight" bf16 shape [1024, 2048]
  kiln_plan.weight @w1 dense "model.layers.1.mlp.gate.weight" f32 shape [8, 1024]
  kiln_plan.weight @w2 dense "model.layers.1.mlp.gate.e_score_correction_bias" f32 shape [8]
  kiln_plan.weight @w3 dense "model.layers.1.mlp.experts.{e}.gate_proj.weight" bf16 shape [8, 512, 1024] {experts = 8 : i64}
  kiln_plan.weight @w4 dense "model.layers.1.mlp.experts.{e}.up_proj.weight" bf16 shape [8, 512, 1024] {experts = 8 : i64}
  kiln_plan.weight @w5 dense "model.layers.1.mlp.experts.{e}.down_proj.weight" bf16 shape [8, 1024, 512] {experts = 8 : i64}
  kiln_plan.weight @w6 dense "model.layers.2.self_attn.kv_b_proj.weight" bf16 shape [64, 64]
  kiln_plan.cache @layers.2.latent width 80 owner "main" : bf16
  kiln_plan.plan @decode {
    %0 = kiln_plan.buffer tokens "token_ids" input row [] i32
    %1 = kiln_plan.buffer tokens "seq_ids" input row [] i32
    %2 = kiln_plan.buffer tokens "positions" input row [] i32
    %3 = kiln_plan.buffer selected "logit_rows" input row [] i32
    %4 = kiln_plan.buffer tokens "t4" row [2048] f32
    %5 = kiln_plan.buffer tokens "t5" row [1024] f32
    %6 = kiln_plan.buffer tokens "t6" row [1024] f32
    %7 = kiln_plan.buffer tokens "t7" row [4, 8] f32
    %8 = kiln_plan.buffer tokens "t8" row [4, 16] f32
    %9 = kiln_plan.buffer tokens "t9" row [4, 8] f32
    kiln_plan.dispatch matmul(%4, @w0, %5)
    kiln_plan.dispatch moe(%5, @w1, @w2, @w3, @w4, @w5, none, none, none, %6) {top_k = 2 : i64, n_group = 1 : i64, topk_group = 1 : i64, norm_topk_prob = true, block_size = 16 : i64, scale = 1.0 : f32, expert_offset = 0 : i64, shared_own_rows = false}
    kiln_plan.dispatch mla_attention(%7, %8, @w6, @layers.2.latent, %1, %2, none, %9) {heads = 4 : i64, scale = 0.125 : f32}
    kiln_plan.return %6, %9
  }
}
