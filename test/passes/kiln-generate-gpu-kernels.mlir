// RUN: kiln-opt %s -kiln-lower-gpu-launches -kiln-generate-gpu-kernels=chip=gfx942 | FileCheck %s
// The generated IR parses back.
// RUN: kiln-opt %s -kiln-lower-gpu-launches -kiln-generate-gpu-kernels=chip=gfx950 | kiln-opt | FileCheck %s --check-prefix=GFX950
// RUN: not kiln-opt %s -kiln-lower-gpu-launches -kiln-generate-gpu-kernels=chip=gfx1100 2>&1 | FileCheck %s --check-prefix=CHIP

kiln_plan.weight @w1 dense "norm" f32 shape [64]
kiln_plan.weight @w2 dense "proj" bf16 shape [128, 64]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [64] f32
  %b = kiln_plan.buffer tokens "t2" row [64] f32
  %c = kiln_plan.buffer tokens "t3" row [128] f32
  %d = kiln_plan.buffer tokens "t4" row [64] f32
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32}
  kiln_plan.dispatch matmul(%b, @w2, %c)
  kiln_plan.dispatch add(%a, %b, %d)
  // The same kernel twice is generated once.
  kiln_plan.dispatch rms_norm(%d, @w1, %a) {eps = 1.0e-05 : f32}
  kiln_plan.return %a
}

// One gpu.module after the plans, one kernel per distinct launch, each
// named by its symbol for the chip. rms_norm: a row per workgroup, its
// sum of squares reduced across the waves in LDS, the reciprocal square
// root from the hardware instruction.
// CHECK: gpu.module @kiln_kernels
// CHECK: gpu.func @kiln_rms_norm_c64_epsX3727c5ac_gfx942({{.*}}) workgroup(%{{.*}} : memref<4xf32, #gpu.address_space<workgroup>>) kernel
// CHECK: gpu.block_id x
// CHECK: memref.store {{.*}} #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.amdgcn.rsq.f32"
// CHECK-NOT: gpu.func @kiln_rms_norm
// CHECK: gpu.func @kiln_bf16_gemm_n128_k64_t1x4_gfx942(
// The BF16 GEMM: 16x16x16 MFMAs (AMDGPU.md).
// CHECK: amdgpu.mfma 16x16x16 {{.*}} : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
// CHECK: gpu.func @kiln_binary_op0_c64_bc0_w4_gfx942(
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK: arith.addf {{.*}} : vector<4xf32>
// GFX950: gpu.func @kiln_rms_norm_c64_epsX3727c5ac_gfx950(
// CHIP: error: unknown chip 'gfx1100', expected gfx950 or gfx942
