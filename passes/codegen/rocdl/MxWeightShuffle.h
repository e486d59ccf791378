//===- MxWeightShuffle.h - MXFP4 weights into the GPU kernels' layout ----===//
//
// Rewrites a checkpoint-layout MXFP4 matrix (packed [N, K/2], E8M0 scales
// [N, K/32]) into MxWeightLayout (MfmaLayout.h), the layout the gfx950 and
// gfx942 MXFP4 GEMMs read with one coalesced load per lane and step. The
// artifact emitter calls it once per GPU weight at compile time. LLVM-free.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_MXWEIGHTSHUFFLE_H
#define KILN_PASSES_CODEGEN_ROCDL_MXWEIGHTSHUFFLE_H

#include "passes/codegen/rocdl/MfmaLayout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rocdl {

/// E8M0 byte of padding blocks: 2^0.
inline constexpr uint8_t kMxPadScale = 127;

struct ShuffledMxWeight {
  MxWeightLayout layout;
  std::vector<uint8_t> data;   // layout.dataBytes()
  std::vector<uint8_t> scales; // layout.scaleBytes(), little-endian words
};

/// Shuffles one [n, k] matrix. `packed` holds n * k / 2 bytes and `scales`
/// n * k / 32 bytes. Returns false with `error` set when k is not a
/// multiple of 32 or a dimension is not positive.
bool shuffleMxfp4Weight(const uint8_t *packed, const uint8_t *scales, int64_t n,
                        int64_t k, ShuffledMxWeight &out, std::string &error);

/// The inverse, for tests and kiln-dump: the checkpoint-layout bytes of
/// rows [0, n) and K [0, k) of a shuffled matrix.
void unshuffleMxfp4Weight(const ShuffledMxWeight &in,
                          std::vector<uint8_t> &packed,
                          std::vector<uint8_t> &scales);

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_MXWEIGHTSHUFFLE_H
