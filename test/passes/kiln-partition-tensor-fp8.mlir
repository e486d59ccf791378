// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" -verify-diagnostics | FileCheck %s
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -split-input-file -kiln-partition-tensor="ranks=2 rank=1" | kiln-opt -split-input-file | FileCheck %s

// FP8 weights whose 128x128 blocks a rank's slice cuts: the rank reads them
// dequantized to f32 (raw f32 kiln.weight with source_scale: the artifact
// stores q * s), a kiln.mx_matmul becomes a kiln.matmul, MLA's kv_b loses its
// scales, with one warning per weight. Slices on whole blocks keep FP8
// (kiln-partition-tensor.mlir).

// MLA: 6 heads; q_b 6 x 48 rows (144 per rank), kv_b 6 x (32 + 32) rows
// (192 per rank), o_proj columns 6 x 32 (96 per rank): every one cuts its
// blocks.
// CHECK-LABEL: func.func @fp8_mla
// CHECK: %[[QB:.*]] = kiln.weight "qb" source_scale "qb_scale" slice [0, 144] : tensor<144x128xf32>
// CHECK: kiln.matmul %{{.*}}, %[[QB]] : tensor<?x128xf32>, tensor<144x128xf32> -> tensor<?x144xf32>
// CHECK: %[[KVB:.*]] = kiln.weight "kvb" source_scale "kvb_scale" slice [0, 192] : tensor<192x64xf32>
// CHECK: kiln.mla_attention %{{.*}}, %{{.*}}, %[[KVB]], @latent[
// CHECK-SAME: tensor<192x64xf32>, tensor<?xi32>
// CHECK: %[[O:.*]] = kiln.weight "o" source_scale "o_scale" slice [1, 96] : tensor<128x96xf32>
// CHECK: kiln.matmul %{{.*}}, %[[O]] : tensor<?x96xf32>, tensor<128x96xf32> -> tensor<?x128xf32>
// CHECK: kiln.all_reduce
// CHECK-NOT: kiln.mx_matmul
// CHECK-NOT: f8E4M3FN
func.func @fp8_mla(%x: tensor<?x128xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x128xf32> {
  %qbw = kiln.weight "qb" : tensor<288x128xf8E4M3FN>
  %qbs = kiln.weight "qb_scale" : tensor<3x1xf32>
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'qb' cuts its 128x128 FP8 blocks; it is stored dequantized to f32 (4 bytes a value)}}
  %q = kiln.mx_matmul %x, %qbw, %qbs block [128, 128] : tensor<?x128xf32>, tensor<288x128xf8E4M3FN>, tensor<3x1xf32> -> tensor<?x288xf32>
  %q3 = kiln.reshape %q : tensor<?x288xf32> -> tensor<?x6x48xf32>
  %qs:2 = kiln.split %q3 axis 2 : tensor<?x6x48xf32> -> tensor<?x6x32xf32>, tensor<?x6x16xf32>
  %kvbw = kiln.weight "kvb" : tensor<384x64xf8E4M3FN>
  %kvbs = kiln.weight "kvb_scale" : tensor<3x1xf32>
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'kvb' cuts its 128x128 FP8 blocks}}
  %a = kiln.mla_attention %qs#0, %qs#1, %kvbw scales %kvbs block [128, 128], @latent [%seq, %pos] scale 0.25 : tensor<?x6x32xf32>, tensor<?x6x16xf32>, tensor<384x64xf8E4M3FN> scales tensor<3x1xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x6x32xf32>
  %af = kiln.reshape %a : tensor<?x6x32xf32> -> tensor<?x192xf32>
  %ow = kiln.weight "o" : tensor<128x192xf8E4M3FN>
  %os = kiln.weight "o_scale" : tensor<1x2xf32>
  // expected-warning @below {{kiln-partition-tensor: this rank's slice of 'o' cuts its 128x128 FP8 blocks}}
  %o = kiln.mx_matmul %af, %ow, %os block [128, 128] : tensor<?x192xf32>, tensor<128x192xf8E4M3FN>, tensor<1x2xf32> -> tensor<?x128xf32>
  return %o : tensor<?x128xf32>
}
kiln.kv_cache @latent width 80 : f32

// -----

// FP8 experts with blocks of 128 rows: 128 intermediate rows give 64 per
// rank, inside one block. gate and up keep rows [64, 128), down columns.
// CHECK-LABEL: func.func @experts_fp8_blocks
// CHECK: %[[G:.*]] = kiln.weight "l1.experts.{e}.gate" source_scale "l1.experts.{e}.gate_scale" slice [0, 64] : tensor<4x64x128xf32>
// CHECK: %[[D:.*]] = kiln.weight "l1.experts.{e}.gate" source_scale "l1.experts.{e}.gate_scale" slice [1, 64] : tensor<4x128x64xf32>
// CHECK: kiln.moe %{{.*}} experts %[[G]], %{{.*}}, %[[D]]
// CHECK-NOT: block_scaled
func.func @experts_fp8_blocks(%x: tensor<?x128xf32>) -> tensor<?x128xf32> {
  %r = kiln.weight "l1.router" : tensor<4x128xbf16>
  %b = kiln.weight "l1.bias" : tensor<4xf32>
  %gq = kiln.weight "l1.experts.{e}.gate" : tensor<4x128x128xf8E4M3FN>
  %gs = kiln.weight "l1.experts.{e}.gate_scale" : tensor<4x1x1xf32>
  %g = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>, [128, 128]>
  // expected-warning @below {{this rank's slice of 'l1.experts.{e}.gate' cuts its 128x128 FP8 blocks}}
  %y = kiln.moe %x router %r bias %b experts %g, %g, %g
         top_k 2 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x128xf32>, tensor<4x128xbf16>, tensor<4xf32>,
            !kiln.block_scaled<tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>, [128, 128]>,
            !kiln.block_scaled<tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>, [128, 128]>,
            !kiln.block_scaled<tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>, [128, 128]>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
