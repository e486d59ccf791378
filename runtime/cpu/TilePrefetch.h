//===- TilePrefetch.h - Prefetching a GEMM's next weight tile ---*- C++ -*-===//
//
// Internal to the tiled GEMMs (MatmulAvx512.cpp, MatmulAvx2Gemm.cpp): the
// decoders' kPanel, rowBytes() and bytesPer32() say where a tile's bytes
// lie (Avx512Decode.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_TILEPREFETCH_H
#define KILN_RUNTIME_CPU_TILEPREFETCH_H

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

namespace kiln::cpu {

/// The cache lines of one weight tile (rows [n, n + rows), columns [k0, k0
/// + len)), asked for into L2 a few at a time while the tile before it is
/// swept: a GEMM's weights stream from DRAM once per token block (an
/// expert's in MoE prefill), and a tile's rows are short runs (4 KiB of a
/// BF16 panel) that the hardware prefetchers start on too late.
class TilePrefetch {
public:
  template <class Dec>
  inline __attribute__((always_inline)) TilePrefetch(const Dec &dec, int64_t n,
                                                     int64_t rows, int64_t k0,
                                                     int64_t len) {
    const int64_t P = Dec::kPanel;
    const int64_t cols = std::min(len, dec.w.cols - k0);
    if (rows <= 0 || cols <= 0)
      return;
    bytes_ = (cols + 31) / 32 * P * Dec::bytesPer32();
    for (int64_t g = n / P * P; g < n + rows && groups_ < kMaxGroups; g += P)
      start_[groups_++] = static_cast<const char *>(dec.rowBytes(g)) +
                          k0 / 32 * P * Dec::bytesPer32();
    lines_ = groups_ * ((bytes_ + 63) / 64);
  }
  /// The tile a GEMM sweeps after rows [n0, n0 + rowTile) x columns [k0, k0
  /// + len), in a sweep of rows up to nEnd and kPadded columns in chunks of
  /// colChunk: the next chunk of the same rows, or after the last chunk the
  /// next rows' first (none past nEnd).
  template <class Dec>
  static inline __attribute__((always_inline)) TilePrefetch
  next(const Dec &dec, int64_t n0, int64_t k0, int64_t len, int64_t nEnd,
       int64_t kPadded, int64_t rowTile, int64_t colChunk) {
    const bool last = k0 + len == kPadded;
    const int64_t nextK = last ? 0 : k0 + len;
    const int64_t nextN = last ? n0 + rowTile : n0;
    return TilePrefetch(dec, nextN, std::min(rowTile, nEnd - nextN), nextK,
                        std::min(colChunk, kPadded - nextK));
  }
  /// Lines to ask for per call so that `calls` calls cover lines().
  int64_t perCall(int64_t calls) const { return (lines_ + calls - 1) / calls; }
  /// Asks for the next `count` lines (no divisions: this runs between
  /// kernel calls).
  inline __attribute__((always_inline)) void issue(int64_t count) {
    for (; count > 0 && group_ < groups_; --count) {
      _mm_prefetch(start_[group_] + offset_, _MM_HINT_T1);
      offset_ += 64;
      if (offset_ >= bytes_)
        offset_ = 0, ++group_;
    }
  }
  int64_t lines() const { return lines_; }

private:
  static constexpr int kMaxGroups = 32;
  const char *start_[kMaxGroups];
  int groups_ = 0, group_ = 0;
  int64_t bytes_ = 0, lines_ = 0, offset_ = 0;
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_TILEPREFETCH_H
