//===- Elementwise.h - Pointwise FP32 kernels -------------------*- C++ -*-===//
//
// All take contiguous FP32 arrays; the output may alias an input.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ELEMENTWISE_H
#define KILN_RUNTIME_CPU_ELEMENTWISE_H

#include <cstdint>

namespace kiln::cpu {

/// y = x / (1 + exp(-x)).
void silu(const float *x, int64_t n, float *y);
/// y = 1 / (1 + exp(-x)).
void sigmoid(const float *x, int64_t n, float *y);
/// y = max(x, 0).
void relu(const float *x, int64_t n, float *y);
/// y = x * s.
void scale(const float *x, int64_t n, float s, float *y);
/// y = silu(gate) * up, the SwiGLU of GLM.md §3.1.
void swiglu(const float *gate, const float *up, int64_t n, float *y);

/// y[rows, cols] = a + b. `b` is [rows, cols], or a single row [cols]
/// broadcast over all rows when `rhsIsRow`.
void add(const float *a, const float *b, int64_t rows, int64_t cols, float *y,
         bool rhsIsRow = false);
/// y = a * b, broadcasting like add().
void mul(const float *a, const float *b, int64_t rows, int64_t cols, float *y,
         bool rhsIsRow = false);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ELEMENTWISE_H
