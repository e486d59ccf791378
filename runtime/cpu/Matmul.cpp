//===- Matmul.cpp - Dispatch and threading --------------------------------===//

#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/MatmulBf16.h"
#include "runtime/cpu/MatmulKernels.h"
#include "runtime/cpu/MatmulQ8.h"

#include <memory>
#include <new>

using namespace kiln::cpu;

namespace {
struct AlignedFree {
  void operator()(float *p) const {
    ::operator delete(p, std::align_val_t(64));
  }
};
struct ScratchSlot {
  std::unique_ptr<float, AlignedFree> data;
  size_t count = 0;
};
constexpr int kScratchSlots = 5;
} // namespace

float *kiln::cpu::threadScratch(int slot, size_t count) {
  thread_local ScratchSlot slots[kScratchSlots];
  ScratchSlot &s = slots[slot];
  if (s.count < count) {
    s.data.reset(static_cast<float *>(
        ::operator new(count * sizeof(float), std::align_val_t(64))));
    s.count = count;
  }
  return s.data.get();
}

void kiln::cpu::matmulRows(const MatmulRows &io, const WeightView &w,
                           int64_t nBegin, int64_t nEnd) {
  if (io.tokens <= 0 || nBegin >= nEnd)
    return;
  if (usesInt8(w))
    return matmulRowsQ8(io, w, nBegin, nEnd);
  if (usesBf16Dot(w))
    return matmulRowsBf16(io, w, nBegin, nEnd);
  if (useAvx512())
    matmulRowsAvx512(io, w, nBegin, nEnd);
  else if (useAvx2())
    matmulRowsAvx2(io, w, nBegin, nEnd);
  else
    matmulRowsScalar(io, w, nBegin, nEnd);
}

void kiln::cpu::matmul(ThreadPool &pool, const float *x, int64_t T,
                       const WeightView &w, float *y) {
  MatmulRows io;
  io.x = x;
  io.xStride = w.cols;
  io.y = y;
  io.yStride = w.rows;
  io.tokens = T;
  if (usesBf16Dot(w)) { // once here, not in every thread's every chunk
    const int64_t padded = bf16RowLength(w.cols);
    auto *rounded = reinterpret_cast<uint16_t *>(
        threadScratch(4, size_t(T * padded + 1) / 2));
    roundRowsBf16(pool, x, w.cols, T, w.cols, rounded);
    io.xBf16 = rounded;
  }
  // Whole 32-row tiles per thread keep the GEMM tiles full; GEMV rows are
  // independent, so any split gives the same bits. A weight row costs K
  // multiply-adds per token.
  pool.parallelFor(
      w.rows,
      [&](int64_t begin, int64_t end, int) { matmulRows(io, w, begin, end); },
      /*grain=*/32, /*unitCost=*/w.cols * T);
}
