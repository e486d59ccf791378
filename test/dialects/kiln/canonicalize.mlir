// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @scale_by_one
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>)
// CHECK-NOT: kiln.scale
// CHECK: return %[[X]]
func.func @scale_by_one(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = kiln.scale %x by 1.0 : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @scale_of_scale
// CHECK: %[[S:.*]] = kiln.scale %{{.*}} by 5.000000e+00
// CHECK-NOT: kiln.scale
// CHECK: return %[[S]]
func.func @scale_of_scale(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = kiln.scale %x by 2.0 : tensor<?x4xf32>
  %1 = kiln.scale %0 by 2.5 : tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @cast_same_type
// CHECK-NOT: kiln.cast
func.func @cast_same_type(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = kiln.cast %x : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @cast_kept
// CHECK: kiln.cast
func.func @cast_kept(%x: tensor<?x4xf32>) -> tensor<?x4xbf16> {
  %0 = kiln.cast %x : tensor<?x4xf32> -> tensor<?x4xbf16>
  return %0 : tensor<?x4xbf16>
}

// -----

// A single group (GLM-5: n_group = topk_group = 1) filters nothing.
// CHECK-LABEL: func.func @group_limit_noop
// CHECK-NOT: kiln.group_limit
func.func @group_limit_noop(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = kiln.group_limit %x groups 1 keep 1 : tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// CHECK-LABEL: func.func @group_limit_kept
// CHECK: kiln.group_limit %{{.*}} groups 4 keep 2
func.func @group_limit_kept(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = kiln.group_limit %x groups 4 keep 2 : tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
// CHECK: %[[R:.*]] = kiln.reshape %{{.*}} : tensor<?x64xf32> -> tensor<?x8x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<?x64xf32>) -> tensor<?x8x8xf32> {
  %0 = kiln.reshape %x : tensor<?x64xf32> -> tensor<?x4x16xf32>
  %1 = kiln.reshape %0 : tensor<?x4x16xf32> -> tensor<?x8x8xf32>
  return %1 : tensor<?x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_roundtrip
// CHECK-NOT: kiln.reshape
func.func @reshape_roundtrip(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = kiln.reshape %x : tensor<?x64xf32> -> tensor<?x4x16xf32>
  %1 = kiln.reshape %0 : tensor<?x4x16xf32> -> tensor<?x64xf32>
  return %1 : tensor<?x64xf32>
}

// -----

// Unused pure ops (weights included) go away.
// CHECK-LABEL: func.func @dead_weight
// CHECK-NOT: kiln.weight
func.func @dead_weight() {
  %0 = kiln.weight "w" : tensor<4x4xbf16>
  return
}
