//===- Elementwise.cpp ----------------------------------------------------===//

#include "runtime/cpu/Elementwise.h"

#include <algorithm>
#include <cmath>

using namespace kiln::cpu;

static inline float sigmoidOf(float v) { return 1.0f / (1.0f + std::exp(-v)); }

void kiln::cpu::silu(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void kiln::cpu::sigmoid(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = sigmoidOf(x[i]);
}

void kiln::cpu::relu(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = std::max(x[i], 0.0f);
}

void kiln::cpu::scale(const float *x, int64_t n, float s, float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * s;
}

void kiln::cpu::swiglu(const float *gate, const float *up, int64_t n,
                       float *y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

template <typename Op>
static void binary(const float *a, const float *b, int64_t rows, int64_t cols,
                   float *y, bool rhsIsRow, Op op) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *ar = a + r * cols;
    const float *br = rhsIsRow ? b : b + r * cols;
    float *yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = op(ar[c], br[c]);
  }
}

void kiln::cpu::add(const float *a, const float *b, int64_t rows, int64_t cols,
                    float *y, bool rhsIsRow) {
  binary(a, b, rows, cols, y, rhsIsRow, [](float u, float v) { return u + v; });
}

void kiln::cpu::mul(const float *a, const float *b, int64_t rows, int64_t cols,
                    float *y, bool rhsIsRow) {
  binary(a, b, rows, cols, y, rhsIsRow, [](float u, float v) { return u * v; });
}
