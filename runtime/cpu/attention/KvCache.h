//===- KvCache.h - Writing and reading paged KV-cache rows ------*- C++ -*-===//
//
// Rows live in the cache in its element type (F32 or BF16) and are exchanged
// with the kernels as FP32. The pages a call touches must already exist
// (PagedKvCache::ensure, or the runtime's own allocator).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_KVCACHE_H
#define KILN_RUNTIME_CPU_ATTENTION_KVCACHE_H

#include "runtime/cpu/Types.h"

#include <cstdint>

namespace kiln::cpu {

/// Stores `rows` [tokens, cache.width] at (seqIds[t], positions[t]),
/// converting to the cache element type (BF16: round to nearest even).
void kvAppend(const KvView &cache, const int32_t *seqIds,
              const int32_t *positions, int64_t tokens, const float *rows);

/// Reads rows 0..n-1 of sequence `seq` into `out` [n, cache.width].
void kvRead(const KvView &cache, int32_t seq, int64_t n, float *out);

/// Reads columns [col, col + count) of one row into `out`.
void kvReadRow(const KvView &cache, int32_t seq, int32_t pos, int64_t col,
               int64_t count, float *out);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_KVCACHE_H
