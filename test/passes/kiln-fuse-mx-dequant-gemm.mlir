// RUN: kiln-opt %s -split-input-file -kiln-fuse-mx-dequant-gemm | FileCheck %s
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -split-input-file -kiln-fuse-mx-dequant-gemm | kiln-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @mxfp4_matmul
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[Q:.*]]: tensor<32x64xf4E2M1FN>, %[[S:.*]]: tensor<32x2xf8E8M0FNU>)
// CHECK-NEXT: %[[Y:.*]] = kiln.mx_matmul %[[X]], %[[Q]], %[[S]] block [1, 32] : tensor<?x64xf32>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<?x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @mxfp4_matmul(%x: tensor<?x64xf32>, %q: tensor<32x64xf4E2M1FN>, %s: tensor<32x2xf8E8M0FNU>) -> tensor<?x32xf32> {
  %w = kiln.dequantize %q, %s block [1, 32] : tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<32x64xf32>
  %y = kiln.matmul %x, %w : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @fp8_matmul
// CHECK: kiln.mx_matmul %{{.*}}, %{{.*}}, %{{.*}} block [128, 128] : tensor<?x256xf32>, tensor<200x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<?x200xf32>
// CHECK-NOT: kiln.dequantize
func.func @fp8_matmul(%x: tensor<?x256xf32>, %q: tensor<200x256xf8E4M3FN>, %s: tensor<2x2xf32>) -> tensor<?x200xf32> {
  %w = kiln.dequantize %q, %s block [128, 128] : tensor<200x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<200x256xbf16>
  %y = kiln.matmul %x, %w : tensor<?x256xf32>, tensor<200x256xbf16> -> tensor<?x200xf32>
  return %y : tensor<?x200xf32>
}

// -----

// A plain float matmul is untouched.
// CHECK-LABEL: func.func @float_matmul
// CHECK: kiln.matmul
// CHECK-NOT: kiln.mx_matmul
func.func @float_matmul(%x: tensor<?x64xf32>, %w: tensor<32x64xbf16>) -> tensor<?x32xf32> {
  %y = kiln.matmul %x, %w : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Routed experts and the shared expert, all MXFP4, move into kiln.moe as
// kiln.block_scaled values of the dequantizes' values and scales.
// CHECK-LABEL: func.func @moe_all_mxfp4
// CHECK-SAME: (%[[X:[^:]*]]: {{.*}}, %[[RW:[^:]*]]: {{.*}}, %[[RB:[^:]*]]: {{.*}}, %[[GQ:[^:]*]]: {{.*}}, %[[GS:[^:]*]]: {{.*}}, %[[DQ:[^:]*]]: {{.*}}, %[[DS:[^:]*]]: {{.*}}, %[[SQ:[^:]*]]: {{.*}}, %[[SS:[^:]*]]: {{.*}}, %[[SDQ:[^:]*]]: {{.*}}, %[[SDS:[^:]*]]: {{.*}})
// CHECK-NEXT: %[[G:.*]] = kiln.block_scaled %[[GQ]], %[[GS]] : !kiln.block_scaled<tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU>, [1, 32]>
// CHECK-NEXT: %[[U:.*]] = kiln.block_scaled %[[GQ]], %[[GS]] : !kiln.block_scaled<tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU>, [1, 32]>
// CHECK-NEXT: %[[D:.*]] = kiln.block_scaled %[[DQ]], %[[DS]] : !kiln.block_scaled<tensor<8x64x32xf4E2M1FN>, tensor<8x64x1xf8E8M0FNU>, [1, 32]>
// CHECK-NEXT: %[[SG:.*]] = kiln.block_scaled %[[SQ]], %[[SS]] : !kiln.block_scaled<tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, [1, 32]>
// CHECK-NEXT: %[[SU:.*]] = kiln.block_scaled %[[SQ]], %[[SS]]
// CHECK-NEXT: %[[SD:.*]] = kiln.block_scaled %[[SDQ]], %[[SDS]] : !kiln.block_scaled<tensor<64x32xf4E2M1FN>, tensor<64x1xf8E8M0FNU>, [1, 32]>
// CHECK-NEXT: kiln.moe %[[X]] router %[[RW]] bias %[[RB]] experts %[[G]], %[[U]], %[[D]] shared %[[SG]], %[[SU]], %[[SD]] top_k 2 groups 1 keep 1 scale 2.500000e+00 norm block_size 16 :
// CHECK-NOT: kiln.dequantize
func.func @moe_all_mxfp4(%x: tensor<?x64xf32>, %rw: tensor<8x64xbf16>, %rb: tensor<8xf32>,
    %gq: tensor<8x32x64xf4E2M1FN>, %gs: tensor<8x32x2xf8E8M0FNU>, %dq: tensor<8x64x32xf4E2M1FN>, %ds: tensor<8x64x1xf8E8M0FNU>,
    %sq: tensor<32x64xf4E2M1FN>, %ss: tensor<32x2xf8E8M0FNU>, %sdq: tensor<64x32xf4E2M1FN>, %sds: tensor<64x1xf8E8M0FNU>) -> tensor<?x64xf32> {
  %g = kiln.dequantize %gq, %gs block [1, 32] : tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU> -> tensor<8x32x64xbf16>
  %d = kiln.dequantize %dq, %ds block [1, 32] : tensor<8x64x32xf4E2M1FN>, tensor<8x64x1xf8E8M0FNU> -> tensor<8x64x32xbf16>
  %sg = kiln.dequantize %sq, %ss block [1, 32] : tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<32x64xbf16>
  %sd = kiln.dequantize %sdq, %sds block [1, 32] : tensor<64x32xf4E2M1FN>, tensor<64x1xf8E8M0FNU> -> tensor<64x32xbf16>
  %y = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %sg, %sg, %sd top_k 2 groups 1 keep 1 scale 2.5 norm block_size 16 : (tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// MXFP4 routed experts beside a BF16 shared expert (GLM-5-MXFP4 layout):
// only the routed experts become block-scaled.
// CHECK-LABEL: func.func @moe_bf16_shared
// CHECK-SAME: %[[SG:[^:]*]]: tensor<32x64xbf16>, %[[SD:[^:]*]]: tensor<64x32xbf16>
// CHECK-COUNT-3: = kiln.block_scaled %
// CHECK-NOT: = kiln.block_scaled %
// CHECK: kiln.moe %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} shared %[[SG]], %[[SG]], %[[SD]] top_k
// CHECK-NOT: kiln.dequantize
func.func @moe_bf16_shared(%x: tensor<?x64xf32>, %rw: tensor<8x64xbf16>, %rb: tensor<8xf32>,
    %gq: tensor<8x32x64xf4E2M1FN>, %gs: tensor<8x32x2xf8E8M0FNU>, %dq: tensor<8x64x32xf4E2M1FN>, %ds: tensor<8x64x1xf8E8M0FNU>,
    %sg: tensor<32x64xbf16>, %sd: tensor<64x32xbf16>) -> tensor<?x64xf32> {
  %g = kiln.dequantize %gq, %gs block [1, 32] : tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU> -> tensor<8x32x64xbf16>
  %d = kiln.dequantize %dq, %ds block [1, 32] : tensor<8x64x32xf4E2M1FN>, tensor<8x64x1xf8E8M0FNU> -> tensor<8x64x32xbf16>
  %y = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %sg, %sg, %sd top_k 2 groups 1 keep 1 scale 2.5 norm block_size 16 : (tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// FP8 routed experts (one block shape) beside an MXFP4 shared expert: each
// group keeps its own block.
// CHECK-LABEL: func.func @moe_fp8_mxfp4_shared
// CHECK: kiln.moe {{.*}} : (tensor<?x256xf32>, tensor<2x256xbf16>, tensor<2xf32>, !kiln.block_scaled<tensor<2x128x256xf8E4M3FN>, tensor<2x1x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<2x128x256xf8E4M3FN>, tensor<2x1x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<2x256x128xf8E4M3FN>, tensor<2x2x1xf32>, [128, 128]>, !kiln.block_scaled<tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<256x128xf4E2M1FN>, tensor<256x4xf8E8M0FNU>, [1, 32]>) -> tensor<?x256xf32>
func.func @moe_fp8_mxfp4_shared(%x: tensor<?x256xf32>, %rw: tensor<2x256xbf16>, %rb: tensor<2xf32>,
    %gq: tensor<2x128x256xf8E4M3FN>, %gs: tensor<2x1x2xf32>, %dq: tensor<2x256x128xf8E4M3FN>, %ds: tensor<2x2x1xf32>,
    %sq: tensor<128x256xf4E2M1FN>, %ss: tensor<128x8xf8E8M0FNU>, %sdq: tensor<256x128xf4E2M1FN>, %sds: tensor<256x4xf8E8M0FNU>) -> tensor<?x256xf32> {
  %g = kiln.dequantize %gq, %gs block [128, 128] : tensor<2x128x256xf8E4M3FN>, tensor<2x1x2xf32> -> tensor<2x128x256xbf16>
  %d = kiln.dequantize %dq, %ds block [128, 128] : tensor<2x256x128xf8E4M3FN>, tensor<2x2x1xf32> -> tensor<2x256x128xbf16>
  %sg = kiln.dequantize %sq, %ss block [1, 32] : tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<128x256xbf16>
  %sd = kiln.dequantize %sdq, %sds block [1, 32] : tensor<256x128xf4E2M1FN>, tensor<256x4xf8E8M0FNU> -> tensor<256x128xbf16>
  %y = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %sg, %sg, %sd top_k 1 groups 1 keep 1 scale 1.0 block_size 16 : (tensor<?x256xf32>, tensor<2x256xbf16>, tensor<2xf32>, tensor<2x128x256xbf16>, tensor<2x128x256xbf16>, tensor<2x256x128xbf16>, tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// Experts of which only some are dequantized are left as they are (and
// kiln-check-fused reports the dequantize).
// CHECK-LABEL: func.func @moe_partly_dequantized
// CHECK: kiln.dequantize
// CHECK-NOT: kiln.block_scaled
func.func @moe_partly_dequantized(%x: tensor<?x64xf32>, %rw: tensor<8x64xbf16>, %rb: tensor<8xf32>,
    %gq: tensor<8x32x64xf4E2M1FN>, %gs: tensor<8x32x2xf8E8M0FNU>, %u: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) -> tensor<?x64xf32> {
  %g = kiln.dequantize %gq, %gs block [1, 32] : tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU> -> tensor<8x32x64xbf16>
  %y = kiln.moe %x router %rw bias %rb experts %g, %u, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 16 : (tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// An FP8 kv_b_proj (official GLM-5-FP8) is decoded inside MLA attention.
kiln.kv_cache @lat width 80 : f32
// CHECK-LABEL: func.func @mla_fp8
// CHECK: kiln.mla_attention %{{.*}}, %{{.*}}, %[[V:.*]] scales %[[S:.*]] block [128, 128], @lat
// CHECK-NOT: kiln.dequantize
func.func @mla_fp8(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %v: tensor<512x64xf8E4M3FN>, %s: tensor<4x1xf32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x8x32xf32> {
  %kvb = kiln.dequantize %v, %s block [128, 128] : tensor<512x64xf8E4M3FN>, tensor<4x1xf32> -> tensor<512x64xbf16>
  %o = kiln.mla_attention %qn, %qp, %kvb, @lat[%seq, %pos] scale 0.144 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
  return %o : tensor<?x8x32xf32>
}
