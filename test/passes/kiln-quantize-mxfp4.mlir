// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4 | FileCheck %s --check-prefix=EXPERTS
// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=experts,shared" | FileCheck %s --check-prefix=SHARED
// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=all rule=floor" | FileCheck %s --check-prefix=ALL
// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=dense,attention,mtp" | FileCheck %s --check-prefix=DAM
// RUN: not kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=experts,bogus" 2>&1 | FileCheck %s --check-prefix=BADPOLICY
// RUN: not kiln-opt %s -split-input-file -kiln-quantize-mxfp4="rule=nearest" 2>&1 | FileCheck %s --check-prefix=BADRULE

// BADPOLICY: error: unknown weight group in policy 'experts,bogus'
// BADRULE: error: unknown scale rule 'nearest'; expected even or floor

// One weight of every group; layer 4 is the MTP layer.
module attributes {kiln.num_hidden_layers = 4 : i64} {
func.func @groups(%x: tensor<?x64xf32>, %i: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x16xf32>) {
  %g = kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" : tensor<4x32x64xbf16>
  %u = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" : tensor<4x32x64xbf16>
  %d = kiln.weight "model.layers.1.mlp.experts.{e}.down_proj.weight" : tensor<4x64x32xbf16>
  %y = kiln.experts %x, %i, %w, %g, %u, %d : tensor<?x64xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<?x64xf32>
  %s = kiln.weight "model.layers.1.mlp.shared_experts.gate_proj.weight" : tensor<32x64xbf16>
  %ys = kiln.matmul %x, %s : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %dn = kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<32x64xbf16>
  %yd = kiln.matmul %x, %dn : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %a = kiln.weight "model.layers.0.self_attn.q_a_proj.weight" : tensor<32x64xbf16>
  %ya = kiln.matmul %x, %a : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %m = kiln.weight "model.layers.4.mlp.experts.{e}.gate_proj.weight" : tensor<4x32x64xbf16>
  %m2 = kiln.weight "model.layers.4.eh_proj.weight" : tensor<32x64xbf16>
  %ym = kiln.matmul %x, %m2 : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %lm = kiln.weight "lm_head.weight" : tensor<32x64xbf16>
  %yl = kiln.matmul %x, %lm : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  // Never quantized: the router gate, and weights whose K is not a multiple of 32.
  %r = kiln.weight "model.layers.1.mlp.gate.weight" : tensor<16x64xbf16>
  %yr = kiln.matmul %x, %r : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %odd = kiln.weight "model.layers.1.self_attn.o_proj.weight" : tensor<64x48xbf16>
  return %y, %ys, %yd, %ya, %ym, %yl, %yr : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x16xf32>
}
}

// EXPERTS-LABEL: func.func @groups
// EXPERTS: %[[V:.*]] = kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" encoding <mxfp4_values, even> : tensor<4x32x64xf4E2M1FN>
// EXPERTS: %[[S:.*]] = kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" encoding <mxfp4_scales, even> : tensor<4x32x2xf8E8M0FNU>
// EXPERTS: kiln.dequantize %[[V]], %[[S]] block [1, 32] : tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU> -> tensor<4x32x64xbf16>
// EXPERTS: encoding <mxfp4_scales, even> : tensor<4x64x1xf8E8M0FNU>
// EXPERTS: kiln.weight "model.layers.1.mlp.shared_experts.gate_proj.weight" : tensor<32x64xbf16>
// EXPERTS: kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<32x64xbf16>
// EXPERTS: kiln.weight "model.layers.0.self_attn.q_a_proj.weight" : tensor<32x64xbf16>
// The MTP layer's experts are not routed experts of the main model.
// EXPERTS: kiln.weight "model.layers.4.eh_proj.weight" : tensor<32x64xbf16>
// EXPERTS: kiln.weight "lm_head.weight" : tensor<32x64xbf16>
// EXPERTS: kiln.weight "model.layers.1.mlp.gate.weight" : tensor<16x64xbf16>

// SHARED-LABEL: func.func @groups
// SHARED: kiln.weight "model.layers.1.mlp.shared_experts.gate_proj.weight" encoding <mxfp4_values, even>
// SHARED: kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<32x64xbf16>

// ALL-LABEL: func.func @groups
// ALL: kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "model.layers.1.mlp.shared_experts.gate_proj.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "model.layers.0.mlp.gate_proj.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "model.layers.0.self_attn.q_a_proj.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "model.layers.4.eh_proj.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "lm_head.weight" encoding <mxfp4_values, floor>
// ALL: kiln.weight "model.layers.1.mlp.gate.weight" : tensor<16x64xbf16>

// DAM-LABEL: func.func @groups
// DAM: kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" : tensor<4x32x64xbf16>
// DAM: kiln.weight "model.layers.1.mlp.shared_experts.gate_proj.weight" : tensor<32x64xbf16>
// DAM: kiln.weight "model.layers.0.mlp.gate_proj.weight" encoding <mxfp4_values, even>
// DAM: kiln.weight "model.layers.0.self_attn.q_a_proj.weight" encoding <mxfp4_values, even>
// DAM: kiln.weight "model.layers.4.eh_proj.weight" encoding <mxfp4_values, even>
// DAM: kiln.weight "lm_head.weight" : tensor<32x64xbf16>

// -----

// Quark MXFP4 weights pass through; FP8 weights are re-quantized through
// exact dequantization of their block scales.
module attributes {kiln.num_hidden_layers = 4 : i64} {
// EXPERTS-LABEL: func.func @passthrough_and_fp8
// EXPERTS: %[[Q:.*]] = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" : tensor<4x32x64xf4E2M1FN>
// EXPERTS: kiln.dequantize %[[Q]], %{{.*}} block [1, 32]
// EXPERTS: %[[FV:.*]] = kiln.weight "model.layers.2.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_values, even> source_scale "model.layers.2.mlp.experts.{e}.up_proj.weight_scale_inv" : tensor<4x32x256xf4E2M1FN>
// EXPERTS: %[[FS:.*]] = kiln.weight "model.layers.2.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_scales, even> source_scale "model.layers.2.mlp.experts.{e}.up_proj.weight_scale_inv" : tensor<4x32x8xf8E8M0FNU>
// EXPERTS: kiln.dequantize %[[FV]], %[[FS]] block [1, 32] : {{.*}} -> tensor<4x32x256xbf16>
// EXPERTS-NOT: f8E4M3FN
func.func @passthrough_and_fp8(%x: tensor<?x64xf32>, %x2: tensor<?x256xf32>, %i: tensor<?x2xi32>, %w: tensor<?x2xf32>) -> (tensor<?x64xf32>, tensor<?x256xf32>) {
  %q = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" : tensor<4x32x64xf4E2M1FN>
  %s = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight_scale" : tensor<4x32x2xf8E8M0FNU>
  %u = kiln.dequantize %q, %s block [1, 32] : tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU> -> tensor<4x32x64xbf16>
  %d = kiln.weight "model.layers.1.mlp.experts.{e}.down_proj.weight" : tensor<4x64x32xbf16>
  %y = kiln.experts %x, %i, %w, %u, %u, %d : tensor<?x64xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<?x64xf32>
  %f8 = kiln.weight "model.layers.2.mlp.experts.{e}.up_proj.weight" : tensor<4x32x256xf8E4M3FN>
  %f8s = kiln.weight "model.layers.2.mlp.experts.{e}.up_proj.weight_scale_inv" : tensor<4x1x2xf32>
  %u2 = kiln.dequantize %f8, %f8s block [128, 128] : tensor<4x32x256xf8E4M3FN>, tensor<4x1x2xf32> -> tensor<4x32x256xbf16>
  %d2 = kiln.weight "model.layers.2.mlp.experts.{e}.down_proj.weight" : tensor<4x256x32xbf16>
  %y2 = kiln.experts %x2, %i, %w, %u2, %u2, %d2 : tensor<?x256xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<4x32x256xbf16>, tensor<4x32x256xbf16>, tensor<4x256x32xbf16> -> tensor<?x256xf32>
  return %y, %y2 : tensor<?x64xf32>, tensor<?x256xf32>
}
}

// -----

// GLM-5.x's MTP layer has no head of its own: the draft plan reads lm_head.
// Under `mtp` the draft's use is quantized (its own copy of the head) and
// the model's stays as it is; under `lm_head` the model's alone.
// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=mtp" | FileCheck %s --check-prefix=MTPHEAD
// RUN: kiln-opt %s -split-input-file -kiln-quantize-mxfp4="policy=lm_head" | FileCheck %s --check-prefix=LMHEAD
module attributes {kiln.num_hidden_layers = 4 : i64} {
func.func @decode(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %lm = kiln.weight "lm_head.weight" : tensor<32x64xbf16>
  %y = kiln.matmul %x, %lm : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
func.func @draft(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %lm = kiln.weight "lm_head.weight" : tensor<32x64xbf16>
  %y = kiln.matmul %x, %lm : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
}
// MTPHEAD-LABEL: func.func @decode
// MTPHEAD: kiln.weight "lm_head.weight" : tensor<32x64xbf16>
// MTPHEAD-LABEL: func.func @draft
// MTPHEAD: kiln.weight "lm_head.weight" encoding <mxfp4_values, even> : tensor<32x64xf4E2M1FN>
// MTPHEAD-NEXT: kiln.weight "lm_head.weight" encoding <mxfp4_scales, even>
// LMHEAD-LABEL: func.func @decode
// LMHEAD: kiln.weight "lm_head.weight" encoding <mxfp4_values, even> : tensor<32x64xf4E2M1FN>
// LMHEAD-LABEL: func.func @draft
// LMHEAD: kiln.weight "lm_head.weight" : tensor<32x64xbf16>
