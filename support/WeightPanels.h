//===- WeightPanels.h - The CPU matmul's row-panel layout -------*- C++ -*-===//
//
// WeightLayouts DensePanel4 and Mxfp4Panel4 (runtime/artifact/
// kiln_artifact.fbs): a BF16 matrix [N, K] stored in panels of kPanelRows
// rows, each panel as K / 32 chunks of [kPanelRows rows x 32 columns], row
// after row inside a chunk; an MXFP4 matrix the same way, its packed values
// (16 bytes a chunk) and its E8M0 scales (1 byte a chunk) each.
// A GEMV over one panel then reads one contiguous stream instead of four
// rows a page apart, which the hardware prefetchers follow better
// (bench/RESULTS.md, 2026-12-05). The values and the order in which the
// matmul adds them are those of the row-major matrix, so results do not
// change. The compiler writes it (passes/emit/WeightStreamer.cpp) for
// weights read only by kernel arguments declared `MatWeight`
// (support/abi/Kernels.td); the CPU runtime reads it (runtime/cpu).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_WEIGHTPANELS_H
#define KILN_SUPPORT_WEIGHTPANELS_H

#include <cstdint>
#include <cstring>

namespace kiln {

inline constexpr int64_t kPanelRows = 4;
inline constexpr int64_t kPanelCols = 32;

/// Whether a matrix [rows, cols] can be stored in panels.
inline bool panelable(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && rows % kPanelRows == 0 &&
         cols % kPanelCols == 0;
}

/// Offset in units of (n, k) in a matrix of K units per row stored in
/// panels of `panelRows` rows, each panel as chunks of `chunk` units per row
/// (1 panel row: row-major, n * K + k). A unit is an element for BF16 (32 a
/// chunk), a byte of two E2M1 values for MXFP4 (16 a chunk) and an E8M0
/// scale (1 a chunk): a chunk holds 32 values either way.
inline int64_t panelOffset(int64_t n, int64_t k, int64_t K, int64_t panelRows,
                           int64_t chunk = kPanelCols) {
  if (panelRows == 1)
    return n * K + k;
  return (n / panelRows) * panelRows * K + (k / chunk) * chunk * panelRows +
         (n % panelRows) * chunk + k % chunk;
}

/// Writes the row-major matrix `src` [rows, K units of `unitBytes`] to
/// `dst` in panels of kPanelRows rows with `chunk` units per chunk (rows a
/// multiple of kPanelRows, K of chunk).
inline void packPanels(const uint8_t *src, uint8_t *dst, int64_t rows,
                       int64_t K, size_t unitBytes,
                       int64_t chunk = kPanelCols) {
  const size_t bytes = size_t(chunk) * unitBytes;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < K; k += chunk)
      std::memcpy(dst + size_t(panelOffset(n, k, K, kPanelRows, chunk)) *
                            unitBytes,
                  src + size_t(n * K + k) * unitBytes, bytes);
}

} // namespace kiln

#endif // KILN_SUPPORT_WEIGHTPANELS_H
