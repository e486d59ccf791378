//===- Norm.h - Row normalizations ------------------------------*- C++ -*-===//
//
// FP32 in and out, sums formed in double. `y` may alias `x`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_NORM_H
#define KILN_RUNTIME_CPU_NORM_H

#include <cstdint>

namespace kiln::cpu {

/// GLM RMSNorm (GLM.md §3.1), per row of x [rows, dim]:
/// y = x * rsqrt(mean(x²) + eps) * weight. A null weight means all ones.
void rmsNorm(const float *x, int64_t rows, int64_t dim, const float *weight,
             float eps, float *y);

/// y = (x - mean) * rsqrt(var + eps) * weight + bias, with the biased
/// variance. Null weight or bias mean ones or zeros.
void layerNorm(const float *x, int64_t rows, int64_t dim, const float *weight,
               const float *bias, float eps, float *y);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_NORM_H
