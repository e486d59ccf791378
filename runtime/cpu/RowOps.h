//===- RowOps.h - Per-row reductions and selections -------------*- C++ -*-===//
//
// Each works on the rows of a row-major FP32 matrix [rows, cols]
// independently. Ordering ties go to the lower index; NaN ranks below every
// number.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ROWOPS_H
#define KILN_RUNTIME_CPU_ROWOPS_H

#include <cstdint>

namespace kiln::cpu {

/// y = exp(x - max) / Σ exp(x - max). `y` may alias `x`.
void softmax(const float *x, int64_t rows, int64_t cols, float *y);

/// Index of the largest entry of each row.
void argmax(const float *x, int64_t rows, int64_t cols, int32_t *index);

/// The k largest entries of each row in descending order: values [rows, k]
/// and their column indices [rows, k]. Requires k <= cols.
void topK(const float *x, int64_t rows, int64_t cols, int64_t k, float *values,
          int32_t *indices);

/// Splits each row into nGroup equal groups, ranks the groups by the sum of
/// their two largest entries (the entry itself for one-entry groups), keeps
/// the best topkGroup groups and sets the others to -inf. `y` may alias `x`.
/// Requires cols % nGroup == 0 and topkGroup <= nGroup.
void groupLimit(const float *x, int64_t rows, int64_t cols, int64_t nGroup,
                int64_t topkGroup, float *y);

/// y[r, j] = x[r, index[r, j]] for j < k.
void gather(const float *x, int64_t rows, int64_t cols, const int32_t *index,
            int64_t k, float *y);

/// y = x / (Σ x + eps) per row, the sum formed in double. `y` may alias `x`.
void normalize(const float *x, int64_t rows, int64_t cols, float eps, float *y);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ROWOPS_H
