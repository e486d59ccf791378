//===- AttentionSpecs.cpp - Which attention kernels can be generated ------===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests. The
// params of each kind are declared in KernelParams.def;
// AttentionKernels.cpp has the argument lists.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/codegen/rocdl/MfmaLayout.h"

#include <algorithm>
#include <string>

using namespace kiln::rocdl;

namespace {

/// kv_b formats (param "wf" of mla_attention stages 0 and 2).
enum WeightFormat : int64_t { kF32 = 0, kBf16 = 1, kMxfp4 = 2, kFp8 = 3 };

/// LDS bytes of the attend core (AttentionKernels.cpp allocates the same).
int64_t attendLdsBytes(int64_t wg, int64_t keyDim, int64_t valueDim) {
  int64_t waves = wg / kWaveSize;
  // Value columns: colThreads threads per key split (attend core).
  int64_t colThreads = std::min(valueDim, wg);
  int64_t splits = wg / colThreads;
  int64_t cols = (valueDim + colThreads - 1) / colThreads;
  // q, the tile's weights and rows, two reductions, the splits' partials.
  return 4 * (keyDim + 2 * wg + 2 * waves + (splits - 1) * colThreads * cols);
}

/// LDS bytes of a kernel (AttentionKernels.cpp allocates the same).
int64_t ldsBytes(const KernelSpec &spec) {
  int64_t wg = spec.blockSize();
  switch (spec.kind) {
  case KernelKind::MlaAttention: {
    auto p = params<MlaAttentionParams>(spec);
    if (p.s == 0)
      return 4 * p.tt * p.n;
    if (p.s == 2)
      return 4 * p.tt * p.l;
    if (p.s == 3)
      return 0;
    if (p.mf)
      return 4 * 4 * wg; // each wave's part of a 16 x 16 score tile
    return attendLdsBytes(wg, p.l + p.r, p.l);
  }
  case KernelKind::GqaAttention: {
    auto p = params<GqaAttentionParams>(spec);
    return attendLdsBytes(wg, p.d, p.dv);
  }
  case KernelKind::IndexerTopK: {
    auto p = params<IndexerTopKParams>(spec);
    if (p.s == 0)
      return 4 * p.h * p.d;
    // Histogram, selection state, two scans' wave totals.
    return 4 * (256 + 2 + 2 * (wg / kWaveSize));
  }
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
  auto str = [](int64_t v) { return std::to_string(v); };
  auto positive = [&](const char *name, int64_t v) {
    need(v > 0,
         std::string("parameter ") + name + " must be positive, got " + str(v));
  };
  auto flag = [&](const char *name, int64_t v) {
    need(v <= 1,
         std::string("parameter ") + name + " must be 0 or 1, got " + str(v));
  };
  need(spec.blockSize() == kRowBlock, "workgroup size must be " +
                                          str(kRowBlock) + ", got " +
                                          str(spec.blockSize()));
  switch (spec.kind) {
  case KernelKind::KvAppend: {
    auto p = params<KvAppendParams>(spec);
    positive("w", p.w);
    flag("bf", p.bf);
    break;
  }
  case KernelKind::GqaAttention: {
    auto p = params<GqaAttentionParams>(spec);
    positive("qh", p.qh);
    positive("kvh", p.kvh);
    positive("d", p.d);
    positive("dv", p.dv);
    flag("bf", p.bf);
    need(p.kvh > 0 && p.qh % p.kvh == 0, "kv heads " + str(p.kvh) +
                                             " must divide the query heads " +
                                             str(p.qh));
    break;
  }
  case KernelKind::MlaAttention: {
    auto p = params<MlaAttentionParams>(spec);
    positive("h", p.h);
    positive("n", p.n);
    positive("r", p.r);
    positive("v", p.v);
    positive("l", p.l);
    need(p.s <= 3, "stage s must be 0, 1, 2 or 3, got " + str(p.s));
    need(p.sp >= 0 && p.sp <= 64,
         "key splits sp must be 0 to 64, got " + str(p.sp));
    flag("mf", p.mf);
    need(!p.mf || p.s == 1,
         "mf (MFMA) is a stage 1 option, found stage " + str(p.s));
    if (p.s == 1) {
      flag("bf", p.bf);
      // MFMA: 16-dim chunks of the key width, 16-column tiles per wave.
      need(!p.mf || (p.l + p.r) % kTile == 0,
           "MFMA attention needs a key width (l + r) multiple of 16, got " +
               str(p.l + p.r));
      need(!p.mf || p.l % (kTile * (spec.blockSize() / kWaveSize)) == 0,
           "MFMA attention needs a latent dim multiple of 64, got " + str(p.l));
      break;
    }
    if (p.s == 3) {
      need(p.sp >= 2,
           "the combine stage needs sp >= 2 key splits, got " + str(p.sp));
      break;
    }
    positive("tt", p.tt);
    need(p.tt <= 16, "at most 16 tokens per workgroup, got " + str(p.tt));
    need(p.wf <= kFp8, "unknown kv_b format wf " + str(p.wf));
    need(p.l % 4 == 0, "latent dim " + str(p.l) + " must be a multiple of 4");
    need(p.wf != kMxfp4 || p.l % 32 == 0,
         "MXFP4 kv_b needs a latent dim multiple of 32, got " + str(p.l));
    break;
  }
  case KernelKind::IndexerTopK: {
    auto p = params<IndexerTopKParams>(spec);
    need(p.s <= 1, "stage s must be 0 or 1, got " + str(p.s));
    if (p.s == 1) {
      positive("k", p.k);
      break;
    }
    positive("h", p.h);
    positive("d", p.d);
    positive("sp", p.sp);
    flag("bf", p.bf);
    flag("mf", p.mf);
    need(!p.mf || p.d % kTile == 0,
         "MFMA scores need a key dim multiple of 16, got " + str(p.d));
    // One accumulator per head in registers (declared 4 waves: 128 VGPRs).
    need(p.h <= 64, "at most 64 heads, got " + str(p.h));
    break;
  }
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
