//===- WeightRows.h - Where a weight row starts, and the format switch ---*- C++
//-*-===//
//
// Internal to the vector matmuls (MatmulAvx512.cpp, MatmulAvx2.cpp): the
// first bytes of row n of one matrix in each stored format (row-major, or
// the row panels of support/WeightPanels.h), and the switch that hands a
// matmul the decoder of its weight's format. Each instruction set has its
// own decoders (a family: F32, BF16<P>, F16, FP8, MXFP4<P>); the addressing
// and the choice are the same for all of them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_WEIGHTROWS_H
#define KILN_RUNTIME_CPU_WEIGHTROWS_H

#include "runtime/cpu/Types.h"
#include "support/WeightPanels.h"

#include <cstdint>

namespace kiln::cpu::rows {

inline const float *f32(const WeightView &w, int64_t n) {
  return static_cast<const float *>(w.data) + n * w.cols;
}
/// BF16 (P rows a panel; 1: row-major) and F16 (row-major).
inline const uint16_t *u16(const WeightView &w, int64_t n, int P = 1) {
  return static_cast<const uint16_t *>(w.data) + panelOffset(n, 0, w.cols, P);
}
inline const uint8_t *fp8(const WeightView &w, int64_t n) {
  return static_cast<const uint8_t *>(w.data) + n * w.cols;
}
/// FP8's scales for row n: its 128-row block's, one per 128 columns.
inline const float *fp8Scales(const WeightView &w, int64_t n) {
  return static_cast<const float *>(w.scales) +
         (n / 128) * ((w.cols + 127) / 128);
}
/// MXFP4: the row's first 16 bytes (32 values), and its first scale.
inline const uint8_t *mxfp4(const WeightView &w, int64_t n, int P) {
  return static_cast<const uint8_t *>(w.data) +
         panelOffset(n, 0, w.cols / 2, P, kPanelCols / 2);
}
inline const uint8_t *mxfp4Scales(const WeightView &w, int64_t n, int P) {
  return static_cast<const uint8_t *>(w.scales) +
         panelOffset(n, 0, w.cols / 32, P, 1);
}

/// An instruction set's decoders, one per format (BF16 and MXFP4 by rows per
/// panel).
template <class F32T, template <int> class BF16T, class F16T, class FP8T,
          template <int> class MXFP4T>
struct Family {
  using F32 = F32T;
  template <int P> using BF16 = BF16T<P>;
  using F16 = F16T;
  using FP8 = FP8T;
  template <int P> using MXFP4 = MXFP4T<P>;
};

/// Calls fn(decoder) with the family's decoder of w's format and layout.
template <class Family, class Fn>
inline void withDecoder(const WeightView &w, Fn &&fn) {
  const bool panels = w.panelRows == kPanelRows;
  switch (w.format) {
  case WeightFormat::F32:
    return fn(typename Family::F32{w});
  case WeightFormat::BF16:
    if (panels)
      return fn(typename Family::template BF16<kPanelRows>{w});
    return fn(typename Family::template BF16<1>{w});
  case WeightFormat::F16:
    return fn(typename Family::F16{w});
  case WeightFormat::FP8:
    return fn(typename Family::FP8{w});
  case WeightFormat::MXFP4:
    if (panels)
      return fn(typename Family::template MXFP4<kPanelRows>{w});
    return fn(typename Family::template MXFP4<1>{w});
  }
}

} // namespace kiln::cpu::rows

#endif // KILN_RUNTIME_CPU_WEIGHTROWS_H
