// RUN: kiln-opt %s | FileCheck %s
// The plan level round-trips through the parser, the printer and the
// verifier (which checks every dispatch against Kernels.td).
// RUN: kiln-opt %s | kiln-opt | FileCheck %s

// CHECK: kiln_plan.weight @w0 dense "embed" bf16 shape [16, 8]
kiln_plan.weight @w0 dense "embed" bf16 shape [16, 8]
// CHECK: kiln_plan.weight @w1 mxfp4_quant "experts.{e}.up" f4E2M1FN shape [4, 8, 32] {experts = 4 : i64, experts_from = 4 : i64, floor}
kiln_plan.weight @w1 mxfp4_quant "experts.{e}.up" f4E2M1FN shape [4, 8, 32] {experts = 4 : i64, experts_from = 4 : i64, floor}
// CHECK: kiln_plan.weight @w2 fp8_block "proj" f8E4M3FN shape [256, 256] {scales = "proj_scale_inv"}
kiln_plan.weight @w2 fp8_block "proj" f8E4M3FN shape [256, 256] {scales = "proj_scale_inv"}
// An FP8 (or Quark MXFP4) source dequantized to f32 at compile time:
// dense with its scales.
// CHECK: kiln_plan.weight @w2f dense "proj" f32 shape [64, 256] {scales = "proj_scale_inv", slice = array<i64: 0, 64>}
kiln_plan.weight @w2f dense "proj" f32 shape [64, 256] {scales = "proj_scale_inv", slice = array<i64: 0, 64>}
// Kiln's MXFP4 of a float source stored as f32, a slice inside a block.
// CHECK: kiln_plan.weight @w2m mxfp4_dequant "up" f32 shape [64, 16] {slice = array<i64: 1, 16>}
kiln_plan.weight @w2m mxfp4_dequant "up" f32 shape [64, 16] {slice = array<i64: 1, 16>}
// CHECK: kiln_plan.weight @w3 mxfp4_raw "o" f4E2M1FN shape [256, 128] {scales = "o_scale", slice = array<i64: 1, 128>}
kiln_plan.weight @w3 mxfp4_raw "o" f4E2M1FN shape [256, 128] {scales = "o_scale", slice = array<i64: 1, 128>}
// CHECK: kiln_plan.cache @l0.latent width 8 owner "main" : bf16
kiln_plan.cache @l0.latent width 8 owner "main" : bf16

// CHECK-LABEL: kiln_plan.plan @decode
kiln_plan.plan @decode {
  // CHECK: %[[IDS:.*]] = kiln_plan.buffer tokens "token_ids" input row [] i32
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %seq = kiln_plan.buffer tokens "seq_ids" input row [] i32
  %pos = kiln_plan.buffer tokens "positions" input row [] i32
  %rows = kiln_plan.buffer selected "logit_rows" input row [] i32
  // CHECK: %[[H:.*]] = kiln_plan.buffer tokens "t4" row [8] f32
  %h = kiln_plan.buffer tokens "t4" row [8] f32
  %q = kiln_plan.buffer tokens "t5" row [2, 4] f32
  %l = kiln_plan.buffer selected "logits" row [16] f32
  %s = kiln_plan.buffer selected "t7" row [8] f32
  // CHECK: kiln_plan.dispatch embedding(%[[IDS]], @w0, %[[H]])
  kiln_plan.dispatch embedding(%ids, @w0, %h)
  // CHECK: kiln_plan.dispatch kv_append(@l0.latent, %{{.*}}, %{{.*}}, %[[H]])
  kiln_plan.dispatch kv_append(@l0.latent, %seq, %pos, %h)
  // CHECK: kiln_plan.dispatch rms_norm(%[[H]], @w0, %{{.*}}) {eps = 9.99999974E-6 : f32}
  kiln_plan.dispatch rms_norm(%h, @w0, %q) {eps = 1.0e-05 : f32}
  kiln_plan.dispatch take_rows(%h, %rows, %s)
  // CHECK: kiln_plan.dispatch matmul(%{{.*}}, @w0, %{{.*}}) attributes {note = "head"}
  kiln_plan.dispatch matmul(%s, @w0, %l) attributes {note = "head"}
  // CHECK: kiln_plan.return %{{.*}}, %[[H]]
  kiln_plan.return %l, %h
}

// GPU launches as kiln-lower-gpu-launches writes them: every argument part,
// a grid axis over another argument's rows, scratch triples.
// CHECK-LABEL: kiln_plan.plan @gpu
kiln_plan.plan @gpu {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // CHECK: kiln_plan.dispatch add(%{{.*}}, %{{.*}}, %{{.*}}) attributes {gpu_launches = [#kiln_plan.launch<"kiln_binary_op0_c8_bc0_w4", grid [(8, 0, 1024) of 1, (0, 1, 1), (0, 1, 1)], args [data 0, scales 1, scratch 0, rows, cache_capacity, raw_data 1, raw_scales 1, rows_of 2]>, #kiln_plan.launch<"kiln_softmax_c8", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [scratch 1, data 2]>], gpu_scratch = array<i64: 32, 0, 0, 0, 64, 4>}
  kiln_plan.dispatch add(%a, %b, %b) attributes {gpu_launches = [#kiln_plan.launch<"kiln_binary_op0_c8_bc0_w4", grid [(8, 0, 1024) of 1, (0, 1, 1), (0, 1, 1)], args [data 0, scales 1, scratch 0, rows, cache_capacity, raw_data 1, raw_scales 1, rows_of 2]>, #kiln_plan.launch<"kiln_softmax_c8", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [scratch 1, data 2]>], gpu_scratch = array<i64: 32, 0, 0, 0, 64, 4>}
  kiln_plan.return %b
}

// A row gather under data-parallel attention has no launch: the device
// communicator runs it (RCCL's all-gather-v).
// CHECK-LABEL: kiln_plan.plan @gather
kiln_plan.plan @gather {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer gathered "g1" row [8] f32
  // CHECK: kiln_plan.dispatch all_gather_rows(%{{.*}}, %{{.*}}) {group = 1 : i64} attributes {gpu_launches = []}
  kiln_plan.dispatch all_gather_rows(%a, %b) {group = 1 : i64} attributes {gpu_launches = []}
  kiln_plan.return %b
}
