// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=4 rank=1" -verify-diagnostics | FileCheck %s
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=4 rank=1" | kiln-opt -split-input-file | FileCheck %s
// kiln-build-plan-slices.mlir has these weights at the plan level.

// MXFP4 weights whose 32-value blocks a rank's slice cuts: 64 intermediate
// columns over 4 ranks are 16 a rank, half a block. The rank reads them
// dequantized to f32, with one warning per weight: Kiln's own MXFP4
// (mxfp4_values / mxfp4_scales of a float source) as f32 with the
// mxfp4_values encoding (the artifact stores the values of the whole rows'
// quantization), Quark's raw values and E8M0 scales as raw f32 with
// source_scale. Slices on whole blocks keep MXFP4
// (kiln-partition-tensor.mlir).

// Kiln's MXFP4 experts: down's columns are cut, gate's and up's rows are
// not (blocks run along columns), but a kiln.moe takes its three expert
// weights in one form, so all three are read as f32.
// CHECK-LABEL: func.func @experts_kiln_mxfp4
// CHECK-DAG: %[[G:.*]] = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> slice [0, 16] : tensor<4x16x64xf32>
// CHECK-DAG: %[[D:.*]] = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> slice [1, 16] : tensor<4x64x16xf32>
// CHECK: kiln.moe %{{.*}} experts %[[G]], %{{.*}}, %[[D]] top_k
// CHECK-NOT: block_scaled
func.func @experts_kiln_mxfp4(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<4x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<4xf32>
  %gq = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> : tensor<4x64x64xf4E2M1FN>
  %gs = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_scales, even> : tensor<4x64x2xf8E8M0FNU>
  %g = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>
  %dq = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> : tensor<4x64x64xf4E2M1FN>
  %ds = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> : tensor<4x64x2xf8E8M0FNU>
  %d = kiln.block_scaled %dq, %ds : !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'l1.experts.{e}.gate' cuts its 32-value MXFP4 blocks}}
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'l1.experts.{e}.down' cuts its 32-value MXFP4 blocks; it is stored dequantized to f32 (4 bytes a value)}}
  %y = kiln.moe %x router %r bias %b experts %g, %g, %d
         top_k 2 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<4x64xbf16>, tensor<4xf32>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A dense SwiGLU MLP with Quark MXFP4 weights (raw values, raw E8M0
// scales): down's kiln.mx_matmul becomes a kiln.matmul on raw f32 with
// source_scale.
// CHECK-LABEL: func.func @mlp_quark_mxfp4
// CHECK: %[[D:.*]] = kiln.weight "d" source_scale "ds" slice [1, 16] : tensor<64x16xf32>
// CHECK: %[[P:.*]] = kiln.matmul %{{.*}}, %[[D]] : tensor<?x16xf32>, tensor<64x16xf32> -> tensor<?x64xf32>
// CHECK: kiln.all_reduce %[[P]] group 4
// CHECK-NOT: kiln.mx_matmul %{{.*}}, %{{.*}}, %{{.*}} block [1, 32] : tensor<?x16xf32>
func.func @mlp_quark_mxfp4(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = kiln.weight "g" : tensor<64x64xf4E2M1FN>
  %gs = kiln.weight "gs" : tensor<64x2xf8E8M0FNU>
  %gate = kiln.mx_matmul %x, %g, %gs block [1, 32] : tensor<?x64xf32>, tensor<64x64xf4E2M1FN>, tensor<64x2xf8E8M0FNU> -> tensor<?x64xf32>
  %u = kiln.weight "u" : tensor<64x64xbf16>
  %up = kiln.matmul %x, %u : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %act = kiln.silu %gate : tensor<?x64xf32>
  %h = kiln.mul %act, %up : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  %d = kiln.weight "d" : tensor<64x64xf4E2M1FN>
  %ds = kiln.weight "ds" : tensor<64x2xf8E8M0FNU>
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'd' cuts its 32-value MXFP4 blocks}}
  %y = kiln.mx_matmul %h, %d, %ds block [1, 32] : tensor<?x64xf32>, tensor<64x64xf4E2M1FN>, tensor<64x2xf8E8M0FNU> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
