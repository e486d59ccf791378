//===- Matmul.h - Activations times stored weights --------------*- C++ -*-===//
//
// y[T, N] = x[T, K] · Wᵀ for W [N, K] in any WeightFormat, FP32 accumulation.
//
// Every output is computed in one fixed order, whatever the path (GEMV or
// tiled GEMM), the thread count, the batch size or the instruction set:
// 16 lanes, lane(k) accumulates its products x[k]·w[k] with fused
// multiply-adds in increasing k, then the lanes are summed as a tree (lane i
// plus lane i+8, then i+4, i+2, i+1). lane(k) = k mod 16, except for MXFP4
// where lane(k) = (k mod 32) / 2 (each byte's two nibbles share a lane).
// Positions past K up to a multiple of 16 count as x = w = 0. So results are
// bit-identical across thread counts, between the scalar and AVX-512 paths,
// and for a token whatever else is in the batch.
//
// Weights are decoded exactly as dequantizeRow() does (Dequant.h).
//
// MXFP4 weights under mxfp4Activations() == Int8 (CpuFeatures.h) follow
// MatmulQ8.h instead: activations rounded to int8 per 32-value block and
// exact integer dot products per block, with their own fixed order, so
// those results are bit-identical across threads, batches and paths too.
// BF16 weights under bf16Activations() == BF16 follow MatmulBf16.h: BF16
// activations and the pairwise order of vdpbf16ps, equally fixed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_MATMUL_H
#define KILN_RUNTIME_CPU_MATMUL_H

#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"

namespace kiln::cpu {

/// y[T, N] = x[T, K] · Wᵀ, rows split over the pool's threads. `w` is one
/// matrix (count == 1); x is row-major [T, w.cols], y is [T, w.rows].
void matmul(ThreadPool &pool, const float *x, int64_t T, const WeightView &w,
            float *y);

struct Q8Block; // MatmulQ8.h: one 32-value block of an int8 activation row

/// Operands of matmulRows(): input and output rows addressed directly
/// (row t at base + t * stride) or through an index (base + index[t] *
/// stride), which lets fused kernels gather and scatter without copies.
struct MatmulRows {
  const float *x = nullptr;
  int64_t xStride = 0;
  const int32_t *xIndex = nullptr;
  float *y = nullptr;
  int64_t yStride = 0;
  const int32_t *yIndex = nullptr;
  int64_t tokens = 0;
  /// Add to y instead of overwriting it: y = y + (x · Wᵀ), the sum formed
  /// first, then added.
  bool accumulate = false;
  /// Optional, for weights that take int8 activations (usesInt8(w)): x's
  /// rows already quantized by quantizeRowsQ8(), row r at xQ8 + r * (K /
  /// 32), addressed through xIndex as x is. Saves quantizing the same rows
  /// on every call; the result is the same.
  const Q8Block *xQ8 = nullptr;
  /// Optional, for weights that take BF16 activations (usesBf16Dot(w)): x's
  /// rows already rounded by roundRowsBf16(), row r at xBf16 + r *
  /// bf16RowLength(K), addressed through xIndex as x is. Rounding inside
  /// every call costs as much as the products when a call has few rows.
  const uint16_t *xBf16 = nullptr;

  const float *xRow(int64_t t) const {
    return x + (xIndex ? xIndex[t] : t) * xStride;
  }
  float *yRow(int64_t t) const {
    return y + (yIndex ? yIndex[t] : t) * yStride;
  }
};

/// Output columns [nBegin, nEnd) of `io` with weight `w`, on the calling
/// thread. Small token counts take a GEMV that decodes weights in registers;
/// larger ones decode a tile of W once and reuse it across tokens.
void matmulRows(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                int64_t nEnd);

/// Whether a matmul with `w` rounds its activations to int8 (MXFP4 under
/// Mxfp4Activations::Int8, MatmulQ8.h).
bool usesInt8(const WeightView &w);

/// Whether a matmul with `w` rounds its activations to BF16 (BF16 under
/// Bf16Activations::BF16, MatmulBf16.h).
bool usesBf16Dot(const WeightView &w);

/// Bytes quantizeRowsQ8() writes for `rows` rows of K values.
inline size_t q8Bytes(int64_t rows, int64_t K) {
  return size_t(rows) * size_t(K / 32) * 64;
}

/// Quantizes rows [0, rows) of x (row r at x + r * stride, K values) for
/// MatmulRows::xQ8, rows split over the pool. `out`: q8Bytes(rows, K)
/// bytes, 64-byte aligned.
void quantizeRowsQ8(ThreadPool &pool, const float *x, int64_t stride,
                    int64_t rows, int64_t K, Q8Block *out);

/// Values per BF16 activation row: K rounded up to a multiple of 32.
inline int64_t bf16RowLength(int64_t K) { return (K + 31) / 32 * 32; }

/// Rounds rows [0, rows) of x (row r at x + r * stride, K values) for
/// MatmulRows::xBf16, rows split over the pool. `out`: rows *
/// bf16RowLength(K) values, 64-byte aligned.
void roundRowsBf16(ThreadPool &pool, const float *x, int64_t stride,
                   int64_t rows, int64_t K, uint16_t *out);

/// Token counts up to this take the GEMV path.
constexpr int64_t kGemvMaxTokens = 4;

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_MATMUL_H
