// RUN: kiln-opt %s -kiln-build-plan | FileCheck %s
// RUN: kiln-opt %s -kiln-build-plan | kiln-opt | FileCheck %s

// A kiln.moe lowers to one moe dispatch: x, router, bias, gate, up, down,
// the shared expert's three (absent: none), out. A kiln.block_scaled expert
// weight becomes one kiln_plan.weight of its values naming its scales; a
// float one a dense weight; the kiln.block_scaled ops make no dispatch.
// CHECK: kiln_plan.weight @w0 dense "embed" bf16 shape [16, 64]
// CHECK-NEXT: kiln_plan.weight @w1 dense "router" bf16 shape [4, 64]
// CHECK-NEXT: kiln_plan.weight @w2 dense "bias" f32 shape [4]
// CHECK-NEXT: kiln_plan.weight @w3 mxfp4_raw "gate.{e}" f4E2M1FN shape [4, 32, 64] {experts = 4 : i64, scales = "gate_scale.{e}"}
// CHECK-NEXT: kiln_plan.weight @w4 mxfp4_raw "up.{e}" f4E2M1FN shape [4, 32, 64] {experts = 4 : i64, scales = "up_scale.{e}"}
// CHECK-NEXT: kiln_plan.weight @w5 mxfp4_raw "down.{e}" f4E2M1FN shape [4, 64, 32] {experts = 4 : i64, scales = "down_scale.{e}"}
// CHECK-NEXT: kiln_plan.weight @w6 fp8_block "shared_gate" f8E4M3FN shape [128, 64] {scales = "shared_gate_scale"}
// CHECK-NEXT: kiln_plan.weight @w7 fp8_block "shared_down" f8E4M3FN shape [64, 128] {scales = "shared_down_scale"}
// CHECK-NEXT: kiln_plan.weight @w8 dense "e.{e}.gate" bf16 shape [2, 64, 64] {experts = 2 : i64, experts_from = 2 : i64}
// CHECK-NOT: kiln_plan.weight
// CHECK-LABEL: kiln_plan.plan @prefill
// CHECK-NEXT: kiln_plan.buffer
// CHECK-NOT: block_scaled
// CHECK: kiln_plan.dispatch embedding(
// CHECK-NEXT: kiln_plan.dispatch moe(%{{.*}}, @w1, @w2, @w3, @w4, @w5, @w6, @w6, @w7, %{{.*}}) {block_size = 16 : i64, expert_offset = 0 : i64, n_group = 1 : i64, norm_topk_prob = true, scale = 2.500000e+00 : f32, shared_own_rows = false, top_k = 2 : i64, topk_group = 1 : i64}
// CHECK-NEXT: kiln_plan.dispatch moe(%{{.*}}, @w1, @w2, @w8, @w8, @w8, none, none, none, %{{.*}}) {block_size = 16 : i64, expert_offset = 2 : i64
// CHECK-NEXT: kiln_plan.return
func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %t = kiln.weight "embed" : tensor<16x64xbf16>
  %x = kiln.embedding %t[%ids] : tensor<16x64xbf16>, tensor<?xi32> -> tensor<?x64xf32>
  %r = kiln.weight "router" : tensor<4x64xbf16>
  %b = kiln.weight "bias" : tensor<4xf32>
  %gq = kiln.weight "gate.{e}" : tensor<4x32x64xf4E2M1FN>
  %gs = kiln.weight "gate_scale.{e}" : tensor<4x32x2xf8E8M0FNU>
  %uq = kiln.weight "up.{e}" : tensor<4x32x64xf4E2M1FN>
  %us = kiln.weight "up_scale.{e}" : tensor<4x32x2xf8E8M0FNU>
  %dq = kiln.weight "down.{e}" : tensor<4x64x32xf4E2M1FN>
  %ds = kiln.weight "down_scale.{e}" : tensor<4x64x1xf8E8M0FNU>
  %sq = kiln.weight "shared_gate" : tensor<128x64xf8E4M3FN>
  %ss = kiln.weight "shared_gate_scale" : tensor<1x1xf32>
  %sdq = kiln.weight "shared_down" : tensor<64x128xf8E4M3FN>
  %sds = kiln.weight "shared_down_scale" : tensor<1x1xf32>
  %g = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>
  %u = kiln.block_scaled %uq, %us : !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>
  %d = kiln.block_scaled %dq, %ds : !kiln.block_scaled<tensor<4x64x32xf4E2M1FN>, tensor<4x64x1xf8E8M0FNU>, [1, 32]>
  %sg = kiln.block_scaled %sq, %ss : !kiln.block_scaled<tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, [128, 128]>
  %sd = kiln.block_scaled %sdq, %sds : !kiln.block_scaled<tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, [128, 128]>
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d shared %sg, %sg, %sd
         top_k 2 groups 1 keep 1 scale 2.5 norm block_size 16
         : (tensor<?x64xf32>, tensor<4x64xbf16>, tensor<4xf32>,
            !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x64x32xf4E2M1FN>, tensor<4x64x1xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, [128, 128]>,
            !kiln.block_scaled<tensor<128x64xf8E4M3FN>, tensor<1x1xf32>, [128, 128]>,
            !kiln.block_scaled<tensor<64x128xf8E4M3FN>, tensor<1x1xf32>, [128, 128]>) -> tensor<?x64xf32>
  %e = kiln.weight "e.{e}.gate" experts_from 2 : tensor<2x64x64xbf16>
  %z = kiln.moe %x router %r bias %b experts %e, %e, %e
         top_k 2 groups 1 keep 1 scale 2.5 norm block_size 16 local_experts_from 2
         : (tensor<?x64xf32>, tensor<4x64xbf16>, tensor<4xf32>, tensor<2x64x64xbf16>,
            tensor<2x64x64xbf16>, tensor<2x64x64xbf16>) -> tensor<?x64xf32>
  return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}
