// RUN: kiln-opt %s | FileCheck %s
// Round trip of every kiln op, then once more through the generic form.
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

kiln.kv_cache @l0.latent width 80 : bf16
kiln.kv_cache @l0.index width 32 : bf16
kiln.kv_cache @g0.k width 128 : bf16
kiln.kv_cache @g0.v width 128 : bf16

// CHECK-LABEL: kiln.kv_cache @l0.latent width 80 : bf16
// CHECK: kiln.kv_cache @l0.index width 32 : bf16

// CHECK-LABEL: func.func @weights
func.func @weights() {
  // CHECK: kiln.weight "model.embed_tokens.weight" : tensor<2048x256xbf16>
  %0 = kiln.weight "model.embed_tokens.weight" : tensor<2048x256xbf16>
  // CHECK: kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_values, even> : tensor<16x128x256xf4E2M1FN>
  %1 = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_values, even> : tensor<16x128x256xf4E2M1FN>
  // CHECK: kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_scales, floor> : tensor<16x128x8xf8E8M0FNU>
  %2 = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_scales, floor> : tensor<16x128x8xf8E8M0FNU>
  // CHECK: kiln.weight "model.layers.0.mlp.up_proj.weight" encoding <mxfp4_values> source_scale "model.layers.0.mlp.up_proj.weight_scale_inv" : tensor<512x256xf4E2M1FN>
  %3 = kiln.weight "model.layers.0.mlp.up_proj.weight" encoding <mxfp4_values> source_scale "model.layers.0.mlp.up_proj.weight_scale_inv" : tensor<512x256xf4E2M1FN>
  // An FP8 source dequantized to f32 at compile time (a TP slice that cuts
  // its blocks).
  // CHECK: kiln.weight "model.layers.0.mlp.up_proj.weight" source_scale "model.layers.0.mlp.up_proj.weight_scale_inv" slice [0, 64] : tensor<64x256xf32>
  %dq = kiln.weight "model.layers.0.mlp.up_proj.weight" source_scale "model.layers.0.mlp.up_proj.weight_scale_inv" slice [0, 64] : tensor<64x256xf32>
  // Kiln's MXFP4 values of a float source, stored dequantized to f32 (a TP
  // slice that cuts their 32-value blocks).
  // CHECK: kiln.weight "model.layers.1.mlp.experts.{e}.down_proj.weight" encoding <mxfp4_values, even> slice [1, 16] : tensor<16x256x16xf32>
  %mq = kiln.weight "model.layers.1.mlp.experts.{e}.down_proj.weight" encoding <mxfp4_values, even> slice [1, 16] : tensor<16x256x16xf32>
  // CHECK: kiln.weight "model.layers.0.mlp.gate.e_score_correction_bias" : tensor<16xf32>
  %4 = kiln.weight "model.layers.0.mlp.gate.e_score_correction_bias" encoding <raw> : tensor<16xf32>
  return
}

// CHECK-LABEL: func.func @dense
func.func @dense(%ids: tensor<?xi32>, %pos: tensor<?xi32>, %table: tensor<2048x256xbf16>,
                 %w: tensor<128x256xbf16>, %n: tensor<256xbf16>, %q4: tensor<128x256xf4E2M1FN>,
                 %s4: tensor<128x8xf8E8M0FNU>, %q8: tensor<128x256xf8E4M3FN>, %s8: tensor<1x2xf32>) -> tensor<?x128xf32> {
  // CHECK: kiln.embedding %{{.*}}[%{{.*}}] : tensor<2048x256xbf16>, tensor<?xi32> -> tensor<?x256xf32>
  %h = kiln.embedding %table[%ids] : tensor<2048x256xbf16>, tensor<?xi32> -> tensor<?x256xf32>
  // CHECK: kiln.rms_norm %{{.*}}, %{{.*}} eps 9.99999974E-6 : tensor<?x256xf32>, tensor<256xbf16> -> tensor<?x256xf32>
  %x = kiln.rms_norm %h, %n eps 1.0e-05 : tensor<?x256xf32>, tensor<256xbf16> -> tensor<?x256xf32>
  // CHECK: kiln.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 9.99999997E-7
  %ln = kiln.layer_norm %x, %n, %n eps 1.0e-06 : tensor<?x256xf32>, tensor<256xbf16>, tensor<256xbf16> -> tensor<?x256xf32>
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<?x256xf32>, tensor<128x256xbf16> -> tensor<?x128xf32>
  %y = kiln.matmul %ln, %w : tensor<?x256xf32>, tensor<128x256xbf16> -> tensor<?x128xf32>
  // CHECK: kiln.dequantize %{{.*}}, %{{.*}} block [1, 32] : tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<128x256xf32>
  %d4 = kiln.dequantize %q4, %s4 block [1, 32] : tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<128x256xf32>
  // CHECK: kiln.dequantize %{{.*}}, %{{.*}} block [128, 128] : tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x256xbf16>
  %d8 = kiln.dequantize %q8, %s8 block [128, 128] : tensor<128x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<128x256xbf16>
  // CHECK: kiln.mx_matmul %{{.*}}, %{{.*}}, %{{.*}} block [1, 32] : tensor<?x256xf32>, tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<?x128xf32>
  %m = kiln.mx_matmul %x, %q4, %s4 block [1, 32] : tensor<?x256xf32>, tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<?x128xf32>
  // CHECK: kiln.sigmoid %{{.*}} : tensor<?x128xf32>
  %a = kiln.sigmoid %y : tensor<?x128xf32>
  // CHECK: kiln.silu
  %b = kiln.silu %a : tensor<?x128xf32>
  // CHECK: kiln.relu
  %c = kiln.relu %b : tensor<?x128xf32>
  // CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<?x128xf32>, tensor<?x128xf32> -> tensor<?x128xf32>
  %e = kiln.add %c, %m : tensor<?x128xf32>, tensor<?x128xf32> -> tensor<?x128xf32>
  // CHECK: kiln.mul %{{.*}}, %{{.*}} : tensor<?x128xf32>, tensor<128xf32> -> tensor<?x128xf32>
  %bias = kiln.cast %d4 : tensor<128x256xf32> -> tensor<128x256xf32>
  %row = kiln.weight "bias" : tensor<128xf32>
  %f = kiln.mul %e, %row : tensor<?x128xf32>, tensor<128xf32> -> tensor<?x128xf32>
  // CHECK: kiln.scale %{{.*}} by 2.500000e+00 : tensor<?x128xf32>
  %g = kiln.scale %f by 2.5 : tensor<?x128xf32>
  // CHECK: kiln.cast %{{.*}} : tensor<?x128xf32> -> tensor<?x128xbf16>
  %bf = kiln.cast %g : tensor<?x128xf32> -> tensor<?x128xbf16>
  // CHECK: kiln.softmax %{{.*}} : tensor<?x128xf32>
  %p = kiln.softmax %g : tensor<?x128xf32>
  return %p : tensor<?x128xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x384xf32>, %pos: tensor<?xi32>) -> tensor<?x8x48xf32> {
  // CHECK: kiln.reshape %{{.*}} : tensor<?x384xf32> -> tensor<?x8x48xf32>
  %r = kiln.reshape %x : tensor<?x384xf32> -> tensor<?x8x48xf32>
  // CHECK: kiln.split %{{.*}} axis 2 : tensor<?x8x48xf32> -> tensor<?x8x32xf32>, tensor<?x8x16xf32>
  %a, %b = kiln.split %r axis 2 : tensor<?x8x48xf32> -> tensor<?x8x32xf32>, tensor<?x8x16xf32>
  // CHECK: kiln.rope %{{.*}}, %{{.*}} interleaved theta 1.000000e+04 dims[0, 16] : tensor<?x8x16xf32>, tensor<?xi32> -> tensor<?x8x16xf32>
  %br = kiln.rope %b, %pos interleaved theta 1.0e+04 dims[0, 16] : tensor<?x8x16xf32>, tensor<?xi32> -> tensor<?x8x16xf32>
  // CHECK: kiln.rope %{{.*}}, %{{.*}} neox theta 1.000000e+06 dims[0, 16]
  %bn = kiln.rope %br, %pos neox theta 1.0e+06 dims[0, 16] : tensor<?x8x16xf32>, tensor<?xi32> -> tensor<?x8x16xf32>
  // CHECK: kiln.take_rows %{{.*}}[%{{.*}}] : tensor<?x384xf32>, tensor<?xi32> -> tensor<?x384xf32>
  %rows = kiln.take_rows %x[%pos] : tensor<?x384xf32>, tensor<?xi32> -> tensor<?x384xf32>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} axis 2 : tensor<?x8x32xf32>, tensor<?x8x16xf32> -> tensor<?x8x48xf32>
  %c = kiln.concat %a, %bn axis 2 : tensor<?x8x32xf32>, tensor<?x8x16xf32> -> tensor<?x8x48xf32>
  return %c : tensor<?x8x48xf32>
}

// CHECK-LABEL: func.func @router
func.func @router(%s: tensor<?x16xf32>, %logits: tensor<?x2048xf32>) -> (tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: kiln.group_limit %{{.*}} groups 4 keep 2 : tensor<?x16xf32>
  %m = kiln.group_limit %s groups 4 keep 2 : tensor<?x16xf32>
  // CHECK: kiln.top_k %{{.*}} k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %v, %i = kiln.top_k %m k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  // CHECK: kiln.gather %{{.*}}[%{{.*}}] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
  // CHECK: kiln.normalize %{{.*}} eps 9.99999968E-21 : tensor<?x4xf32>
  %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
  // CHECK: kiln.argmax %{{.*}} : tensor<?x2048xf32> -> tensor<?xi32>
  %t = kiln.argmax %logits : tensor<?x2048xf32> -> tensor<?xi32>
  // CHECK: kiln.sample %{{.*}} : tensor<?x2048xf32> -> tensor<?xi32>
  %u = kiln.sample %logits : tensor<?x2048xf32> -> tensor<?xi32>
  return %n, %t, %u : tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%seq: tensor<?xi32>, %pos: tensor<?xi32>, %lat: tensor<?x80xf32>,
                     %qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<512x64xbf16>,
                     %qi: tensor<?x4x32xf32>, %wi: tensor<?x4xf32>, %keys: tensor<?x32xf32>,
                     %q: tensor<?x8x64xf32>, %kv: tensor<?x128xf32>,
                     %kvq: tensor<512x64xf4E2M1FN>, %kvs: tensor<512x2xf8E8M0FNU>) -> tensor<?x8x32xf32> {
  // CHECK: kiln.kv_cache.append @l0.latent[%{{.*}}, %{{.*}}] = %{{.*}} : tensor<?xi32>, tensor<?xi32>, tensor<?x80xf32>
  kiln.kv_cache.append @l0.latent[%seq, %pos] = %lat : tensor<?xi32>, tensor<?xi32>, tensor<?x80xf32>
  kiln.kv_cache.append @l0.index[%seq, %pos] = %keys : tensor<?xi32>, tensor<?xi32>, tensor<?x32xf32>
  // CHECK: kiln.kv_cache.read @l0.latent[%{{.*}}, %{{.*}}] : tensor<?xi32>, tensor<?xi32> -> tensor<?x80xf32>
  %all = kiln.kv_cache.read @l0.latent[%seq, %pos] : tensor<?xi32>, tensor<?xi32> -> tensor<?x80xf32>
  // CHECK: kiln.indexer_top_k %{{.*}}, %{{.*}}, @l0.index[%{{.*}}, %{{.*}}] k 64 scale 0.176776707
  %sel = kiln.indexer_top_k %qi, %wi, @l0.index[%seq, %pos] k 64 scale 0.1767767 : tensor<?x4x32xf32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x64xi32>
  // CHECK: kiln.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, @l0.latent[%{{.*}}, %{{.*}}] top_k %{{.*}} scale
  %o = kiln.mla_attention %qn, %qp, %kvb, @l0.latent[%seq, %pos] top_k %sel scale 0.144 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<?x64xi32> -> tensor<?x8x32xf32>
  // CHECK: kiln.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, @l0.latent[%{{.*}}, %{{.*}}] scale
  %o2 = kiln.mla_attention %qn, %qp, %kvb, @l0.latent[%seq, %pos] scale 0.144 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
  // CHECK: kiln.mla_attention %{{.*}}, %{{.*}}, %{{.*}} scales %{{.*}} block [1, 32], @l0.latent[%{{.*}}, %{{.*}}] top_k
  %o3 = kiln.mla_attention %qn, %qp, %kvq scales %kvs block [1, 32], @l0.latent[%seq, %pos] top_k %sel scale 0.144 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xf4E2M1FN> scales tensor<512x2xf8E8M0FNU>, tensor<?xi32>, tensor<?xi32>, tensor<?x64xi32> -> tensor<?x8x32xf32>
  kiln.kv_cache.append @g0.k[%seq, %pos] = %kv : tensor<?xi32>, tensor<?xi32>, tensor<?x128xf32>
  // CHECK: kiln.gqa_attention %{{.*}}, @g0.k, @g0.v[%{{.*}}, %{{.*}}] scale 1.250000e-01 : tensor<?x8x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf32>
  %g = kiln.gqa_attention %q, @g0.k, @g0.v[%seq, %pos] scale 0.125 : tensor<?x8x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf32>
  return %o : tensor<?x8x32xf32>
}

// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<?x256xf32>, %idx: tensor<?x4xi32>, %w: tensor<?x4xf32>,
               %rw: tensor<16x256xbf16>, %rb: tensor<16xf32>,
               %g: tensor<16x128x256xbf16>, %u: tensor<16x128x256xbf16>, %d: tensor<16x256x128xbf16>,
               %gq: tensor<16x128x256xf4E2M1FN>, %gs: tensor<16x128x8xf8E8M0FNU>,
               %dq: tensor<16x256x128xf4E2M1FN>, %ds: tensor<16x256x4xf8E8M0FNU>,
               %sg: tensor<128x256xbf16>, %sd: tensor<256x128xbf16>,
               %sq: tensor<200x256xf8E4M3FN>, %ss: tensor<2x2xf32>,
               %sdq: tensor<256x200xf8E4M3FN>, %sds: tensor<2x2xf32>) -> tensor<?x256xf32> {
  // CHECK: kiln.experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x256xf32>, tensor<?x4xi32>, tensor<?x4xf32>
  %e = kiln.experts %x, %idx, %w, %g, %u, %d : tensor<?x256xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x128x256xbf16>, tensor<16x128x256xbf16>, tensor<16x256x128xbf16> -> tensor<?x256xf32>
  // CHECK: kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} top_k 4 groups 1 keep 1 scale 2.500000e+00 norm block_size 16 :
  %m = kiln.moe %x router %rw bias %rb experts %g, %u, %d top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16 : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>, tensor<16x128x256xbf16>, tensor<16x128x256xbf16>, tensor<16x256x128xbf16>) -> tensor<?x256xf32>
  // CHECK: %[[G:.*]] = kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
  %bg = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
  // CHECK: %[[D:.*]] = kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>
  %bd = kiln.block_scaled %dq, %ds : !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>
  // CHECK: kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %[[G]], %[[G]], %[[D]] shared %{{.*}}, %{{.*}}, %{{.*}} top_k 4 groups 4 keep 2 scale 1.000000e+00 block_size 32 : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>, !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>, tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  %q = kiln.moe %x router %rw bias %rb experts %bg, %bg, %bd shared %sg, %sg, %sd top_k 4 groups 4 keep 2 scale 1.0 block_size 32 : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>, !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>, tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  // BF16 routed experts beside an FP8 shared expert with its own block.
  // CHECK: %[[SG:.*]] = kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<200x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>
  %bsg = kiln.block_scaled %sq, %ss : !kiln.block_scaled<tensor<200x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>
  %bsd = kiln.block_scaled %sdq, %sds : !kiln.block_scaled<tensor<256x200xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>
  // CHECK: kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} shared %[[SG]], %[[SG]], %{{.*}} top_k 4 groups 1 keep 1 scale 1.000000e+00 block_size 16 local_experts_from 0 :
  %f = kiln.moe %x router %rw bias %rb experts %g, %u, %d shared %bsg, %bsg, %bsd top_k 4 groups 1 keep 1 scale 1.0 block_size 16 local_experts_from 0 : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>, tensor<16x128x256xbf16>, tensor<16x128x256xbf16>, tensor<16x256x128xbf16>, !kiln.block_scaled<tensor<200x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<200x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<256x200xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>) -> tensor<?x256xf32>
  %s = kiln.add %m, %q : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>
  %t = kiln.add %s, %f : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>
  return %t : tensor<?x256xf32>
}

// The examples in the descriptions of kiln.block_scaled and kiln.moe
// (KilnOps.td), verbatim: keep them equal.
// CHECK-LABEL: func.func @block_scaled_doc_example
func.func @block_scaled_doc_example(%q: tensor<16x128x256xf4E2M1FN>, %s: tensor<16x128x8xf8E8M0FNU>)
    -> !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]> {
  // CHECK: kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %g = kiln.block_scaled %q, %s
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
  return %g : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
}

// CHECK-LABEL: func.func @moe_doc_example
func.func @moe_doc_example(%x: tensor<?x256xf32>, %rw: tensor<16x256xbf16>, %rb: tensor<16xf32>,
                           %gq: tensor<16x128x256xf4E2M1FN>, %gs: tensor<16x128x8xf8E8M0FNU>,
                           %uq: tensor<16x128x256xf4E2M1FN>, %us: tensor<16x128x8xf8E8M0FNU>,
                           %dq: tensor<16x256x128xf4E2M1FN>, %ds: tensor<16x256x4xf8E8M0FNU>,
                           %sg: tensor<128x256xbf16>, %su: tensor<128x256xbf16>,
                           %sd: tensor<256x128xbf16>) -> tensor<?x256xf32> {
  // CHECK: kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} shared %{{.*}}, %{{.*}}, %{{.*}} top_k 4 groups 1 keep 1 scale 2.500000e+00 norm block_size 16 :
    %g = kiln.block_scaled %gq, %gs
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %u = kiln.block_scaled %uq, %us
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %d = kiln.block_scaled %dq, %ds
           : !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>
    %y = kiln.moe %x router %rw bias %rb experts %g, %u, %d shared %sg, %su, %sd
           top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16
           : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>,
              !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>,
              !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>,
              !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>,
              tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// CHECK-LABEL: func.func @all_reduce
func.func @all_reduce(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  // CHECK: kiln.all_reduce %{{.*}} : tensor<?x256xf32>
  %y = kiln.all_reduce %x : tensor<?x256xf32>
  // CHECK: kiln.all_reduce %{{.*}} group 2 : tensor<?x256xf32>
  %z = kiln.all_reduce %y group 2 : tensor<?x256xf32>
  return %z : tensor<?x256xf32>
}

// CHECK-LABEL: func.func @row_exchange
func.func @row_exchange(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  // CHECK: kiln.all_gather_rows %{{.*}} : tensor<?x256xf32> -> tensor<?x256xf32>
  %all = kiln.all_gather_rows %x : tensor<?x256xf32> -> tensor<?x256xf32>
  // CHECK: kiln.reduce_scatter_rows %{{.*}} : tensor<?x256xf32> -> tensor<?x256xf32>
  %mine = kiln.reduce_scatter_rows %all : tensor<?x256xf32> -> tensor<?x256xf32>
  // CHECK: kiln.all_gather_rows %{{.*}} group 2 : tensor<?x256xf32> -> tensor<?x256xf32>
  %all2 = kiln.all_gather_rows %mine group 2 : tensor<?x256xf32> -> tensor<?x256xf32>
  // CHECK: kiln.reduce_scatter_rows %{{.*}} group 2 : tensor<?x256xf32> -> tensor<?x256xf32>
  %mine2 = kiln.reduce_scatter_rows %all2 group 2 : tensor<?x256xf32> -> tensor<?x256xf32>
  return %mine2 : tensor<?x256xf32>
}

// CHECK-LABEL: func.func @expert_exchange
func.func @expert_exchange(%x: tensor<?x256xf32>, %r: tensor<64x256xbf16>, %b: tensor<64xf32>) -> tensor<?x256xf32> {
  // CHECK: %{{.*}}, %{{.*}} = kiln.dispatch_rows %{{.*}} router %{{.*}} bias %{{.*}} top_k 4 groups 1 keep 1 experts_per_rank 8 own_rows : (tensor<?x256xf32>, tensor<64x256xbf16>, tensor<64xf32>) -> (tensor<?x256xf32>, tensor<?x1xi32>)
  %rows, %routes = kiln.dispatch_rows %x router %r bias %b top_k 4 groups 1 keep 1 experts_per_rank 8 own_rows : (tensor<?x256xf32>, tensor<64x256xbf16>, tensor<64xf32>) -> (tensor<?x256xf32>, tensor<?x1xi32>)
  // CHECK: kiln.combine_rows %{{.*}} routes %{{.*}} : (tensor<?x256xf32>, tensor<?x1xi32>) -> tensor<?x256xf32>
  %y = kiln.combine_rows %rows routes %routes : (tensor<?x256xf32>, tensor<?x1xi32>) -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// CHECK-LABEL: func.func @sliced_weights
func.func @sliced_weights() -> (tensor<4x8x32xbf16>, tensor<64x1xf8E8M0FNU>) {
  // CHECK: kiln.weight "l1.experts.{e}.down" experts_from 4 slice [1, 32] : tensor<4x8x32xbf16>
  %a = kiln.weight "l1.experts.{e}.down" experts_from 4 slice [1, 32] : tensor<4x8x32xbf16>
  // CHECK: kiln.weight "o_scale" slice [1, 1] : tensor<64x1xf8E8M0FNU>
  %b = kiln.weight "o_scale" slice [1, 1] : tensor<64x1xf8E8M0FNU>
  return %a, %b : tensor<4x8x32xbf16>, tensor<64x1xf8E8M0FNU>
}
