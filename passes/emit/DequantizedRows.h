//===- DequantizedRows.h - Quantized matrices as f32 rows -------*- C++ -*-===//
//
// A window of a quantized source matrix written as f32 rows, the values the
// CPU kernels form from the quantized bytes: an FP8 matrix times its 128x128
// block scales, Quark MXFP4 values times their E8M0 scales, or a float (or
// FP8) matrix quantized to MXFP4 by Kiln (Mxfp4Quantize.h, whole rows, so
// the blocks are the source's) and then dequantized. The window is one
// rank's share under tensor parallelism, whose edges may cut the blocks
// (kiln-partition-tensor); the scales are indexed by the source's own rows
// and columns. Every product of an E2M1 value and an E8M0 scale is exact in
// f32.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_DEQUANTIZEDROWS_H
#define KILN_PASSES_EMIT_DEQUANTIZEDROWS_H

#include "passes/emit/Mxfp4Quantize.h"
#include "support/Status.h"
#include "support/TensorSource.h"

#include <functional>

namespace kiln::emit {

/// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of a source
/// matrix, counted in values.
struct Window {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

/// The value at `p` of a float or FP8 source tensor (BF16, F16, F32,
/// F8_E4M3), as f32.
float floatAt(Dtype dtype, const uint8_t *p);

/// Checks that `source` can be read through floatRow over the window: a
/// BF16/F16/F32 matrix, or an F8_E4M3 one with its F32 128x128 block
/// `fp8Scales`, holding the window.
Status checkFloatSource(const TensorView &source, const TensorView *fp8Scales,
                        const Window &w);

/// Columns [col0, col0 + cols) of row `row` of `source` as floats (times
/// their FP8 block scales with `fp8Scales`); checkFloatSource first.
void floatRow(const TensorView &source, const TensorView *fp8Scales,
              int64_t row, int64_t col0, int64_t cols, float *out);

/// Receives each row of the window in turn (`cols` floats).
using RowSink = std::function<Status(const float *row)>;

/// `values` (F8_E4M3, [N, K]) times `scales` (F32, [ceil(N/128),
/// ceil(K/128)]).
Status dequantizeFp8(const TensorView &values, const TensorView &scales,
                     const Window &w, const RowSink &sink);

/// Quark MXFP4: `values` (U8, [N, K/2], the even element in the low nibble)
/// times `scales` (U8 E8M0, [N, K/32]).
Status dequantizeMxfp4(const TensorView &values, const TensorView &scales,
                       const Window &w, const RowSink &sink);

/// `source` (BF16/F16/F32 [N, K]; or F8_E4M3 with `fp8Scales`, multiplied
/// first) quantized to MXFP4 under `rule`, one whole row at a time, then
/// dequantized.
Status roundTripMxfp4(const TensorView &source, const TensorView *fp8Scales,
                      Mxfp4ScaleRule rule, const Window &w,
                      const RowSink &sink);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_DEQUANTIZEDROWS_H
