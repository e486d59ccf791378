//===- Gqa.h - Grouped-query attention (GLM-4.x) ----------------*- C++ -*-===//
//
// GLM.md section 3.3: causal softmax attention in FP32 where query head h
// reads KV head h / (qHeads / kvHeads), over separate K and V caches.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_GQA_H
#define KILN_RUNTIME_CPU_ATTENTION_GQA_H

#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"
#include "runtime/cpu/attention/Workspace.h"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

struct GqaArgs {
  int64_t tokens = 0;                 // T; tokens may mix sequences
  const int32_t *seqIds = nullptr;    // [T]
  const int32_t *positions = nullptr; // [T]; rows 0..positions[t] cached
  int64_t qHeads = 0;                 // Hq (GLM-4.5: 96)
  int64_t kvHeads = 0;                // Hk (8), divides Hq
  int64_t headDim = 0;                // D (128)
  int64_t valueDim = 0;               // Dv (128)
  const float *q = nullptr;           // [T, Hq, D], RoPE applied
  KvView keys;                        // width Hk * D
  KvView values;                      // width Hk * Dv
  float scale = 1.0f;                 // D^-0.5
};

size_t gqaWorkspaceBytes(const GqaArgs &args, int threads);

/// out [T, Hq, Dv]. Results do not depend on pool.size().
void gqaAttention(ThreadPool &pool, const GqaArgs &args, float *out,
                  Workspace &workspace);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_GQA_H
