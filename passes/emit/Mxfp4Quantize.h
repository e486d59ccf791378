//===- Mxfp4Quantize.h - Float rows to MXFP4 (OCP MX v1.0) -----*- C++ -*-===//
//
// E2M1 elements, one E8M0 scale per 32 consecutive elements of a row, two
// elements per byte with the even element in the low nibble (the Quark
// checkpoint layout). LLVM-free so the tests and the fuzzers link it alone.
//
// Scale rules (AMDGPU.md section 1):
//  * even (Quark's default): round the block maximum to E2M1 precision
//    first -- (bits(amax) + 0x200000) & 0x7F800000 -- then take
//    floor(log2) - 2, so amax in [1.75 * 2^k, 2^(k+1)) gets the next scale
//    up instead of clipping to 6;
//  * floor (OCP): 2^(floor(log2 amax) - 2).
// The scale exponent is clamped to the E8M0 range [-127, 127]; an all-zero
// block gets 2^-127. Elements round to the nearest E2M1 value with ties to
// even (as the Quark checkpoints do: golden fixtures re-quantize byte for
// byte) and saturate at +-6; NaN inputs give a NaN block (scale 0xFF).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_MXFP4QUANTIZE_H
#define KILN_PASSES_EMIT_MXFP4QUANTIZE_H

#include <cstddef>
#include <cstdint>

namespace kiln {

enum class Mxfp4ScaleRule { Even, Floor };

/// Scale exponent byte (E8M0) for a block whose largest magnitude is `amax`.
uint8_t mxfp4ScaleByte(float amax, Mxfp4ScaleRule rule);

/// E2M1 code (sign in bit 3) of `value / scale`, round to nearest even,
/// saturating at 6.
uint8_t e2m1Encode(float scaled);

/// Quantizes one row of `k` floats (k a multiple of 32) into k/2 packed
/// bytes and k/32 scale bytes.
void quantizeMxfp4Row(const float *row, int64_t k, Mxfp4ScaleRule rule,
                      uint8_t *packed, uint8_t *scales);

} // namespace kiln

#endif // KILN_PASSES_EMIT_MXFP4QUANTIZE_H
