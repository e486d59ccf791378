// RUN: kiln-opt %s -split-input-file -kiln-fuse-moe-routing -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-fuse-moe-routing="block-size=64" -verify-diagnostics | FileCheck %s --check-prefix=BLOCK

// The GLM-5 router (one group), with the shared expert added.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @glm5_router_shared
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[RW:.*]]: tensor<16x64xbf16>, %[[RB:.*]]: tensor<16xf32>, %[[G:[^:]*]]: {{.*}}, %[[U:[^:]*]]: {{.*}}, %[[D:[^:]*]]: {{.*}}, %[[SG:[^:]*]]: {{.*}}, %[[SU:[^:]*]]: {{.*}}, %[[SD:[^:]*]]: {{.*}})
// CHECK-NEXT: %[[M:.*]] = kiln.moe %[[X]] router %[[RW]] bias %[[RB]] experts %[[G]], %[[U]], %[[D]] shared %[[SG]], %[[SU]], %[[SD]] top_k 4 groups 1 keep 1 scale 2.500000e+00 norm block_size 16
// CHECK-NEXT: return %[[M]]
// BLOCK-LABEL: func.func @glm5_router_shared
// BLOCK: block_size 64
func.func @glm5_router_shared(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>,
    %sg: tensor<32x64xbf16>, %su: tensor<32x64xbf16>, %sd: tensor<64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
  %f = kiln.scale %n by 2.5 : tensor<?x4xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  %sgx = kiln.matmul %x, %sg : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %sa = kiln.silu %sgx : tensor<?x32xf32>
  %sux = kiln.matmul %x, %su : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  %sm = kiln.mul %sa, %sux : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %so = kiln.matmul %sm, %sd : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  %out = kiln.add %y, %so : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}
}

// -----

// Grouped routing (n_group 4, topk_group 2), no shared expert, no
// normalization and no scale, as the module declares.
module attributes {kiln.router = #kiln.router<top_k = 2, n_group = 4, topk_group = 2, norm_topk_prob = false, routed_scaling_factor = 1.0 : f32>} {
// CHECK-LABEL: func.func @grouped
// CHECK: kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} top_k 2 groups 4 keep 2 scale 1.000000e+00 block_size 16 :
// CHECK-NOT: kiln.experts
func.func @grouped(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %m = kiln.group_limit %b groups 4 keep 2 : tensor<?x16xf32>
  %v, %i = kiln.top_k %m k 2 : tensor<?x16xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x2xi32> -> tensor<?x2xf32>
  %y = kiln.experts %x, %i, %w, %g, %u, %d : tensor<?x64xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: a softmax router is not GLM's sigmoid router.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @softmax_router
// CHECK-NOT: kiln.moe
// CHECK: kiln.experts
func.func @softmax_router(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.softmax %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
  %f = kiln.scale %n by 2.5 : tensor<?x4xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: the weights are gathered from the biased scores.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @bias_in_weights
// CHECK-NOT: kiln.moe
// CHECK: kiln.experts
func.func @bias_in_weights(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %w = kiln.gather %b[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
  %f = kiln.scale %n by 2.5 : tensor<?x4xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: the module declares norm_topk_prob but the graph does not
// normalize.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @missing_norm
// CHECK-NOT: kiln.moe
// CHECK: kiln.experts
func.func @missing_norm(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %f = kiln.scale %w by 2.5 : tensor<?x4xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: a different routed scale.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @other_scale
// CHECK-NOT: kiln.moe
// CHECK: kiln.experts
func.func @other_scale(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
  %f = kiln.scale %n by 2.0 : tensor<?x4xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: a top-k other than the declared one.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @other_topk
// CHECK-NOT: kiln.moe
// CHECK: kiln.experts
func.func @other_topk(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 2 : tensor<?x16xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x2xi32> -> tensor<?x2xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x2xf32>
  %f = kiln.scale %n by 2.5 : tensor<?x2xf32>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// Near miss: the router logits are computed in bf16, not FP32.
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 2.5 : f32>} {
// CHECK-LABEL: func.func @bf16_logits
// CHECK-NOT: kiln.moe
func.func @bf16_logits(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xbf16>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xbf16>
  %s = kiln.sigmoid %l : tensor<?x16xbf16>
  %b = kiln.add %s, %rb : tensor<?x16xbf16>, tensor<16xbf16> -> tensor<?x16xbf16>
  %v, %i = kiln.top_k %b k 4 : tensor<?x16xbf16> -> tensor<?x4xbf16>, tensor<?x4xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xbf16>, tensor<?x4xi32> -> tensor<?x4xbf16>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xbf16>
  %f = kiln.scale %n by 2.5 : tensor<?x4xbf16>
  %y = kiln.experts %x, %i, %f, %g, %u, %d : tensor<?x64xf32>, tensor<?x4xi32>, tensor<?x4xbf16>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// An added tensor that is not the shared expert stays a separate add.
module attributes {kiln.router = #kiln.router<top_k = 1, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 1.0 : f32>} {
// CHECK-LABEL: func.func @not_shared
// CHECK: %[[M:.*]] = kiln.moe %{{.*}} top_k 1
// CHECK-NOT: shared
// CHECK: kiln.add %[[M]], %{{.*}}
func.func @not_shared(%x: tensor<?x64xf32>, %rw: tensor<16x64xbf16>, %rb: tensor<16xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>, %other: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %l = kiln.matmul %x, %rw : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xf32>
  %s = kiln.sigmoid %l : tensor<?x16xf32>
  %b = kiln.add %s, %rb : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %v, %i = kiln.top_k %b k 1 : tensor<?x16xf32> -> tensor<?x1xf32>, tensor<?x1xi32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x1xi32> -> tensor<?x1xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x1xf32>
  %y = kiln.experts %x, %i, %n, %g, %u, %d : tensor<?x64xf32>, tensor<?x1xi32>, tensor<?x1xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  %out = kiln.add %y, %other : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}
}

// -----

// Without the router declaration the pass refuses to guess.
// expected-error @below {{kiln.experts present but the module has no valid 'kiln.router' attribute}}
module {
func.func @undeclared(%x: tensor<?x64xf32>, %i: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %y = kiln.experts %x, %i, %w, %g, %u, %d : tensor<?x64xf32>, tensor<?x1xi32>, tensor<?x1xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
}

// -----

// The router is a typed attribute: a dictionary is refused by the dialect.
// expected-error @below {{'kiln.router' must be a #kiln.router<...>, found {top_k = 4 : i64}}}
module attributes {kiln.router = {top_k = 4 : i64}} {
}

// -----

// expected-error @below {{topk_group must be in [1, n_group], found 3 of 2}}
module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 2, topk_group = 3, norm_topk_prob = true, routed_scaling_factor = 1.0 : f32>} {
}

// -----

// expected-error @below {{top_k must be at least 1, found 0}}
module attributes {kiln.router = #kiln.router<top_k = 0, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 1.0 : f32>} {
}

// -----

// expected-error @below {{routed_scaling_factor must be positive and finite, found -1}}
module attributes {kiln.router = #kiln.router<top_k = 2, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = -1.0 : f32>} {
}

// -----

// expected-error @below {{routed_scaling_factor must be an f32}}
module attributes {kiln.router = #kiln.router<top_k = 2, n_group = 1, topk_group = 1, norm_topk_prob = true, routed_scaling_factor = 1.0 : f16>} {
}
