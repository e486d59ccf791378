//===- Dequant.h - Scalar decoding of stored weight formats -----*- C++ -*-===//
//
// Reference decoders: one value or one row at a time. The fast kernels
// decode in registers; these define what they must agree with.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_DEQUANT_H
#define KILN_RUNTIME_CPU_DEQUANT_H

#include "runtime/cpu/Types.h"

namespace kiln::cpu {

/// E2M1 code (4 bits, bit 3 = sign) to float: +-{0, .5, 1, 1.5, 2, 3, 4, 6}.
float e2m1ToFloat(uint8_t code);
/// E8M0 scale byte to float: 2^(e - 127); 0xFF is NaN.
float e8m0ToFloat(uint8_t e);
/// FP8 E4M3FN byte to float (bias 7, no infinities, 0x7F/0xFF are NaN).
float e4m3ToFloat(uint8_t v);
float f16ToFloat(uint16_t v);

/// Writes row `row` of `w` (one matrix, count == 1) as `w.cols` floats.
void dequantizeRow(const WeightView &w, int64_t row, float *out);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_DEQUANT_H
