//===- Mxfp4Quantize.cpp --------------------------------------------------===//

#include "passes/emit/Mxfp4Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kiln;

uint8_t kiln::mxfp4ScaleByte(float amax, Mxfp4ScaleRule rule) {
  if (std::isnan(amax))
    return 0xFF;
  if (amax == 0.0f || !std::isfinite(amax))
    return amax == 0.0f ? 0 : 254;
  uint32_t bits;
  std::memcpy(&bits, &amax, 4);
  if (rule == Mxfp4ScaleRule::Even)
    bits = (bits + 0x200000u) & 0x7F800000u;
  else
    bits &= 0x7F800000u;
  // floor(log2) of a normal float is its unbiased exponent; subnormals
  // (exponent field 0) are below every representable E8M0 scale anyway.
  int exponent = int(bits >> 23) - 127;
  if ((bits >> 23) == 0)
    exponent = -127;
  int scale = std::clamp(exponent - 2, -127, 127);
  return uint8_t(scale + 127);
}

uint8_t kiln::e2m1Encode(float scaled) {
  // Magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 with codes 0..7; decision points
  // are the midpoints, ties go to the even code.
  static const float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  uint8_t sign = std::signbit(scaled) ? 8 : 0;
  float a = std::fabs(scaled);
  uint8_t code = 0;
  while (code < 7 && a > kMid[code])
    ++code;
  // On an exact midpoint the loop stopped at the lower code; keep it if
  // even, otherwise move up to the even neighbour.
  if (code < 7 && a == kMid[code] && (code & 1))
    ++code;
  if (code == 0)
    sign = 0; // no negative zero
  return uint8_t(sign | code);
}

void kiln::quantizeMxfp4Row(const float *row, int64_t k, Mxfp4ScaleRule rule,
                            uint8_t *packed, uint8_t *scales) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float *block = row + b * 32;
    float amax = 0.0f;
    bool nan = false;
    for (int i = 0; i < 32; ++i) {
      nan |= std::isnan(block[i]);
      amax = std::max(amax, std::fabs(block[i]));
    }
    uint8_t s = nan ? 0xFF : mxfp4ScaleByte(amax, rule);
    scales[b] = s;
    // 2^-(e - 127), computed exactly with ldexp (covers 2^127).
    float inv = s == 0xFF ? 0.0f : std::ldexp(1.0f, 127 - int(s));
    for (int i = 0; i < 32; i += 2) {
      uint8_t lo = e2m1Encode(block[i] * inv);
      uint8_t hi = e2m1Encode(block[i + 1] * inv);
      packed[(b * 32 + i) / 2] = uint8_t(lo | (hi << 4));
    }
  }
}
