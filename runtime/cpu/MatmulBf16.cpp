//===- MatmulBf16.cpp - BF16-activation matmul: reference, dispatch -------===//
//
// The scalar reference of the order in MatmulBf16.h, and the dispatch that
// rounds the activations once per call and picks the kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulBf16.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/MatmulKernels.h"
#include "runtime/cpu/ThreadPool.h"
#include "support/FloatFormats.h"

#include <cmath>
#include <cstring>

using namespace kiln::cpu;

uint16_t kiln::cpu::roundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0)
    return uint16_t((u >> 16) & 0x8000u); // zero or subnormal: signed zero
  return kiln::floatToBf16(x);            // nearest even; NaN stays quiet
}

void kiln::cpu::roundRowBf16Scalar(const float *x, int64_t K, uint16_t *out) {
  const int64_t padded = bf16RowLength(K);
  for (int64_t k = 0; k < padded; ++k)
    out[k] = k < K ? roundToBf16(x[k]) : 0;
}

/// A subnormal as zero of its sign: the instruction's DAZ on its inputs
/// (BF16 subnormals widen to FP32 subnormals) and FTZ on its results.
static float ftz(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

void kiln::cpu::matmulBf16Scalar(const MatmulRows &io, const uint16_t *const *x,
                                 const WeightView &w, int64_t nBegin,
                                 int64_t nEnd) {
  const int64_t K = w.cols, padded = bf16RowLength(K);
  float *row = threadScratch(0, size_t(padded));
  for (int64_t n = nBegin; n < nEnd; ++n) {
    dequantizeRow(w, n, row); // BF16 widened exactly, either layout
    for (int64_t k = 0; k < padded; ++k)
      row[k] = k < K ? ftz(row[k]) : 0.0f;
    for (int64_t t = 0; t < io.tokens; ++t) {
      float lanes[kLanes] = {};
      for (int64_t k = 0; k < padded; k += 2) {
        float &lane = lanes[(k % 32) / 2];
        lane = ftz(
            std::fma(ftz(kiln::bf16ToFloat(x[t][k + 1])), row[k + 1], lane));
        lane = ftz(std::fma(ftz(kiln::bf16ToFloat(x[t][k])), row[k], lane));
      }
      const float sum = treeSumLanes(lanes);
      float *out = io.yRow(t) + n;
      *out = io.accumulate ? *out + sum : sum;
    }
  }
}

bool kiln::cpu::usesBf16Dot(const WeightView &w) {
  return w.format == WeightFormat::BF16 &&
         bf16Activations() == Bf16Activations::BF16;
}

void kiln::cpu::roundRowBf16(const float *x, int64_t K, uint16_t *out) {
  if (useAvx512Bf16())
    roundRowBf16Avx512(x, K, out);
  else
    roundRowBf16Scalar(x, K, out);
}

void kiln::cpu::roundRowsBf16(ThreadPool &pool, const float *x, int64_t stride,
                              int64_t rows, int64_t K, uint16_t *out) {
  const int64_t padded = bf16RowLength(K);
  pool.parallelFor(
      rows,
      [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r)
          roundRowBf16(x + r * stride, K, out + r * padded);
      },
      /*grain=*/1, /*unitCost=*/K);
}

void kiln::cpu::matmulRowsBf16(const MatmulRows &io, const WeightView &w,
                               int64_t nBegin, int64_t nEnd) {
  const int64_t K = w.cols, padded = bf16RowLength(K);
  // Token t's rounded row at rows[t].
  const uint16_t **rows = reinterpret_cast<const uint16_t **>(
      threadScratch(3, size_t(io.tokens) * sizeof(void *) / sizeof(float)));
  if (io.xBf16) {
    for (int64_t t = 0; t < io.tokens; ++t)
      rows[t] = io.xBf16 + (io.xIndex ? io.xIndex[t] : t) * padded;
  } else {
    auto *values = reinterpret_cast<uint16_t *>(
        threadScratch(1, size_t(io.tokens * padded + 1) / 2));
    for (int64_t t = 0; t < io.tokens; ++t) {
      roundRowBf16(io.xRow(t), K, values + t * padded);
      rows[t] = values + t * padded;
    }
  }
  if (useAvx512Bf16())
    matmulBf16Avx512Bf16(io, rows, w, nBegin, nEnd);
  else
    matmulBf16Scalar(io, rows, w, nBegin, nEnd);
}

void kiln::cpu::packPairsBf16Scalar(const uint16_t *const *x, int64_t count,
                                    int64_t n, uint16_t *out) {
  for (int64_t p = 0; p < bf16Pairs(count); ++p, out += 2 * n) {
    const uint16_t *odd = 2 * p + 1 < count ? x[2 * p + 1] : nullptr;
    for (int64_t l = 0; l < n; ++l) {
      out[2 * l] = x[2 * p][l];
      out[2 * l + 1] = odd ? odd[l] : 0;
    }
  }
}

void kiln::cpu::packPairsBf16(const uint16_t *const *x, int64_t count,
                              int64_t n, uint16_t *out) {
  if (useAvx512Bf16())
    packPairsBf16Avx512(x, count, n, out);
  else
    packPairsBf16Scalar(x, count, n, out);
}

void kiln::cpu::axpyPairsBf16Scalar(float *const *y, int64_t rows,
                                    const uint16_t *a, int64_t lda,
                                    const uint16_t *packed, int64_t pairs,
                                    int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *ar = a + r * lda;
    for (int64_t l = 0; l < n; ++l) {
      float acc = ftz(y[r][l]);
      for (int64_t p = 0; p < pairs; ++p) {
        const uint16_t *x = packed + p * 2 * n + 2 * l;
        acc = ftz(std::fma(ftz(kiln::bf16ToFloat(ar[2 * p + 1])),
                           ftz(kiln::bf16ToFloat(x[1])), acc));
        acc = ftz(std::fma(ftz(kiln::bf16ToFloat(ar[2 * p])),
                           ftz(kiln::bf16ToFloat(x[0])), acc));
      }
      y[r][l] = acc;
    }
  }
}

void kiln::cpu::axpyPairsBf16(float *const *y, int64_t rows, const uint16_t *a,
                              int64_t lda, const uint16_t *packed,
                              int64_t pairs, int64_t n) {
  if (useAvx512Bf16())
    axpyPairsBf16Avx512Bf16(y, rows, a, lda, packed, pairs, n);
  else
    axpyPairsBf16Scalar(y, rows, a, lda, packed, pairs, n);
}
