//===- MatmulQ8.cpp - Int8-activation MXFP4 matmul: reference, dispatch ---===//
//
// The scalar reference of the order in MatmulQ8.h, and the dispatch that
// quantizes the activations once per call and picks the kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulQ8.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/MatmulKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace kiln::cpu;

void kiln::cpu::quantizeQ8Scalar(const float *x, int64_t K, Q8Block *out) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const float *v = x + 32 * b;
    Q8Block &blk = out[b];
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < 32; ++i) {
      const float a = std::fabs(v[i]);
      finite = finite && a < std::numeric_limits<float>::infinity();
      amax = std::max(amax, a);
    }
    const float d =
        finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    const float inv = finite && d != 0.0f ? 1.0f / d : 0.0f;
    int32_t q[32];
    for (int i = 0; i < 32; ++i)
      q[i] = finite ? std::clamp(int32_t(std::nearbyint(v[i] * inv)), -127, 127)
                    : 0;
    for (int i = 0; i < 16; ++i) {
      blk.even[i] = int8_t(q[2 * i]);
      blk.odd[i] = int8_t(q[2 * i + 1]);
    }
    for (int j = 0; j < 4; ++j) {
      int32_t sum = 0;
      for (int i = 8 * j; i < 8 * j + 8; ++i)
        sum += q[i];
      blk.negCorr[j] = -int32_t(kQ8WeightBias) * sum;
    }
    blk.halfScale = d * 0.5f;
  }
}

namespace {

/// Row n's codes and scales: block b at codes + b * codeStride and
/// scales[b * scaleStride], in rows or panels alike.
struct Q8Row {
  const uint8_t *codes;
  const uint8_t *scales;
  int64_t codeStride, scaleStride;

  Q8Row(const WeightView &w, int64_t n)
      : codes(static_cast<const uint8_t *>(w.data) +
              kiln::panelOffset(n, 0, w.cols / 2, w.panelRows,
                                kiln::kPanelCols / 2)),
        scales(static_cast<const uint8_t *>(w.scales) +
               kiln::panelOffset(n, 0, w.cols / 32, w.panelRows, 1)),
        codeStride(16 * w.panelRows), scaleStride(w.panelRows) {}
};

float dotScalar(const Q8Row &row, const Q8Block *q, int64_t blocks) {
  float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t *c = row.codes + b * row.codeStride;
    const Q8Block &blk = q[b];
    const float m =
        std::ldexp(blk.halfScale, int(row.scales[b * row.scaleStride]) - 127);
    for (int j = 0; j < 4; ++j) {
      int32_t s = blk.negCorr[j];
      for (int i = 4 * j; i < 4 * j + 4; ++i)
        s += int32_t(kQ8WeightTable[c[i] & 0x0F]) * blk.even[i] +
             int32_t(kQ8WeightTable[c[i] >> 4]) * blk.odd[i];
      lanes[j] = std::fma(float(s), m, lanes[j]);
    }
  }
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

} // namespace

void kiln::cpu::matmulQ8Scalar(const MatmulRows &io, const Q8Block *const *q,
                               const WeightView &w, int64_t nBegin,
                               int64_t nEnd) {
  const int64_t blocks = w.cols / 32;
  for (int64_t n = nBegin; n < nEnd; ++n) {
    const Q8Row row(w, n);
    for (int64_t t = 0; t < io.tokens; ++t) {
      const float sum = dotScalar(row, q[t], blocks);
      float *out = io.yRow(t) + n;
      *out = io.accumulate ? *out + sum : sum;
    }
  }
}

bool kiln::cpu::usesInt8(const WeightView &w) {
  return w.format == WeightFormat::MXFP4 && w.cols % 32 == 0 &&
         (mxfp4Activations() == Mxfp4Activations::Int8 ||
          (w.int8Activations && useAvx512Vnni()));
}

static void quantizeRow(const float *x, int64_t K, Q8Block *out) {
  if (useAvx512Vnni())
    quantizeQ8Avx512(x, K, out);
  else
    quantizeQ8Scalar(x, K, out);
}

void kiln::cpu::quantizeRowsQ8(ThreadPool &pool, const float *x, int64_t stride,
                               int64_t rows, int64_t K, Q8Block *out) {
  pool.parallelFor(
      rows,
      [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r)
          quantizeRow(x + r * stride, K, out + r * (K / 32));
      },
      /*grain=*/1, /*unitCost=*/K);
}

void kiln::cpu::matmulRowsQ8(const MatmulRows &io, const WeightView &w,
                             int64_t nBegin, int64_t nEnd) {
  const int64_t K = w.cols, blocks = K / 32;
  static_assert(sizeof(Q8Block) == 16 * sizeof(float));
  // The kernels read token t's blocks at rows[t].
  const Q8Block **rows = reinterpret_cast<const Q8Block **>(
      threadScratch(3, size_t(io.tokens) * sizeof(void *) / sizeof(float)));
  if (io.xQ8) {
    for (int64_t t = 0; t < io.tokens; ++t)
      rows[t] = io.xQ8 + (io.xIndex ? io.xIndex[t] : t) * blocks;
  } else {
    auto *q = reinterpret_cast<Q8Block *>(
        threadScratch(1, size_t(io.tokens * blocks) * 16));
    for (int64_t t = 0; t < io.tokens; ++t) {
      quantizeRow(io.xRow(t), K, q + t * blocks);
      rows[t] = q + t * blocks;
    }
  }
  if (useAvx512Vnni())
    matmulQ8Avx512Vnni(io, rows, w, nBegin, nEnd);
  else
    matmulQ8Scalar(io, rows, w, nBegin, nEnd);
}
