// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" -verify-diagnostics | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=2" 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: kiln-partition-tensor: rank 2 of 2 ranks, expected 0 <= rank < ranks

func.func @uneven_heads(%x: tensor<?x16xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x3x8xf32> {
  %qbw = kiln.weight "qb" : tensor<36x16xbf16>
  %q = kiln.matmul %x, %qbw : tensor<?x16xf32>, tensor<36x16xbf16> -> tensor<?x36xf32>
  %q3 = kiln.reshape %q : tensor<?x36xf32> -> tensor<?x3x12xf32>
  %qs:2 = kiln.split %q3 axis 2 : tensor<?x3x12xf32> -> tensor<?x3x8xf32>, tensor<?x3x4xf32>
  %kvb = kiln.weight "kvb" : tensor<48x16xbf16>
  // expected-error @below {{kiln-partition-tensor: 3 heads do not split evenly over 2 ranks}}
  %a = kiln.mla_attention %qs#0, %qs#1, %kvb, @latent [%seq, %pos] scale 0.25 : tensor<?x3x8xf32>, tensor<?x3x4xf32>, tensor<48x16xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x3x8xf32>
  return %a : tensor<?x3x8xf32>
}
kiln.kv_cache @latent width 20 : f32

// -----

func.func @q_not_projected(%qn: tensor<?x4x8xf32>, %qp: tensor<?x4x4xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x4x8xf32> {
  %kvb = kiln.weight "kvb" : tensor<64x16xbf16>
  // expected-error @below {{q_nope is not one result of kiln.split(kiln.reshape(q_b projection)) used by this op alone}}
  %a = kiln.mla_attention %qn, %qp, %kvb, @latent [%seq, %pos] scale 0.25 : tensor<?x4x8xf32>, tensor<?x4x4xf32>, tensor<64x16xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}
kiln.kv_cache @latent width 20 : f32

// -----

func.func @no_o_proj(%x: tensor<?x16xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x4x8xf32> {
  %qbw = kiln.weight "qb" : tensor<48x16xbf16>
  %q = kiln.matmul %x, %qbw : tensor<?x16xf32>, tensor<48x16xbf16> -> tensor<?x48xf32>
  %q3 = kiln.reshape %q : tensor<?x48xf32> -> tensor<?x4x12xf32>
  %qs:2 = kiln.split %q3 axis 2 : tensor<?x4x12xf32> -> tensor<?x4x8xf32>, tensor<?x4x4xf32>
  %kvb = kiln.weight "kvb" : tensor<64x16xbf16>
  // expected-error @below {{the result does not feed o_proj through one kiln.reshape}}
  %a = kiln.mla_attention %qs#0, %qs#1, %kvb, @latent [%seq, %pos] scale 0.25 : tensor<?x4x8xf32>, tensor<?x4x4xf32>, tensor<64x16xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}
kiln.kv_cache @latent width 20 : f32

// -----

func.func @mlp_uneven(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = kiln.weight "g" : tensor<3x64xbf16>
  %gate = kiln.matmul %x, %g : tensor<?x64xf32>, tensor<3x64xbf16> -> tensor<?x3xf32>
  %u = kiln.weight "u" : tensor<3x64xbf16>
  %up = kiln.matmul %x, %u : tensor<?x64xf32>, tensor<3x64xbf16> -> tensor<?x3xf32>
  %act = kiln.silu %gate : tensor<?x3xf32>
  // expected-error @below {{the MLP's 3 intermediate columns do not split evenly over 2 ranks}}
  %h = kiln.mul %act, %up : tensor<?x3xf32>, tensor<?x3xf32> -> tensor<?x3xf32>
  %d = kiln.weight "d" : tensor<64x3xbf16>
  %y = kiln.matmul %h, %d : tensor<?x3xf32>, tensor<64x3xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @experts_uneven(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<4x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<4xf32>
  %g = kiln.weight "l1.experts.{e}.gate" : tensor<4x5x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" : tensor<4x5x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" : tensor<4x64x5xbf16>
  // expected-error @below {{5 expert intermediate columns do not split evenly over 2 ranks}}
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d
         top_k 2 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<4x64xbf16>, tensor<4xf32>, tensor<4x5x64xbf16>,
            tensor<4x5x64xbf16>, tensor<4x64x5xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @already(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = kiln.weight "g" slice [0, 0] : tensor<64x64xbf16>
  // expected-error @below {{weight 'g' is already sliced}}
  %gate = kiln.matmul %x, %g : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %u = kiln.weight "u" : tensor<64x64xbf16>
  %up = kiln.matmul %x, %u : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %act = kiln.silu %gate : tensor<?x64xf32>
  %h = kiln.mul %act, %up : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  %d = kiln.weight "d" : tensor<64x64xbf16>
  %y = kiln.matmul %h, %d : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @gqa_uneven(%q: tensor<?x8x64xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x8x64xf32> {
  // expected-error @below {{kiln-partition-tensor: 8 query and 1 KV heads do not split evenly over 2 ranks}}
  %g = kiln.gqa_attention %q, @k, @v[%seq, %pos] scale 0.125 : tensor<?x8x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf32>
  return %g : tensor<?x8x64xf32>
}
kiln.kv_cache @k width 64 : f32
kiln.kv_cache @v width 64 : f32

// -----

func.func @gqa_q_not_projected(%q: tensor<?x8x64xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x8x64xf32> {
  // expected-error @below {{kiln-partition-tensor: the value is not made by a projection through kiln.rope, a per-head kiln.rms_norm, kiln.reshape or a bias kiln.add}}
  %g = kiln.gqa_attention %q, @k, @v[%seq, %pos] scale 0.125 : tensor<?x8x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf32>
  return %g : tensor<?x8x64xf32>
}
kiln.kv_cache @k width 128 : f32
kiln.kv_cache @v width 128 : f32

// -----

func.func @q_pe_elsewhere(%x: tensor<?x16xf32>, %qp: tensor<?x4x4xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x4x8xf32> {
  %qbw = kiln.weight "qb" : tensor<48x16xbf16>
  %q = kiln.matmul %x, %qbw : tensor<?x16xf32>, tensor<48x16xbf16> -> tensor<?x48xf32>
  %q3 = kiln.reshape %q : tensor<?x48xf32> -> tensor<?x4x12xf32>
  %qs:2 = kiln.split %q3 axis 2 : tensor<?x4x12xf32> -> tensor<?x4x8xf32>, tensor<?x4x4xf32>
  %kvb = kiln.weight "kvb" : tensor<64x16xbf16>
  // expected-error @below {{q_pe does not come from the same kiln.split as q_nope (through kiln.rope ops only)}}
  %a = kiln.mla_attention %qs#0, %qp, %kvb, @latent [%seq, %pos] scale 0.25 : tensor<?x4x8xf32>, tensor<?x4x4xf32>, tensor<64x16xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}
kiln.kv_cache @latent width 20 : f32

// -----

// An add of a full activation on the q path is not a bias.
func.func @gqa_not_bias(%x: tensor<?x32xf32>, %r: tensor<?x32xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x4x8xf32> {
  %qw = kiln.weight "q" : tensor<32x32xbf16>
  %q0 = kiln.matmul %x, %qw : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
  %q1 = kiln.add %q0, %r : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %q2 = kiln.reshape %q1 : tensor<?x32xf32> -> tensor<?x4x8xf32>
  // expected-error @below {{kiln-partition-tensor: an add on the way to the projection is not a bias}}
  %a = kiln.gqa_attention %q2, @k, @v[%seq, %pos] scale 0.35 : tensor<?x4x8xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  return %a : tensor<?x4x8xf32>
}
kiln.kv_cache @k width 16 : f32
kiln.kv_cache @v width 16 : f32

// -----

// The q projection's result feeds something else too.
func.func @gqa_shared_q(%x: tensor<?x32xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> (tensor<?x4x8xf32>, tensor<?x32xf32>) {
  %qw = kiln.weight "q" : tensor<32x32xbf16>
  %q0 = kiln.matmul %x, %qw : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
  %q2 = kiln.reshape %q0 : tensor<?x32xf32> -> tensor<?x4x8xf32>
  // expected-error @below {{kiln-partition-tensor: a value on the way to the projection has other uses}}
  %a = kiln.gqa_attention %q2, @k, @v[%seq, %pos] scale 0.35 : tensor<?x4x8xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  return %a, %q0 : tensor<?x4x8xf32>, tensor<?x32xf32>
}
kiln.kv_cache @k width 16 : f32
kiln.kv_cache @v width 16 : f32

// -----

// A weight unused before the pass is not the pass's to remove.
// CHECK-LABEL: func.func @unused_weight
// CHECK: kiln.weight "spare" : tensor<8x8xbf16>
func.func @unused_weight() {
  %w = kiln.weight "spare" : tensor<8x8xbf16>
  return
}

