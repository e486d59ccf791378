// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=0" | FileCheck %s --check-prefix=R0
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" | FileCheck %s --check-prefix=R1
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=1 rank=0" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" | FileCheck %s --check-prefix=R1GONE
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" | kiln-opt -split-input-file | FileCheck %s --check-prefix=R1
// After kiln-partition-experts the MoE keeps that pass's sum over every rank.
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=1" -kiln-partition-tensor="ranks=2 rank=1" | FileCheck %s --check-prefix=BOTH

// MLA: 4 heads (nope 8, rope 4, v 8), 2 per rank.
// R0-LABEL: func.func @mla
// R0: kiln.weight "qb" slice [0, 0] : tensor<24x16xbf16>
// R0: kiln.matmul {{.*}} -> tensor<?x24xf32>
// R0: kiln.reshape {{.*}} -> tensor<?x2x12xf32>
// R0: kiln.split {{.*}} -> tensor<?x2x8xf32>, tensor<?x2x4xf32>
// R0: kiln.rope {{.*}} -> tensor<?x2x4xf32>
// R0: kiln.weight "kvb" slice [0, 0] : tensor<32x16xbf16>
// R0: kiln.mla_attention {{.*}} -> tensor<?x2x8xf32>
// R0: kiln.reshape {{.*}} -> tensor<?x16xf32>
// R0: kiln.weight "o" slice [1, 0] : tensor<32x16xbf16>
// R0: %[[P:.*]] = kiln.matmul {{.*}} -> tensor<?x32xf32>
// R0: %[[S:.*]] = kiln.all_reduce %[[P]] group 2 : tensor<?x32xf32>
// R0: kiln.add %{{.*}}, %[[S]]
// R1-LABEL: func.func @mla
// R1: kiln.weight "qb" slice [0, 24] : tensor<24x16xbf16>
// R1: kiln.weight "kvb" slice [0, 32] : tensor<32x16xbf16>
// R1: kiln.weight "o" slice [1, 16] : tensor<32x16xbf16>
// R1: kiln.all_reduce %{{.*}} group 2
// ONE-LABEL: func.func @mla
// ONE-NOT: slice
// ONE-NOT: all_reduce
func.func @mla(%x: tensor<?x16xf32>, %res: tensor<?x32xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
  %qbw = kiln.weight "qb" : tensor<48x16xbf16>
  %q = kiln.matmul %x, %qbw : tensor<?x16xf32>, tensor<48x16xbf16> -> tensor<?x48xf32>
  %q3 = kiln.reshape %q : tensor<?x48xf32> -> tensor<?x4x12xf32>
  %qs:2 = kiln.split %q3 axis 2 : tensor<?x4x12xf32> -> tensor<?x4x8xf32>, tensor<?x4x4xf32>
  %qpe = kiln.rope %qs#1, %pos interleaved theta 1.0e+04 dims [0, 4] : tensor<?x4x4xf32>, tensor<?xi32> -> tensor<?x4x4xf32>
  %kvb = kiln.weight "kvb" : tensor<64x16xbf16>
  %a = kiln.mla_attention %qs#0, %qpe, %kvb, @latent [%seq, %pos] scale 0.25 : tensor<?x4x8xf32>, tensor<?x4x4xf32>, tensor<64x16xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  %af = kiln.reshape %a : tensor<?x4x8xf32> -> tensor<?x32xf32>
  %ow = kiln.weight "o" : tensor<32x32xbf16>
  %o = kiln.matmul %af, %ow : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
  %r = kiln.add %res, %o : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}
kiln.kv_cache @latent width 20 : f32

// -----

// A dense SwiGLU MLP with MXFP4 weights: intermediate 64, 32 per rank,
// scales cut on their 32-column blocks.
// R0-LABEL: func.func @mlp
// R0-DAG: kiln.weight "g" slice [0, 0] : tensor<32x64xf4E2M1FN>
// R0-DAG: kiln.weight "gs" slice [0, 0] : tensor<32x2xf8E8M0FNU>
// R0-DAG: kiln.weight "d" slice [1, 0] : tensor<64x32xf4E2M1FN>
// R0-DAG: kiln.weight "ds" slice [1, 0] : tensor<64x1xf8E8M0FNU>
// R0-DAG: kiln.silu {{.*}} : tensor<?x32xf32>
// R0: %[[P:.*]] = kiln.mx_matmul {{.*}} -> tensor<?x64xf32>
// R0: kiln.all_reduce %[[P]] group 2
// R1-LABEL: func.func @mlp
// R1-DAG: kiln.weight "u" slice [0, 32] : tensor<32x64xbf16>
// R1-DAG: kiln.weight "d" slice [1, 32] : tensor<64x32xf4E2M1FN>
// R1-DAG: kiln.weight "ds" slice [1, 1] : tensor<64x1xf8E8M0FNU>
func.func @mlp(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = kiln.weight "g" : tensor<64x64xf4E2M1FN>
  %gs = kiln.weight "gs" : tensor<64x2xf8E8M0FNU>
  %gate = kiln.mx_matmul %x, %g, %gs block [1, 32] : tensor<?x64xf32>, tensor<64x64xf4E2M1FN>, tensor<64x2xf8E8M0FNU> -> tensor<?x64xf32>
  %u = kiln.weight "u" : tensor<64x64xbf16>
  %up = kiln.matmul %x, %u : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %act = kiln.silu %gate : tensor<?x64xf32>
  %h = kiln.mul %act, %up : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  %d = kiln.weight "d" : tensor<64x64xf4E2M1FN>
  %ds = kiln.weight "ds" : tensor<64x2xf8E8M0FNU>
  %y = kiln.mx_matmul %h, %d, %ds block [1, 32] : tensor<?x64xf32>, tensor<64x64xf4E2M1FN>, tensor<64x2xf8E8M0FNU> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// MoE: every expert's 32 intermediate columns, 16 per rank, routed and
// shared; the router stays whole.
// R0-LABEL: func.func @moe
// R0-DAG: kiln.weight "l1.router" : tensor<16x64xbf16>
// R0-DAG: kiln.weight "l1.experts.{e}.gate" slice [0, 0] : tensor<16x16x64xbf16>
// R0-DAG: kiln.weight "l1.experts.{e}.down" slice [1, 0] : tensor<16x64x16xbf16>
// R0-DAG: kiln.weight "l1.shared_experts.up" slice [0, 0] : tensor<16x64xbf16>
// R0: %[[P:.*]] = kiln.moe
// R0: kiln.all_reduce %[[P]] group 2
// R1-LABEL: func.func @moe
// R1-DAG: kiln.weight "l1.experts.{e}.up" slice [0, 16] : tensor<16x16x64xbf16>
// R1-DAG: kiln.weight "l1.shared_experts.down" slice [1, 16] : tensor<64x16xbf16>
// BOTH-LABEL: func.func @moe
// BOTH-NOT: shared_experts
// BOTH-DAG: kiln.weight "l1.experts.{e}.gate" experts_from 8 slice [0, 16] : tensor<8x16x64xbf16>
// BOTH: %[[P:.*]] = kiln.moe {{.*}} local_experts_from 8
// BOTH-NEXT: kiln.all_reduce %[[P]] : tensor<?x64xf32>
// BOTH-NOT: all_reduce
func.func @moe(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  %g = kiln.weight "l1.experts.{e}.gate" : tensor<16x32x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" : tensor<16x32x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" : tensor<16x64x32xbf16>
  %sg = kiln.weight "l1.shared_experts.gate" : tensor<32x64xbf16>
  %su = kiln.weight "l1.shared_experts.up" : tensor<32x64xbf16>
  %sd = kiln.weight "l1.shared_experts.down" : tensor<64x32xbf16>
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d shared %sg, %su, %sd
         top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>, tensor<16x32x64xbf16>,
            tensor<16x32x64xbf16>, tensor<16x64x32xbf16>, tensor<32x64xbf16>,
            tensor<32x64xbf16>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A block-scaled MoE (MXFP4, blocks of 32 columns): values and scales are
// cut together, down's columns counted in blocks for the scales; the
// block-scaled value shared by gate and up is copied for each.
// R0-LABEL: func.func @moe_block_scaled
// R1-LABEL: func.func @moe_block_scaled
// R1-DAG: %[[GQ:.*]] = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> slice [0, 32] : tensor<4x32x64xf4E2M1FN>
// R1-DAG: %[[GS:.*]] = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_scales, even> slice [0, 32] : tensor<4x32x2xf8E8M0FNU>
// R1-DAG: %[[DQ:.*]] = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> slice [1, 32] : tensor<4x64x32xf4E2M1FN>
// R1-DAG: %[[DS:.*]] = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> slice [1, 1] : tensor<4x64x1xf8E8M0FNU>
// R1-DAG: %[[G:.*]] = kiln.block_scaled %[[GQ]], %[[GS]] : !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>
// R1-DAG: %[[D:.*]] = kiln.block_scaled %[[DQ]], %[[DS]] : !kiln.block_scaled<tensor<4x64x32xf4E2M1FN>, tensor<4x64x1xf8E8M0FNU>, [1, 32]>
// R1-DAG: %[[U:.*]] = kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<4x32x64xf4E2M1FN>, tensor<4x32x2xf8E8M0FNU>, [1, 32]>
// R1: %[[P:.*]] = kiln.moe %{{.*}} experts {{%[^,]*}}, {{%[^,]*}}, %[[D]] top_k
// R1-NEXT: kiln.all_reduce %[[P]] group 2
// R0: kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> slice [1, 0] : tensor<4x64x1xf8E8M0FNU>
// R0: kiln.moe
// BOTH-LABEL: func.func @moe_block_scaled
// BOTH: kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> experts_from 2 slice [1, 1] : tensor<2x64x1xf8E8M0FNU>
// BOTH: %[[P:.*]] = kiln.moe {{.*}} local_experts_from 2
// BOTH-NEXT: kiln.all_reduce %[[P]] : tensor<?x64xf32>
// BOTH-NOT: all_reduce
// R1GONE-LABEL: func.func @moe_block_scaled
// R1GONE-NOT: {{tensor<4x64x64x|tensor<4x64x2x}}
// R1GONE: kiln.moe
func.func @moe_block_scaled(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<4x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<4xf32>
  %gq = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> : tensor<4x64x64xf4E2M1FN>
  %gs = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_scales, even> : tensor<4x64x2xf8E8M0FNU>
  %dq = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> : tensor<4x64x64xf4E2M1FN>
  %ds = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> : tensor<4x64x2xf8E8M0FNU>
  %g = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>
  %d = kiln.block_scaled %dq, %ds : !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>
  %y = kiln.moe %x router %r bias %b experts %g, %g, %d
         top_k 2 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<4x64xbf16>, tensor<4xf32>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<4x64x64xf4E2M1FN>, tensor<4x64x2xf8E8M0FNU>, [1, 32]>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Not an MLP (the product feeds no projection): left whole.
// R0-LABEL: func.func @not_mlp
// R0-NOT: slice
// R0-NOT: all_reduce
func.func @not_mlp(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = kiln.weight "g" : tensor<64x64xbf16>
  %gate = kiln.matmul %x, %g : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %act = kiln.silu %gate : tensor<?x64xf32>
  %h = kiln.mul %act, %x : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// -----

// GQA (GLM-4.x): 4 query and 2 KV heads of 8, biases, per-head norms; each
// rank keeps 2 query heads and 1 KV head: q/k/v rows and biases, the
// caches' widths, o_proj's columns.
// R1-LABEL: kiln.kv_cache @k width 8 : f32
// R1-LABEL: kiln.kv_cache @v width 8 : f32
// R0-LABEL: func.func @gqa
// BOTH-LABEL: func.func @not_mlp
// R1-LABEL: func.func @gqa
// R1-DAG: kiln.weight "q" slice [0, 16] : tensor<16x32xbf16>
// R1-DAG: kiln.weight "q_bias" slice [0, 16] : tensor<16xbf16>
// R1-DAG: kiln.weight "k" slice [0, 8] : tensor<8x32xbf16>
// R1-DAG: kiln.weight "v_bias" slice [0, 8] : tensor<8xbf16>
// R1-DAG: kiln.weight "qn" : tensor<8xbf16>
// R1-DAG: kiln.rms_norm {{.*}} -> tensor<?x2x8xf32>
// R1-DAG: kiln.rms_norm {{.*}} -> tensor<?x1x8xf32>
// R1-DAG: kiln.kv_cache.append @k[{{.*}}] = %{{.*}} : tensor<?xi32>, tensor<?xi32>, tensor<?x8xf32>
// R1-DAG: kiln.gqa_attention {{.*}} -> tensor<?x2x8xf32>
// R1-DAG: kiln.weight "o" slice [1, 16] : tensor<32x16xbf16>
// R1: %[[P:.*]] = kiln.matmul {{.*}} -> tensor<?x32xf32>
// R1: kiln.all_reduce %[[P]] group 2
kiln.kv_cache @k width 16 : f32
kiln.kv_cache @v width 16 : f32
func.func @gqa(%x: tensor<?x32xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
  %qw = kiln.weight "q" : tensor<32x32xbf16>
  %qb = kiln.weight "q_bias" : tensor<32xbf16>
  %q0 = kiln.matmul %x, %qw : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
  %q1 = kiln.add %q0, %qb : tensor<?x32xf32>, tensor<32xbf16> -> tensor<?x32xf32>
  %q2 = kiln.reshape %q1 : tensor<?x32xf32> -> tensor<?x4x8xf32>
  %qn = kiln.weight "qn" : tensor<8xbf16>
  %q3 = kiln.rms_norm %q2, %qn eps 1.0e-05 : tensor<?x4x8xf32>, tensor<8xbf16> -> tensor<?x4x8xf32>
  %q4 = kiln.rope %q3, %pos neox theta 1.0e+06 dims [0, 4] : tensor<?x4x8xf32>, tensor<?xi32> -> tensor<?x4x8xf32>
  %kw = kiln.weight "k" : tensor<16x32xbf16>
  %k0 = kiln.matmul %x, %kw : tensor<?x32xf32>, tensor<16x32xbf16> -> tensor<?x16xf32>
  %k1 = kiln.reshape %k0 : tensor<?x16xf32> -> tensor<?x2x8xf32>
  %kn = kiln.weight "kn" : tensor<8xbf16>
  %k2 = kiln.rms_norm %k1, %kn eps 1.0e-05 : tensor<?x2x8xf32>, tensor<8xbf16> -> tensor<?x2x8xf32>
  %k3 = kiln.rope %k2, %pos neox theta 1.0e+06 dims [0, 4] : tensor<?x2x8xf32>, tensor<?xi32> -> tensor<?x2x8xf32>
  %k4 = kiln.reshape %k3 : tensor<?x2x8xf32> -> tensor<?x16xf32>
  kiln.kv_cache.append @k[%seq, %pos] = %k4 : tensor<?xi32>, tensor<?xi32>, tensor<?x16xf32>
  %vw = kiln.weight "v" : tensor<16x32xbf16>
  %vb = kiln.weight "v_bias" : tensor<16xbf16>
  %v0 = kiln.matmul %x, %vw : tensor<?x32xf32>, tensor<16x32xbf16> -> tensor<?x16xf32>
  %v1 = kiln.add %v0, %vb : tensor<?x16xf32>, tensor<16xbf16> -> tensor<?x16xf32>
  kiln.kv_cache.append @v[%seq, %pos] = %v1 : tensor<?xi32>, tensor<?xi32>, tensor<?x16xf32>
  %a = kiln.gqa_attention %q4, @k, @v[%seq, %pos] scale 0.35 : tensor<?x4x8xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x4x8xf32>
  %af = kiln.reshape %a : tensor<?x4x8xf32> -> tensor<?x32xf32>
  %ow = kiln.weight "o" : tensor<32x32xbf16>
  %o = kiln.matmul %af, %ow : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}
