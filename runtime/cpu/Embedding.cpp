//===- Embedding.cpp ------------------------------------------------------===//

#include "runtime/cpu/Embedding.h"
#include "runtime/cpu/Dequant.h"

using namespace kiln::cpu;

void kiln::cpu::embedding(const WeightView &table, const int32_t *ids,
                          int64_t T, float *y) {
  for (int64_t t = 0; t < T; ++t)
    dequantizeRow(table, ids[t], y + t * table.cols);
}
