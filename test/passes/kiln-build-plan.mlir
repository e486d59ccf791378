// RUN: kiln-opt %s -kiln-build-plan | FileCheck %s
// The plans round-trip and verify (every dispatch against Kernels.td).
// RUN: kiln-opt %s -kiln-build-plan | kiln-opt | FileCheck %s

// Weights are shared across plans (one @w per tensor and encoding) and
// declared before the plans, with the caches, in the order of first use.
// CHECK-NOT: func.func
// CHECK-NOT: kiln.kv_cache
// CHECK: kiln_plan.weight @w0 dense "embed" bf16 shape [16, 8]
// CHECK-NEXT: kiln_plan.cache @l0.latent width 8 owner "main" : bf16
// A rank-1 weight is stored as f32.
// CHECK-NEXT: kiln_plan.weight @w1 dense "norm" f32 shape [8]
// CHECK-NEXT: kiln_plan.weight @w2 dense "head" bf16 shape [16, 8]
// CHECK-NOT: kiln_plan.weight

// CHECK-LABEL: kiln_plan.plan @prefill
// CHECK: %[[IDS:.*]] = kiln_plan.buffer tokens "token_ids" input row [] i32
// CHECK: %[[SEQ:.*]] = kiln_plan.buffer tokens "seq_ids" input row [] i32
// CHECK: %[[POS:.*]] = kiln_plan.buffer tokens "positions" input row [] i32
// CHECK: %[[ROWS:.*]] = kiln_plan.buffer selected "logit_rows" input row [] i32
// One buffer per value, in the order they are first written; without
// kiln-reuse-buffers none is shared.
// CHECK: %[[H:.*]] = kiln_plan.buffer tokens "t4" row [8] f32
// CHECK: %[[X:.*]] = kiln_plan.buffer tokens "hidden" row [8] f32
// The reshape shares its input's buffer; silu's result has the reshaped rows.
// CHECK: %[[S:.*]] = kiln_plan.buffer tokens "t6" row [2, 4] f32
// take_rows' result has a row per selected logit row.
// CHECK: %[[SEL:.*]] = kiln_plan.buffer selected "t7" row [8] f32
// CHECK: %[[L:.*]] = kiln_plan.buffer selected "logits" row [16] f32
// CHECK: kiln_plan.dispatch embedding(%[[IDS]], @w0, %[[H]])
// CHECK: kiln_plan.dispatch kv_append(@l0.latent, %[[SEQ]], %[[POS]], %[[H]])
// CHECK: kiln_plan.dispatch rms_norm(%[[H]], @w1, %[[X]]) {eps = 9.99999974E-6 : f32}
// CHECK: kiln_plan.dispatch silu(%[[X]], %[[S]])
// CHECK: kiln_plan.dispatch take_rows(%[[X]], %[[ROWS]], %[[SEL]])
// CHECK: kiln_plan.dispatch matmul(%[[SEL]], @w2, %[[L]])
// CHECK: kiln_plan.return %[[L]], %[[X]]
// CHECK-LABEL: kiln_plan.plan @decode
// CHECK: kiln_plan.dispatch embedding(%{{.*}}, @w0, %{{.*}})
// CHECK-NOT: kiln_plan.plan @draft

kiln.kv_cache @l0.latent width 8 : bf16

func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x16xf32>, tensor<?x8xf32>) {
  %t = kiln.weight "embed" : tensor<16x8xbf16>
  %n = kiln.weight "norm" : tensor<8xbf16>
  %w = kiln.weight "head" : tensor<16x8xbf16>
  %h = kiln.embedding %t[%ids] : tensor<16x8xbf16>, tensor<?xi32> -> tensor<?x8xf32>
  kiln.kv_cache.append @l0.latent[%seq, %pos] = %h : tensor<?xi32>, tensor<?xi32>, tensor<?x8xf32>
  %x = kiln.rms_norm %h, %n eps 1.0e-05 : tensor<?x8xf32>, tensor<8xbf16> -> tensor<?x8xf32>
  %r = kiln.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xf32>
  %s = kiln.silu %r : tensor<?x2x4xf32>
  %sel = kiln.take_rows %x[%rows] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  %l = kiln.matmul %sel, %w : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  return %l, %x : tensor<?x16xf32>, tensor<?x8xf32>
}

func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %t = kiln.weight "embed" : tensor<16x8xbf16>
  %h = kiln.embedding %t[%ids] : tensor<16x8xbf16>, tensor<?xi32> -> tensor<?x8xf32>
  %sel = kiln.take_rows %h[%rows] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  return %sel, %h : tensor<?x8xf32>, tensor<?x8xf32>
}
