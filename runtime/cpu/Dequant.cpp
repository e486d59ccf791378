//===- Dequant.cpp --------------------------------------------------------===//

#include "runtime/cpu/Dequant.h"

#include <cstring>

using namespace kiln::cpu;

void kiln::cpu::dequantizeRow(const WeightView &w, int64_t row, float *out) {
  const int64_t k = w.cols;
  switch (w.format) {
  case WeightFormat::F32: {
    const float *src = static_cast<const float *>(w.data) + row * k;
    std::memcpy(out, src, k * sizeof(float));
    return;
  }
  case WeightFormat::BF16: {
    if (w.panelRows != 1) {
      const uint16_t *base = static_cast<const uint16_t *>(w.data);
      for (int64_t c = 0; c < k; c += kPanelCols) {
        const uint16_t *src = base + panelOffset(row, c, k, w.panelRows);
        for (int64_t i = 0; i < kPanelCols; ++i)
          out[c + i] = bf16ToFloat(src[i]);
      }
      return;
    }
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
    const uint8_t *data = static_cast<const uint8_t *>(w.data);
    const uint8_t *scales = static_cast<const uint8_t *>(w.scales);
    const int64_t P = w.panelRows;
    for (int64_t b = 0; b < k / 32; ++b) { // a block: 16 bytes, one scale
      const float s = e8m0ToFloat(scales[panelOffset(row, b, k / 32, P, 1)]);
      const uint8_t *src =
          data + panelOffset(row, b * 16, k / 2, P, kPanelCols / 2);
      float *o = out + b * 32;
      for (int64_t i = 0; i < 16; ++i) {
        o[2 * i] = e2m1ToFloat(src[i] & 0xF) * s;
        o[2 * i + 1] = e2m1ToFloat(src[i] >> 4) * s;
      }
    }
    return;
  }
  }
}
