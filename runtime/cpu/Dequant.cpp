//===- Dequant.cpp --------------------------------------------------------===//

#include "runtime/cpu/Dequant.h"

#include <cmath>
#include <limits>

using namespace kiln::cpu;

float kiln::cpu::e2m1ToFloat(uint8_t code) {
  static const float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f,
                                      2.0f, 3.0f, 4.0f, 6.0f};
  float m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

float kiln::cpu::e8m0ToFloat(uint8_t e) {
  if (e == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(e) - 127);
}

float kiln::cpu::e4m3ToFloat(uint8_t v) {
  int sign = v >> 7, exp = (v >> 3) & 0xF, man = v & 7;
  if (exp == 0xF && man == 7)
    return std::numeric_limits<float>::quiet_NaN();
  float mag = exp == 0 ? std::ldexp(float(man), -9)
                       : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

float kiln::cpu::f16ToFloat(uint16_t v) {
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

void kiln::cpu::dequantizeRow(const WeightView &w, int64_t row, float *out) {
  const int64_t k = w.cols;
  switch (w.format) {
  case WeightFormat::F32: {
    const float *src = static_cast<const float *>(w.data) + row * k;
    std::memcpy(out, src, k * sizeof(float));
    return;
  }
  case WeightFormat::BF16: {
    const uint16_t *src = static_cast<const uint16_t *>(w.data) + row * k;
    for (int64_t i = 0; i < k; ++i)
      out[i] = bf16ToFloat(src[i]);
    return;
  }
  case WeightFormat::F16: {
    const uint16_t *src = static_cast<const uint16_t *>(w.data) + row * k;
    for (int64_t i = 0; i < k; ++i)
      out[i] = f16ToFloat(src[i]);
    return;
  }
  case WeightFormat::FP8: {
    const uint8_t *src = static_cast<const uint8_t *>(w.data) + row * k;
    const float *scales = static_cast<const float *>(w.scales);
    const int64_t blocksPerRow = (k + 127) / 128;
    const float *rowScales = scales + (row / 128) * blocksPerRow;
    for (int64_t i = 0; i < k; ++i)
      out[i] = e4m3ToFloat(src[i]) * rowScales[i / 128];
    return;
  }
  case WeightFormat::MXFP4: {
    const uint8_t *src = static_cast<const uint8_t *>(w.data) + row * (k / 2);
    const uint8_t *scales =
        static_cast<const uint8_t *>(w.scales) + row * (k / 32);
    for (int64_t i = 0; i < k; i += 2) {
      float s = e8m0ToFloat(scales[i / 32]);
      uint8_t byte = src[i / 2];
      out[i] = e2m1ToFloat(byte & 0xF) * s;
      out[i + 1] = e2m1ToFloat(byte >> 4) * s;
    }
    return;
  }
  }
}
