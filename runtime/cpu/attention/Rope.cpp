//===- Rope.cpp -----------------------------------------------------------===//

#include "runtime/cpu/attention/Rope.h"

#include <cmath>
#include <vector>

using namespace kiln::cpu;

void kiln::cpu::rope(float *x, int64_t tokens, int64_t heads, int64_t dim,
                     const int32_t *positions, RopeStyle style, float theta,
                     int64_t offset, int64_t rotaryDim) {
  const int64_t half = rotaryDim / 2;
  std::vector<double> invFreq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = std::pow(double(theta), -2.0 * double(i) / double(rotaryDim));
  // Pair i rotates elements (i*step, i*step + stride) of the rotary span.
  const int64_t step = style == RopeStyle::Interleaved ? 2 : 1;
  const int64_t stride = style == RopeStyle::Interleaved ? 1 : half;
  for (int64_t t = 0; t < tokens; ++t) {
    float *token = x + t * heads * dim + offset;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(positions[t]) * invFreq[i];
      const double c = std::cos(angle), s = std::sin(angle);
      float *pair = token + i * step;
      for (int64_t h = 0; h < heads; ++h, pair += dim) {
        const double a = pair[0], b = pair[stride];
        pair[0] = float(a * c - b * s);
        pair[stride] = float(b * c + a * s);
      }
    }
  }
}
