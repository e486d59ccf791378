//===- GemmEmulator.h - The GPU GEMM kernels' programs, run on the CPU ----===//
//
// Executes the workgroup programs of passes/codegen/rocdl/GemmKernels.cpp
// lane by lane: the same tiling, loop nest, clamping, loads from the
// pre-shuffled weights, in-kernel activation quantization and stores, with
// every index taken from MfmaLayout.h (the header the generator builds its
// IR from). The MFMA instructions are scalar models written from the
// instruction descriptions (AMDGPU.md section 3), independently of
// MfmaLayout.h: if the kernel's lane assignment disagreed with the
// instruction's, the emulated GEMM would be wrong.
//
// Instruction models (not yet verified on hardware):
//  * v_mfma_scale_f32_16x16x128_f8f6f4, FP4 A and B (cbsz = blgp = 4):
//    A[i][k] is nibble k % 32 (low nibble first) of lane i + 16 * (k / 32),
//    its scale the E8M0 byte op_sel_a of that lane's scale register; B the
//    same with column j; D[i][j] = C[i][j] + sum_k sA*A * sB*B, the sum exact
//    (double) and rounded once to f32. Lane l returns D[4*(l/16)+r][l%16].
//  * v_mfma_f32_16x16x{16,32}_bf16: lane l holds A row l % 16, K
//    w * (l / 16) + i for i < w (w = 4 or 8); same rounding model.
//  * v_cvt_scalef32_pk_fp4_f32: x / scale rounded to the nearest E2M1 value,
//    ties to even, saturating at +-6, the sign kept (also on zero).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_GEMMEMULATOR_H
#define KILN_TEST_UNIT_ROCDL_GEMMEMULATOR_H

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/codegen/rocdl/MxWeightShuffle.h"

#include <array>
#include <cstdint>

namespace kiln::rocdl::emu {

/// 16 bytes per lane: one v4i32 operand.
using LaneBytes = std::array<uint8_t, 16>;
/// Up to 8 bf16 per lane.
using LaneBf16 = std::array<uint16_t, 8>;
/// The four accumulator registers of each lane.
using WaveAcc = std::array<std::array<float, 4>, kWaveSize>;

// Instruction models.
void mfmaScale16x16x128Fp4(const LaneBytes a[kWaveSize],
                           const LaneBytes b[kWaveSize],
                           const uint32_t scaleA[kWaveSize], int opselA,
                           const uint32_t scaleB[kWaveSize], int opselB,
                           WaveAcc &c);
void mfmaBf16(int width, const LaneBf16 a[kWaveSize],
              const LaneBf16 b[kWaveSize], WaveAcc &c);
uint8_t cvtScaleF32ToFp4(float x, uint8_t scaleExponent);

/// The gfx950 kernel's quantization of one lane's 32 activations: the
/// "even" scale exponent and 16 packed bytes (as GemmKernels.cpp builds it).
uint8_t quantizeLaneBlock(const float values[32], LaneBytes &packed);
/// The gfx942 kernel's dequantization of one FP4 code (bit trick, section 7).
uint16_t dequantizeFp4ToBf16(uint8_t code, uint8_t scaleExponent);

/// Runs the mx_gemm program for `spec` over the whole grid: x [rows, K]
/// f32, the shuffled weight, y [rows, N] (only valid outputs written).
void runMxGemm(const KernelSpec &spec, const float *x, int64_t rows,
               const ShuffledMxWeight &w, float *y);
/// The bf16_gemm program: w bf16 [N, K] row-major.
void runBf16Gemm(const KernelSpec &spec, const float *x, int64_t rows,
                 const uint16_t *w, float *y);

} // namespace kiln::rocdl::emu

#endif // KILN_TEST_UNIT_ROCDL_GEMMEMULATOR_H
