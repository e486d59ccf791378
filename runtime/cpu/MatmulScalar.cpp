//===- MatmulScalar.cpp - Portable matmul ---------------------------------===//
//
// The reference for the summation order in Matmul.h, written out one lane
// at a time. Decodes each weight row with dequantizeRow().
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/MatmulKernels.h"

#include <cmath>

using namespace kiln::cpu;

void kiln::cpu::matmulRowsScalar(const MatmulRows &io, const WeightView &w,
                                 int64_t nBegin, int64_t nEnd) {
  const int64_t k = w.cols;
  const int64_t padded = (k + kLanes - 1) / kLanes * kLanes;
  const bool pairLanes = w.format == WeightFormat::MXFP4;
  float *row = threadScratch(0, size_t(k));
  for (int64_t n = nBegin; n < nEnd; ++n) {
    dequantizeRow(w, n, row);
    for (int64_t t = 0; t < io.tokens; ++t) {
      const float *x = io.xRow(t);
      float lanes[kLanes] = {};
      for (int64_t i = 0; i < padded; ++i) {
        int lane = pairLanes ? int(i % 32) / 2 : int(i % kLanes);
        float xv = i < k ? x[i] : 0.0f, wv = i < k ? row[i] : 0.0f;
        lanes[lane] = std::fma(xv, wv, lanes[lane]);
      }
      float sum = treeSumLanes(lanes);
      float *out = io.yRow(t) + n;
      *out = io.accumulate ? *out + sum : sum;
    }
  }
}
