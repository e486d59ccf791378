//===- FloatFormats.cpp ---------------------------------------------------===//

#include "support/FloatFormats.h"

#include <cmath>
#include <limits>

float kiln::e2m1ToFloat(uint8_t code) {
  static const float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f,
                                      2.0f, 3.0f, 4.0f, 6.0f};
  float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

float kiln::e8m0ToFloat(uint8_t e) {
  if (e == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(e) - 127);
}

float kiln::e4m3ToFloat(uint8_t v) {
  int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 7;
  if (exp == 0xF && man == 7)
    return std::numeric_limits<float>::quiet_NaN();
  float mag = exp == 0 ? std::ldexp(float(man), -9)
                       : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

float kiln::f16ToFloat(uint16_t v) {
  int sign = v >> 15, exp = (v >> 10) & 0x1F, man = v & 0x3FF;
  float mag;
  if (exp == 0)
    mag = std::ldexp(float(man), -24);
  else if (exp == 31)
    mag = man ? std::numeric_limits<float>::quiet_NaN()
              : std::numeric_limits<float>::infinity();
  else
    mag = std::ldexp(1.0f + float(man) / 1024.0f, exp - 15);
  return sign ? -mag : mag;
}
