//===- Embedding.h - Token embedding lookup ---------------------*- C++ -*-===//

#ifndef KILN_RUNTIME_CPU_EMBEDDING_H
#define KILN_RUNTIME_CPU_EMBEDDING_H

#include "runtime/cpu/Types.h"

namespace kiln::cpu {

/// y[t, :] = row ids[t] of `table` [vocab, dim] decoded to FP32; y is
/// [T, table.cols]. Ids are validated by the caller.
void embedding(const WeightView &table, const int32_t *ids, int64_t T,
               float *y);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_EMBEDDING_H
