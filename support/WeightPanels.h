//===- WeightPanels.h - The CPU matmul's row-panel weight layout -*- C++
//-*-===//
//
// WeightLayout DensePanel4 (runtime/artifact/kiln_artifact.fbs): a BF16
// matrix [N, K] stored in panels of kPanelRows rows, each panel as K / 32
// chunks of [kPanelRows rows x 32 columns], row after row inside a chunk.
// A GEMV over one panel then reads one contiguous stream instead of four
// rows a page apart (measured on a Zen 5 guest: +20% on one thread, +28% on
// two, bench/RESULTS.md 2026-12-05). The values and the order in which the
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

/// Element offset of (n, k) in a matrix with K columns stored in panels of
/// `panelRows` rows (1: row-major, n * K + k).
inline int64_t panelOffset(int64_t n, int64_t k, int64_t K, int64_t panelRows) {
  if (panelRows == 1)
    return n * K + k;
  return (n / panelRows) * panelRows * K +
         (k / kPanelCols) * kPanelCols * panelRows +
         (n % panelRows) * kPanelCols + k % kPanelCols;
}

/// Writes the row-major matrix `src` [rows, cols] of `elemBytes`-byte
/// elements to `dst` in panels of kPanelRows rows (panelable() must hold).
inline void packPanels(const uint8_t *src, uint8_t *dst, int64_t rows,
                       int64_t cols, size_t elemBytes) {
  const size_t chunk = size_t(kPanelCols) * elemBytes;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; k += kPanelCols)
      std::memcpy(dst + size_t(panelOffset(n, k, cols, kPanelRows)) * elemBytes,
                  src + size_t(n * cols + k) * elemBytes, chunk);
}

} // namespace kiln

#endif // KILN_SUPPORT_WEIGHTPANELS_H
