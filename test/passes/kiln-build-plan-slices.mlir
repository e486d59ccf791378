// RUN: kiln-opt %s -kiln-build-plan | FileCheck %s
// RUN: kiln-opt %s -kiln-build-plan | kiln-opt | FileCheck %s

// Sliced weights (kiln-partition-tensor) keep their slice, counted in
// values, with the scales' slice checked against it; the same tensor sliced
// differently is a different weight. The all_reduce group is a parameter.
// MXFP4 slices that cut their blocks, stored dequantized to f32: Quark's
// values as a dense f32 weight naming its E8M0 scales, Kiln's quantization
// as mxfp4_dequant with its rule.
// CHECK: kiln_plan.weight @w1 mxfp4_raw "down" f4E2M1FN shape [8, 64] {scales = "down_scale", slice = array<i64: 1, 64>}
// CHECK: kiln_plan.weight @w2 dense "down" f32 shape [8, 16] {scales = "down_scale", slice = array<i64: 1, 16>}
// CHECK: kiln_plan.weight @w3 mxfp4_dequant "up" f32 shape [8, 16] {floor, slice = array<i64: 1, 16>}
// CHECK: kiln_plan.weight @w4 dense "head" bf16 shape [16, 8] {slice = array<i64: 0, 16>}
// CHECK: kiln_plan.weight @w5 dense "head" bf16 shape [16, 8]
// CHECK-LABEL: kiln_plan.plan @prefill
// CHECK: kiln_plan.dispatch all_reduce(%{{.*}}, %{{.*}}) {group = 2 : i64}
func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %t = kiln.weight "embed" : tensor<16x128xbf16>
  %h = kiln.embedding %t[%ids] : tensor<16x128xbf16>, tensor<?xi32> -> tensor<?x128xf32>
  %hs:2 = kiln.split %h axis 1 : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x64xf32>
  %v = kiln.weight "down" slice [1, 64] : tensor<8x64xf4E2M1FN>
  %s = kiln.weight "down_scale" slice [1, 2] : tensor<8x2xf8E8M0FNU>
  %d = kiln.mx_matmul %hs#1, %v, %s block [1, 32] : tensor<?x64xf32>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<?x8xf32>
  %q:2 = kiln.split %hs#0 axis 1 : tensor<?x64xf32> -> tensor<?x16xf32>, tensor<?x48xf32>
  %dq = kiln.weight "down" source_scale "down_scale" slice [1, 16] : tensor<8x16xf32>
  %a = kiln.matmul %q#0, %dq : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %uq = kiln.weight "up" encoding <mxfp4_values, floor> slice [1, 16] : tensor<8x16xf32>
  %b = kiln.matmul %q#0, %uq : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %da = kiln.add %d, %a : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  %dab = kiln.add %da, %b : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  %r = kiln.all_reduce %dab group 2 : tensor<?x8xf32>
  %x = kiln.take_rows %r[%rows] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  %w1 = kiln.weight "head" slice [0, 16] : tensor<16x8xbf16>
  %l1 = kiln.matmul %x, %w1 : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  %w0 = kiln.weight "head" : tensor<16x8xbf16>
  %l0 = kiln.matmul %x, %w0 : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  return %l0, %l1 : tensor<?x16xf32>, tensor<?x16xf32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}
