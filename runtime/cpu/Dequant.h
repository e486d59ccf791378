//===- Dequant.h - Scalar decoding of stored weight formats -----*- C++ -*-===//
//
// The reference decoder of a weight row, built on the scalar decoders of
// support/FloatFormats.h. The fast kernels decode in registers; these define
// what they must agree with.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_DEQUANT_H
#define KILN_RUNTIME_CPU_DEQUANT_H

#include "runtime/cpu/Types.h"
#include "support/FloatFormats.h"

namespace kiln::cpu {

// The scalar decoders of the stored formats are shared with the compiler
// (support/FloatFormats.h); the kernels use them as cpu:: names.
using kiln::e2m1ToFloat;
using kiln::e4m3ToFloat;
using kiln::e8m0ToFloat;
using kiln::f16ToFloat;

/// Writes row `row` of `w` (one matrix, count == 1) as `w.cols` floats.
void dequantizeRow(const WeightView &w, int64_t row, float *out);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_DEQUANT_H
