//===- Norm.cpp -----------------------------------------------------------===//

#include "runtime/cpu/Norm.h"

#include <cmath>

using namespace kiln::cpu;

namespace {
/// Eight partial sums in double so the loop vectorizes without
/// reassociation; the partials are then added in a fixed order.
constexpr int kParts = 8;

double sumOf(const float *x, int64_t n) {
  double part[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int j = 0; j < kParts; ++j)
      part[j] += double(x[i + j]);
  for (; i < n; ++i)
    part[i % kParts] += double(x[i]);
  double s = 0;
  for (double p : part)
    s += p;
  return s;
}

/// Σ (x - center)².
double squaresOf(const float *x, int64_t n, double center) {
  double part[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int j = 0; j < kParts; ++j) {
      double d = double(x[i + j]) - center;
      part[j] += d * d;
    }
  for (; i < n; ++i) {
    double d = double(x[i]) - center;
    part[i % kParts] += d * d;
  }
  double s = 0;
  for (double p : part)
    s += p;
  return s;
}
} // namespace

void kiln::cpu::rmsNorm(const float *x, int64_t rows, int64_t dim,
                        const float *weight, float eps, float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * dim;
    float *yr = y + r * dim;
    const float inv =
        float(1.0 / std::sqrt(squaresOf(xr, dim, 0.0) / double(dim) + eps));
    if (weight)
      for (int64_t i = 0; i < dim; ++i)
        yr[i] = xr[i] * inv * weight[i];
    else
      for (int64_t i = 0; i < dim; ++i)
        yr[i] = xr[i] * inv;
  }
}

void kiln::cpu::layerNorm(const float *x, int64_t rows, int64_t dim,
                          const float *weight, const float *bias, float eps,
                          float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * dim;
    float *yr = y + r * dim;
    const double mean = sumOf(xr, dim) / double(dim);
    const double var = squaresOf(xr, dim, mean) / double(dim);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i) {
      float v = float((double(xr[i]) - mean) * inv);
      if (weight)
        v *= weight[i];
      if (bias)
        v += bias[i];
      yr[i] = v;
    }
  }
}
