//===- GpuLowerAttention.cpp - Attention dispatches as GPU launches -------===//
//
// kv_append: one launch. gqa_attention: one launch, a workgroup per (token,
// query head). mla_attention: three launches through two scratch buffers
// (absorb q -> q_lat, attend over the latent cache -> o_lat, up-project);
// in a decode plan the attention splits each (token, head)'s keys over sp
// workgroups (flash decoding: a batch-1 step of 64 heads is otherwise 64
// workgroups for 256 CUs) and a fourth launch merges the splits' softmax
// states before the up-projection.
// indexer_top_k: score every causal position into a per-position scratch,
// then select the top k per token. Kernel arguments and params:
// passes/codegen/rocdl/AttentionKernels.cpp and KernelParams.def.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/GpuLaunch.h"

using namespace kiln;
using namespace kiln::emit;
using namespace kiln::rocdl;

namespace {

GpuGridAxis perRows(int64_t div) { return GpuGridAxis{1, 0, div}; }

std::optional<GpuDispatchLowering> lowerKvAppend(const GpuDispatchContext &c) {
  if (!c.isCache(0) || !c.isBuffer(1) || !c.isBuffer(2) || !c.isBuffer(3))
    return std::nullopt;
  const CacheSpec &cache = c.cache(0);
  if (c.bufferElems(3) != cache.width)
    return std::nullopt;
  KvAppendParams kp;
  kp.w = cache.width;
  kp.bf = cache.bf16;
  GpuLaunchSpec l;
  l.spec = makeSpec(kp);
  l.grid[0] = gridPerRow();
  l.args = {argData(0), argData(1), argData(2), argData(3)};
  appendPaging(l.args);
  GpuDispatchLowering lowering;
  lowering.launches.push_back(std::move(l));
  return lowering;
}

std::optional<GpuDispatchLowering> lowerGqa(const GpuDispatchContext &c) {
  const DispatchSpec &d = c.dispatch;
  if (!c.isBuffer(0) || !c.isCache(1) || !c.isCache(2) || !c.isBuffer(3) ||
      !c.isBuffer(4) || !c.isBuffer(5))
    return std::nullopt;
  const auto &p = d.get<abi::GqaAttentionParams>();
  int64_t qh = p.qHeads;
  const CacheSpec &k = c.cache(1), &v = c.cache(2);
  if (qh <= 0 || c.bufferElems(0) % qh != 0 || k.bf16 != v.bf16)
    return std::nullopt;
  int64_t dim = c.bufferElems(0) / qh;
  if (k.width % dim != 0)
    return std::nullopt;
  int64_t kvh = k.width / dim;
  if (kvh <= 0 || qh % kvh != 0 || v.width % kvh != 0)
    return std::nullopt;
  int64_t dv = v.width / kvh;
  if (c.bufferElems(5) != qh * dv)
    return std::nullopt;
  GqaAttentionParams gp;
  gp.qh = qh;
  gp.kvh = kvh;
  gp.d = dim;
  gp.dv = dv;
  gp.bf = k.bf16;
  gp.scale = p.scale;
  // 128 VGPRs, as the MLA attention.
  gp.waves = 4;
  GpuLaunchSpec l;
  l.spec = makeSpec(gp);
  l.grid = {gridPerRow(), gridFixed(qh), gridFixed(1)};
  l.args = {argData(0), argData(1), argData(2),
            argData(3), argData(4), argData(5)};
  appendPaging(l.args);
  GpuDispatchLowering lowering;
  lowering.launches.push_back(std::move(l));
  return lowering;
}

std::optional<GpuDispatchLowering> lowerMla(const GpuDispatchContext &c) {
  const DispatchSpec &d = c.dispatch;
  if (!c.isBuffer(0) || !c.isBuffer(1) || !c.isWeight(2) || !c.isCache(3) ||
      !c.isBuffer(4) || !c.isBuffer(5) || !c.isBuffer(7) ||
      (!c.isBuffer(6) && !c.isNone(6)))
    return std::nullopt;
  const auto &p = d.get<abi::MlaAttentionParams>();
  int64_t h = p.heads;
  const WeightSpec &w = c.weight(2);
  if (h <= 0 || w.shape.size() != 2 || w.experts > 0 ||
      c.bufferElems(0) % h != 0 || c.bufferElems(1) % h != 0 ||
      w.shape[0] % h != 0)
    return std::nullopt;
  int64_t n = c.bufferElems(0) / h, r = c.bufferElems(1) / h;
  int64_t l = w.shape[1], v = w.shape[0] / h - n;
  const CacheSpec &cache = c.cache(3);
  if (v <= 0 || cache.width != l + r || c.bufferElems(7) != h * v)
    return std::nullopt;
  int64_t k = c.isBuffer(6) ? c.bufferElems(6) : 0;

  // kv_b as the kernels read it: f32 / BF16 / FP8 (+ f32 block scales) as
  // stored, MXFP4 in the checkpoint layout (row-major nibbles + E8M0
  // scales).
  const StoredForm &stored = c.stored(2);
  int64_t wf;
  std::vector<GpuArgRef> weightArgs;
  if (stored.layout == fb::WeightLayout::Dense &&
      (stored.dtype == fb::DType::F32 || stored.dtype == fb::DType::BF16)) {
    wf = stored.dtype == fb::DType::F32 ? 0 : 1;
    weightArgs = {argData(2)};
  } else if (stored.layout == fb::WeightLayout::Mxfp4 && stored.scales) {
    wf = 2;
    weightArgs = {argRawData(2), argRawScales(2)};
  } else if (stored.layout == fb::WeightLayout::Fp8Block128 && stored.scales) {
    wf = 3;
    weightArgs = {argData(2), argScales(2)};
  } else {
    return std::nullopt;
  }

  // Decode has a handful of rows: a token per workgroup, and each
  // (token, head)'s keys split over sp workgroups: one 256-key tile each
  // (the top-k list: 2,048 keys for GLM-5.2, 8 splits), 8 without a list.
  const bool decode = c.plan.name == "decode";
  // 16 heads a workgroup on f32 MFMAs: 16-dim chunks of the key width,
  // 16-column tiles for each of the 4 waves.
  const bool mfma = decode && c.mfmaDecodeAttention && (l + r) % kTile == 0 &&
                    l % (4 * kTile) == 0;
  int64_t tt = decode ? 1 : 8;
  int64_t sp = !decode ? 0
               : k     ? std::clamp<int64_t>(ceilDiv(k, kRowBlock), 2, 16)
                       : 8;
  MlaAttentionParams shape;
  shape.h = h;
  shape.n = n;
  shape.r = r;
  shape.v = v;
  shape.l = l;
  GpuDispatchLowering lowering;
  // Scratch 0: q_lat [R, h, l + r]; scratch 1: o_lat [R, h, l]; with key
  // splits, scratch 2: [R, h, sp, l + 2] (each split's max, sum, values).
  lowering.scratch = {GpuScratchSpec{4 * h * (l + r), 0, 0},
                      GpuScratchSpec{4 * h * l, 0, 0}};
  if (sp)
    lowering.scratch.push_back(GpuScratchSpec{4 * h * sp * (l + 2), 0, 0});

  MlaAttentionParams absorbParams = shape;
  absorbParams.s = 0;
  absorbParams.wf = wf;
  absorbParams.tt = tt;
  GpuLaunchSpec absorb;
  absorb.spec = makeSpec(absorbParams);
  absorb.grid = {perRows(tt), gridFixed(h), gridFixed(1)};
  absorb.args = {argData(0), argData(1)};
  absorb.args.insert(absorb.args.end(), weightArgs.begin(), weightArgs.end());
  absorb.args.push_back(argScratch(0));
  absorb.args.push_back(argRows());

  MlaAttentionParams attendParams = shape;
  attendParams.s = 1;
  attendParams.bf = cache.bf16;
  attendParams.k = k;
  attendParams.scale = p.scale;
  // 128 VGPRs: small shapes unroll the key loops into more than 64.
  attendParams.waves = 4;
  if (sp)
    attendParams.sp = sp;
  if (mfma)
    attendParams.mf = 1;
  GpuLaunchSpec attend;
  attend.spec = makeSpec(attendParams);
  attend.grid = {gridPerRow(), gridFixed(mfma ? ceilDiv(h, kTile) : h),
                 gridFixed(sp ? sp : 1)};
  attend.args = {argScratch(0), argData(3), argData(4), argData(5)};
  if (k)
    attend.args.push_back(argData(6));
  attend.args.push_back(argScratch(sp ? 2 : 1));
  appendPaging(attend.args);

  MlaAttentionParams combineParams = shape;
  combineParams.s = 3;
  combineParams.sp = sp;
  GpuLaunchSpec combine;
  combine.spec = makeSpec(combineParams);
  combine.grid = {gridPerRow(), gridFixed(h), gridFixed(1)};
  combine.args = {argScratch(2), argScratch(1)};

  MlaAttentionParams expandParams = shape;
  expandParams.s = 2;
  expandParams.wf = wf;
  expandParams.tt = tt;
  // tt vector accumulators: 128 VGPRs.
  if (tt > 1)
    expandParams.waves = 4;
  GpuLaunchSpec expand;
  expand.spec = makeSpec(expandParams);
  expand.grid = absorb.grid;
  expand.args = {argScratch(1)};
  expand.args.insert(expand.args.end(), weightArgs.begin(), weightArgs.end());
  expand.args.push_back(argData(7));
  expand.args.push_back(argRows());

  lowering.launches = {std::move(absorb), std::move(attend)};
  if (sp)
    lowering.launches.push_back(std::move(combine));
  lowering.launches.push_back(std::move(expand));
  return lowering;
}

std::optional<GpuDispatchLowering> lowerIndexer(const GpuDispatchContext &c) {
  const DispatchSpec &d = c.dispatch;
  if (!c.isBuffer(0) || !c.isBuffer(1) || !c.isCache(2) || !c.isBuffer(3) ||
      !c.isBuffer(4) || !c.isBuffer(5))
    return std::nullopt;
  const auto &p = d.get<abi::IndexerTopKParams>();
  int64_t k = p.k, h = p.heads;
  if (k <= 0 || h <= 0 || c.bufferElems(0) % h != 0 || c.bufferElems(1) != h ||
      c.bufferElems(5) != k)
    return std::nullopt;
  int64_t dim = c.bufferElems(0) / h;
  const CacheSpec &cache = c.cache(2);
  if (cache.width != dim)
    return std::nullopt;
  GpuDispatchLowering lowering;
  // Scratch 0: scores [R, capacity].
  lowering.scratch = {GpuScratchSpec{0, 0, 4}};

  GpuLaunchSpec score;
  // Workgroups per token: decode rows have long contexts to themselves.
  int64_t sp = c.plan.name == "decode" ? 64 : 8;
  IndexerTopKParams scoreParams;
  scoreParams.s = 0;
  scoreParams.h = h;
  scoreParams.d = dim;
  scoreParams.bf = cache.bf16;
  scoreParams.sp = sp;
  scoreParams.scale = p.scale;
  // One accumulator per head: 128 VGPRs.
  scoreParams.waves = 4;
  // Decode attention on the matrix units: the scores too (16 keys x 16
  // heads a tile), where the key dim is a multiple of 16.
  if (c.mfmaDecodeAttention && c.plan.name == "decode" && dim % kTile == 0)
    scoreParams.mf = 1;
  score.spec = makeSpec(scoreParams);
  score.grid = {gridPerRow(), gridFixed(sp), gridFixed(1)};
  score.args = {argData(0), argData(1), argData(2),
                argData(3), argData(4), argScratch(0)};
  appendPaging(score.args);

  GpuLaunchSpec select;
  IndexerTopKParams selectParams;
  selectParams.s = 1;
  selectParams.k = k;
  select.spec = makeSpec(selectParams);
  select.grid[0] = gridPerRow();
  select.args = {argScratch(0), argData(4), argData(5), argCacheCapacity()};

  lowering.launches = {std::move(score), std::move(select)};
  return lowering;
}

} // namespace

std::optional<GpuDispatchLowering>
kiln::emit::lowerAttentionDispatch(const GpuDispatchContext &context) {
  switch (context.dispatch.kernel) {
  case abi::Kernel::KvAppend:
    return lowerKvAppend(context);
  case abi::Kernel::GqaAttention:
    return lowerGqa(context);
  case abi::Kernel::MlaAttention:
    return lowerMla(context);
  case abi::Kernel::IndexerTopK:
    return lowerIndexer(context);
  default:
    return std::nullopt;
  }
}
