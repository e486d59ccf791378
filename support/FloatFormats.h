//===- FloatFormats.h - Scalar decoding of stored number formats -*- C++
//-*-===//
//
// The scalar definitions of the formats weights are stored in: BF16, F16,
// FP8 E4M3FN, and the MXFP4 pieces (E2M1 values, E8M0 scales). The compiler
// converts checkpoint weights with them (passes/emit/WeightStreamer.cpp); the
// CPU kernels' reference decoders are built on them and the fast kernels must
// agree with them bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_FLOATFORMATS_H
#define KILN_SUPPORT_FLOATFORMATS_H

#include <cstdint>
#include <cstring>

namespace kiln {

/// E2M1 code (4 bits, bit 3 = sign) to float: +-{0, .5, 1, 1.5, 2, 3, 4, 6}.
float e2m1ToFloat(uint8_t code);
/// E8M0 scale byte to float: 2^(e - 127); 0xFF is NaN.
float e8m0ToFloat(uint8_t e);
/// FP8 E4M3FN byte to float (bias 7, no infinities, 0x7F/0xFF are NaN).
float e4m3ToFloat(uint8_t v);
/// IEEE half to float.
float f16ToFloat(uint16_t v);

inline float bf16ToFloat(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

} // namespace kiln

#endif // KILN_SUPPORT_FLOATFORMATS_H
