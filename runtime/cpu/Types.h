//===- Types.h - Views the CPU kernels compute on ---------------*- C++ -*-===//
//
// Activations are FP32, row-major, one row per token. Weights stay in the
// format the artifact stores them in and are decoded inside the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_TYPES_H
#define KILN_RUNTIME_CPU_TYPES_H

#include "support/FloatFormats.h"
#include "support/WeightPanels.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::cpu {

/// How a 2-D weight [rows = N (out), cols = K (in)] is stored.
enum class WeightFormat : uint8_t {
  F32,   // float [N, K]
  BF16,  // uint16 bfloat16 [N, K]
  F16,   // uint16 IEEE half [N, K]
  FP8,   // uint8 E4M3FN [N, K] + float scales [ceil(N/128), ceil(K/128)]
         // (multipliers: W = q * s, the GLM "weight_scale_inv")
  MXFP4, // uint8 [N, K/2], two E2M1 per byte, low nibble = even element,
         // + uint8 E8M0 scales [N, K/32] (scale = 2^(e - 127), 0xFF = NaN)
};

/// A 2-D weight, or a stack of them (experts) when `count` > 1: matrix e
/// starts at `data + e * dataStride` bytes and its scales at
/// `scales + e * scaleStride` bytes.
struct WeightView {
  WeightFormat format = WeightFormat::F32;
  const void *data = nullptr;
  const void *scales = nullptr; // FP8 and MXFP4 only
  int64_t rows = 0;             // N
  int64_t cols = 0;             // K
  int64_t count = 1;
  int64_t dataStride = 0;
  int64_t scaleStride = 0;
  /// 1: rows one after another. kPanelRows (BF16 and MXFP4): row panels,
  /// the artifact's DensePanel4 and Mxfp4Panel4 (support/WeightPanels.h).
  int64_t panelRows = 1;
  /// MXFP4 only: matmuls take int8 activations (MatmulQ8.h) where AVX-512
  /// VNNI runs, whatever mxfp4Activations() says. Set on the weights only
  /// the draft plan reads (engine::Model), whose precision moves which
  /// tokens are proposed, never which are emitted.
  bool int8Activations = false;

  /// Matrix `e` of a stack.
  WeightView expert(int64_t e) const {
    WeightView v = *this;
    v.count = 1;
    v.data = static_cast<const uint8_t *>(data) + e * dataStride;
    if (scales)
      v.scales = static_cast<const uint8_t *>(scales) + e * scaleStride;
    return v;
  }
};

/// Element type of a KV-cache row.
enum class CacheElem : uint8_t { F32, BF16 };

/// One paged cache (e.g. the MLA latent cache of one layer): rows of `width`
/// values per (sequence, position). `pages[seq][pos / pageRows]` is the base
/// of the page holding position `pos`; rows within a page are contiguous.
struct KvView {
  int64_t width = 0;
  CacheElem elem = CacheElem::F32;
  int64_t pageRows = 0;
  const std::vector<std::vector<uint8_t *>> *pages = nullptr;

  int64_t rowBytes() const { return width * (elem == CacheElem::F32 ? 4 : 2); }
  uint8_t *row(int32_t seq, int32_t pos) const {
    return (*pages)[seq][pos / pageRows] + (pos % pageRows) * rowBytes();
  }
};

// BF16 <-> float, shared with the compiler (support/FloatFormats.h).
using kiln::bf16ToFloat;
using kiln::floatToBf16;

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_TYPES_H
