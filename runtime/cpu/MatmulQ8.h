//===- MatmulQ8.h - MXFP4 weights times int8 activations --------*- C++ -*-===//
//
// Internal to KilnCpu: the matmul of an MXFP4 weight when
// mxfp4Activations() is Int8. The order below is the contract; the scalar
// reference and the AVX-512 VNNI kernel follow it bit for bit, so results do
// not depend on the instruction set, the thread count or the batch.
//
// Activations: each row of x is cut into 32-value blocks. A block's scale
// is d = amax / 127 (amax the largest |x|), and q = round-to-nearest-even(
// x * (1 / d)) clamped to [-127, 127] (d = 0 gives q = 0; a block holding a
// NaN or an infinity gets q = 0 and d = NaN, so its outputs are NaN).
//
// Weights: the E2M1 code c of each value becomes the integer 2 * e2m1(c)
// (-12 .. 12); the block's E8M0 byte e scales by 2^(e - 127) (0xFF reads as
// 2^128, which overflows: the exact path's NaN becomes an infinity or NaN).
//
// One output y[t, n]: four lanes j = 0..3 per block b; lane j takes the
// block's values 8j .. 8j + 7. Its integer sum
//   s = Σ (2 * e2m1(c_i)) * q_i        (exact in int32)
// enters the lane as lane_j = fma(float(s), m_b, lane_j) with
// m_b = (d_b / 2) * 2^(e_b - 127) (one rounding, as ldexpf / vscalefps),
// blocks in increasing b. Then y = (lane_0 + lane_1) + (lane_2 + lane_3).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_MATMULQ8_H
#define KILN_RUNTIME_CPU_MATMULQ8_H

#include "runtime/cpu/Matmul.h"

namespace kiln::cpu {

/// One 32-value block of a quantized activation row, one cache line.
struct alignas(64) Q8Block {
  int8_t even[16];    // q of values 0, 2, ..., 30 (the low nibbles' values)
  int8_t odd[16];     // q of values 1, 3, ..., 31 (the high nibbles')
  int32_t negCorr[4]; // -12 * Σ q over values 8j .. 8j + 7, lane j
  float halfScale;    // d / 2
};

/// The unsigned weight byte of code c: 2 * e2m1(c) + 12 (0 .. 24), the
/// form vpdpbusd multiplies; negCorr takes the 12 back out.
inline constexpr uint8_t kQ8WeightBias = 12;
inline constexpr uint8_t kQ8WeightTable[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                               12, 11, 10, 9,  8,  6,  4,  0};

/// Quantizes x [K] (K a multiple of 32) into K / 32 blocks.
void quantizeQ8Scalar(const float *x, int64_t K, Q8Block *out);
void quantizeQ8Avx512(const float *x, int64_t K, Q8Block *out);

/// y rows [nBegin, nEnd) of `io` for the MXFP4 weight `w`, from the
/// quantized activations: token t's w.cols / 32 blocks at q[t].
void matmulQ8Scalar(const MatmulRows &io, const Q8Block *const *q,
                    const WeightView &w, int64_t nBegin, int64_t nEnd);
void matmulQ8Avx512Vnni(const MatmulRows &io, const Q8Block *const *q,
                        const WeightView &w, int64_t nBegin, int64_t nEnd);

/// matmulRows() for an MXFP4 weight under Mxfp4Activations::Int8: quantizes
/// the rows of `io` (per call, on the calling thread) unless io.xQ8 holds
/// them, then multiplies.
void matmulRowsQ8(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                  int64_t nEnd);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_MATMULQ8_H
