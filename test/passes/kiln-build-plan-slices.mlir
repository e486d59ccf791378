// RUN: kiln-opt %s -kiln-build-plan | FileCheck %s
// RUN: kiln-opt %s -kiln-build-plan | kiln-opt | FileCheck %s

// Sliced weights (kiln-partition-tensor) keep their slice, counted in
// values, with the scales' slice checked against it; the same tensor sliced
// differently is a different weight. The all_reduce group is a parameter.
// CHECK: kiln_plan.weight @w1 mxfp4_raw "down" f4E2M1FN shape [8, 64] {scales = "down_scale", slice = array<i64: 1, 64>}
// CHECK: kiln_plan.weight @w2 dense "head" bf16 shape [16, 8] {slice = array<i64: 0, 16>}
// CHECK: kiln_plan.weight @w3 dense "head" bf16 shape [16, 8]
// CHECK-LABEL: kiln_plan.plan @prefill
// CHECK: kiln_plan.dispatch all_reduce(%{{.*}}, %{{.*}}) {group = 2 : i64}
func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %t = kiln.weight "embed" : tensor<16x128xbf16>
  %h = kiln.embedding %t[%ids] : tensor<16x128xbf16>, tensor<?xi32> -> tensor<?x128xf32>
  %hs:2 = kiln.split %h axis 1 : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x64xf32>
  %v = kiln.weight "down" slice [1, 64] : tensor<8x64xf4E2M1FN>
  %s = kiln.weight "down_scale" slice [1, 2] : tensor<8x2xf8E8M0FNU>
  %d = kiln.mx_matmul %hs#1, %v, %s block [1, 32] : tensor<?x64xf32>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU> -> tensor<?x8xf32>
  %r = kiln.all_reduce %d group 2 : tensor<?x8xf32>
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
