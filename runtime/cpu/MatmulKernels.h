//===- MatmulKernels.h - Per-ISA matmul implementations ---------*- C++ -*-===//
//
// Internal to KilnCpu. Every implementation follows the summation order
// documented in Matmul.h; matmulRows() picks one at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_MATMULKERNELS_H
#define KILN_RUNTIME_CPU_MATMULKERNELS_H

#include "runtime/cpu/Matmul.h"

#include <cstddef>

namespace kiln::cpu {

/// Lanes of the canonical summation order.
constexpr int kLanes = 16;

/// How many row groups ahead the AVX-512 GEMVs (f32 and BF16 activations)
/// prefetch their weight rows into L2. Measured on a 2-vCPU Emerald Rapids
/// (bench/RESULTS.md, 2026-12-07): 2 and 4 the same within noise, 8 slower.
constexpr int kGemvPrefetchGroups = 2;

/// Sums kLanes lanes as the order of Matmul.h says: lane i plus lane i + 8,
/// then + 4, + 2, + 1 (the scalar references; the vector kernels add
/// register halves in the same pattern).
inline float treeSumLanes(float *lanes) {
  for (int half = kLanes / 2; half >= 1; half /= 2)
    for (int i = 0; i < half; ++i)
      lanes[i] = lanes[i] + lanes[i + half];
  return lanes[0];
}

void matmulRowsScalar(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                      int64_t nEnd);
void matmulRowsAvx512(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                      int64_t nEnd);
void matmulRowsAvx2(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                    int64_t nEnd);
/// Tokens per block of a tiled GEMM: `tokens` split into blocks of equal
/// size, each at most `maxBlock` and a multiple of `multiple` (the register
/// kernel's tokens), so an expert with 70 rows in MoE prefill runs one block
/// of 72 instead of 64 and a 6-row tail that decodes every tile again.
inline int64_t tokenBlockSize(int64_t tokens, int64_t maxBlock,
                              int64_t multiple) {
  const int64_t blocks = (tokens + maxBlock - 1) / maxBlock;
  return ((tokens + blocks - 1) / blocks + multiple - 1) / multiple * multiple;
}

/// The AVX2 path's tiled GEMM (more than kGemvMaxTokens tokens).
void matmulRowsAvx2Gemm(const MatmulRows &io, const WeightView &w,
                        int64_t nBegin, int64_t nEnd);

/// Per-thread scratch reused across calls: `slot` names one of a few
/// independent buffers (0-3: the kernels; 4: matmul()'s rounded rows). Returns
/// `count` floats aligned to 64 bytes, contents unspecified. Grows (allocates)
/// only when a call needs more than before.
float *threadScratch(int slot, size_t count);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_MATMULKERNELS_H
