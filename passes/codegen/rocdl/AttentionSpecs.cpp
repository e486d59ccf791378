//===- AttentionSpecs.cpp - Which attention kernels can be generated ------===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests. The params
// of each kind (AttentionKernels.cpp has the argument lists):
//
//   kv_append      w (cache width), bf (1: BF16 cache)
//   gqa_attention  qh, kvh (heads), d, dv (key / value dims), bf, scale
//   mla_attention  s (stage: 0 absorb the query, 1 attend over the latent
//                  cache, 2 up-project), h (heads), n, r, v, l (nope, rope,
//                  value, latent dims); stages 0 and 2: wf (kv_b format: 0
//                  f32, 1 BF16, 2 MXFP4, 3 FP8 block-128), tt (tokens per
//                  workgroup); stage 1: bf, k (top-k list width, 0: causal),
//                  scale
//   indexer_top_k  s (stage: 0 score, 1 select); stage 0: h, d, bf, sp
//                  (workgroups per token), scale; stage 1: k
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelSpec.h"

#include <algorithm>
#include <string>

using namespace kiln::rocdl;

namespace {

/// kv_b formats (param "wf" of mla_attention stages 0 and 2).
enum WeightFormat : int64_t { kF32 = 0, kBf16 = 1, kMxfp4 = 2, kFp8 = 3 };

/// LDS bytes of a kernel (AttentionKernels.cpp allocates the same).
int64_t ldsBytes(const KernelSpec &spec) {
  int64_t wg = spec.blockSize();
  int64_t waves = wg / kWaveSize;
  int64_t stage = spec.param("s");
  switch (spec.kind) {
  case KernelKind::MlaAttention:
    if (stage == 0)
      return 4 * spec.param("tt") * spec.param("n");
    if (stage == 2)
      return 4 * spec.param("tt") * spec.param("l");
    [[fallthrough]];
  case KernelKind::GqaAttention: {
    bool gqa = spec.kind == KernelKind::GqaAttention;
    int64_t keyDim = gqa ? spec.param("d") : spec.param("l") + spec.param("r");
    int64_t valueDim = gqa ? spec.param("dv") : spec.param("l");
    // Value columns: colThreads threads per key split (attend core).
    int64_t colThreads = std::min(valueDim, wg);
    int64_t splits = wg / colThreads;
    int64_t cols = (valueDim + colThreads - 1) / colThreads;
    // q, the tile's weights and rows, two reductions, the splits' partials.
    return 4 * (keyDim + 2 * wg + 2 * waves + (splits - 1) * colThreads * cols);
  }
  case KernelKind::IndexerTopK:
    if (stage == 0)
      return 4 * spec.param("h") * spec.param("d");
    // Histogram, selection state, two scans' wave totals.
    return 4 * (256 + 2 + 2 * waves);
  default:
    return 0;
  }
}

} // namespace

std::string kiln::rocdl::validateAttentionSpec(const KernelSpec &spec) {
  std::string error;
  auto need = [&](bool ok, const std::string &what) {
    if (!ok && error.empty())
      error = std::string(kernelKindName(spec.kind)) + ": " + what;
  };
  auto positive = [&](const char *name) {
    need(spec.param(name) > 0, std::string("parameter ") + name +
                                   " must be positive, got " +
                                   std::to_string(spec.param(name)));
  };
  auto flag = [&](const char *name) {
    need(spec.param(name) <= 1, std::string("parameter ") + name +
                                    " must be 0 or 1, got " +
                                    std::to_string(spec.param(name)));
  };
  auto str = [](int64_t v) { return std::to_string(v); };
  int64_t stage = spec.param("s");
  need(spec.blockSize() == kRowBlock, "workgroup size must be " +
                                          str(kRowBlock) + ", got " +
                                          str(spec.blockSize()));
  switch (spec.kind) {
  case KernelKind::KvAppend:
    positive("w");
    flag("bf");
    break;
  case KernelKind::GqaAttention:
    for (const char *p : {"qh", "kvh", "d", "dv"})
      positive(p);
    flag("bf");
    need(spec.param("kvh") > 0 && spec.param("qh") % spec.param("kvh") == 0,
         "kv heads " + str(spec.param("kvh")) +
             " must divide the query heads " + str(spec.param("qh")));
    break;
  case KernelKind::MlaAttention:
    for (const char *p : {"h", "n", "r", "v", "l"})
      positive(p);
    need(stage <= 2, "stage s must be 0, 1 or 2, got " + str(stage));
    if (stage == 1) {
      flag("bf");
      break;
    }
    positive("tt");
    need(spec.param("tt") <= 16,
         "at most 16 tokens per workgroup, got " + str(spec.param("tt")));
    need(spec.param("wf") <= kFp8,
         "unknown kv_b format wf " + str(spec.param("wf")));
    need(spec.param("l") % 4 == 0,
         "latent dim " + str(spec.param("l")) + " must be a multiple of 4");
    need(spec.param("wf") != kMxfp4 || spec.param("l") % 32 == 0,
         "MXFP4 kv_b needs a latent dim multiple of 32, got " +
             str(spec.param("l")));
    break;
  case KernelKind::IndexerTopK:
    need(stage <= 1, "stage s must be 0 or 1, got " + str(stage));
    if (stage == 1) {
      positive("k");
      break;
    }
    for (const char *p : {"h", "d", "sp"})
      positive(p);
    flag("bf");
    // One accumulator per head in registers (declared 4 waves: 128 VGPRs).
    need(spec.param("h") <= 64,
         "at most 64 heads, got " + str(spec.param("h")));
    break;
  default:
    need(false, "not an attention kernel");
  }
  int64_t lds = ldsBytes(spec);
  need(lds <= chipInfo(spec.chip).ldsBytes,
       "needs " + str(lds) + " bytes of LDS, more than the " +
           str(chipInfo(spec.chip).ldsBytes) + " of " +
           std::string(chipInfo(spec.chip).name));
  return error;
}
