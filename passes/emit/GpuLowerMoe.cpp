//===- GpuLowerMoe.cpp - Moe dispatches as GPU launches ----------------===//
//
// moe (Kernels.td: B x, W router, W bias, W gate, W up, W down,
// W? shared_gate, W? shared_up, W? shared_down, B out) runs as
//   1. moe_route    x -> ids, weights                       (scratch 0, 1)
//   2. moe_align    ids -> sorted, blockExpert, meta        (scratch 2, 3, 4;
//                   its per-segment expert counts: 5)
//   3. moe_gate_up  x, gate, up -> act [R * topk, I]        (scratch 6)
//   4. moe_down     act, down -> y [R * topk, H]            (scratch 7)
//   5. shared expert, when present: gate and up GEMMs of x (scratch 8, 9),
//      swiglu into scratch 11, the down GEMM into scratch 10 (the mx_gemm /
//      bf16_gemm / fp8_gemm and swiglu kernels; each shared weight in its
//      own format)
//   6. moe_down combine=1: out = shared + sum_j weights[j] * y[j]
// Under expert parallelism (a rank's stacks hold E of the router's experts,
// from the dispatch's expert_offset) the route writes local ids, -1 for the
// other ranks' experts, which the align and the combine skip; the ranks'
// outputs are summed by the plan's all_reduce.
// MoeKernels.cpp describes the kernels. Routed experts must all be MXFP4
// with GPU copies, all dense BF16 or all FP8 block-128 (Fp8Block128: the
// stored bytes [E, N, K] and f32 scales [E, N/128, K/128]). The GPU
// blocks hold 16 * mt rows (mt = 1 for decode, 2 otherwise), independent of
// the dispatch's CPU block_size: the grouping only changes which rows share
// a weight load, never a result.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/GpuLaunch.h"

#include <algorithm>

using namespace kiln;
using namespace kiln::emit;
using namespace kiln::rocdl;

namespace {

enum Scratch : uint32_t {
  kIds,
  kWeights,
  kSorted,
  kBlockExpert,
  kMeta,
  kAlignCounts,
  kAct,
  kExpertOut,
  kSharedGate,
  kSharedUp,
  kSharedOut,
  kSharedAct,
};

/// The moe kernels' fmt: 0 for MXFP4 with a GPU copy, 1 for dense BF16, 2
/// for FP8 block-128 with scales; -1 otherwise.
int expertFormat(const GpuDispatchContext &c, size_t i) {
  const StoredForm &s = c.stored(i);
  if (s.gpuMxfp4())
    return 0;
  if (s.layout == fb::WeightLayout::Dense && s.dtype == fb::DType::BF16)
    return 1;
  if (s.layout == fb::WeightLayout::Fp8Block128 && s.scales)
    return 2;
  return -1;
}

/// A plain GEMM launch (as GpuLowerBasic.cpp, GpuLowerData.cpp for FP8): y =
/// x * W^T, W = dispatch argument `w` ([n, k]).
std::optional<GpuLaunchSpec> gemmLaunch(const GpuDispatchContext &c, size_t w,
                                        GpuArgRef x, GpuArgRef y) {
  if (!c.isWeight(w))
    return std::nullopt;
  const WeightSpec &spec = c.weight(w);
  if (spec.shape.size() != 2 || spec.experts > 0)
    return std::nullopt;
  int format = expertFormat(c, w);
  if (format < 0)
    return std::nullopt;
  GpuLaunchSpec l;
  KernelSpec &s = l.spec;
  s.kind = format == 0 ? KernelKind::MxGemm : KernelKind::Bf16Gemm;
  s.n = spec.shape[0];
  s.k = spec.shape[1];
  s.m = c.plan.name == "decode" ? 1 : 64;
  s.chooseTiling();
  l.grid = {gridFixed(s.tiling.gridX(s.n)),
            GpuGridAxis{1, 0, kTile * s.tiling.mTiles}, gridFixed(1)};
  if (format == 2) {
    // fp8_gemm with the BF16 GEMM's tiling.
    l.spec = makeSpec(fp8GemmParams(s, c.fp8Activations));
  }
  if (format == 1)
    l.args = {x, argData(uint32_t(w)), y, argRows()};
  else
    l.args = {x, argData(uint32_t(w)), argScales(uint32_t(w)), y, argRows()};
  return l;
}

} // namespace

std::optional<GpuDispatchLowering>
kiln::emit::lowerMoeDispatch(const GpuDispatchContext &c) {
  const DispatchSpec &d = c.dispatch;
  if (d.kernel != abi::Kernel::Moe || c.argCount() < 10 || !c.isBuffer(0) ||
      !c.isBuffer(9))
    return std::nullopt;
  for (size_t i = 1; i <= 5; ++i)
    if (!c.isWeight(i))
      return std::nullopt;
  bool shared = c.isWeight(6);
  if (shared ? !c.isWeight(7) || !c.isWeight(8)
             : !c.isNone(6) || !c.isNone(7) || !c.isNone(8))
    return std::nullopt;

  // Router [E, H], dense f32 or bf16; bias [E] (uploaded as f32).
  const WeightSpec &router = c.weight(1);
  const StoredForm &routerStored = c.stored(1);
  if (router.shape.size() != 2 || router.experts > 0 ||
      routerStored.layout != fb::WeightLayout::Dense ||
      (routerStored.dtype != fb::DType::F32 &&
       routerStored.dtype != fb::DType::BF16))
    return std::nullopt;
  int64_t routed = router.shape[0], h = router.shape[1];
  if (c.weight(2).shape != std::vector<int64_t>{routed})
    return std::nullopt;
  // Experts: gate, up [E, I, H], down [E, H, I], one format. Under expert
  // parallelism the stacks hold E of the router's experts, from
  // expert_offset on: the route writes local ids (-1: another rank's).
  const auto &p = d.get<abi::MoeParams>();
  const WeightSpec &gate = c.weight(3), &up = c.weight(4), &down = c.weight(5);
  if (gate.shape.size() != 3)
    return std::nullopt;
  int64_t e = gate.shape[0];
  bool ep = e != routed;
  if (p.expertOffset < 0 || p.expertOffset + e > routed ||
      (!ep && p.expertOffset != 0))
    return std::nullopt;
  if (gate.shape[2] != h || up.shape != gate.shape || down.shape.size() != 3 ||
      down.shape[0] != e || down.shape[1] != h ||
      down.shape[2] != gate.shape[1])
    return std::nullopt;
  int64_t inter = gate.shape[1];
  int fmt = expertFormat(c, 3);
  if (fmt < 0 || expertFormat(c, 4) != fmt || expertFormat(c, 5) != fmt)
    return std::nullopt;
  if (c.bufferElems(0) != h || c.bufferElems(9) != h)
    return std::nullopt;

  int64_t topk = p.topK, groups = p.nGroup, topkGroup = p.topkGroup,
          norm = p.normTopkProb ? 1 : 0;
  bool decode = c.plan.name == "decode";
  int64_t mTiles = decode ? 1 : 2, bm = kTile * mTiles;

  GpuDispatchLowering lowering;
  auto &scratch = lowering.scratch;
  scratch.resize(shared ? 12 : 8);
  scratch[kIds] = {4 * topk, 0, 0};
  scratch[kWeights] = {4 * topk, 0, 0};
  scratch[kSorted] = {4 * topk, 4 * (e * (bm - 1) + bm), 0};
  scratch[kBlockExpert] = {4 * topk, 4 * (e + 1), 0};
  scratch[kMeta] = {0, 16, 0};
  scratch[kAlignCounts] = {0, 4 * e * kRowBlock, 0};
  scratch[kAct] = {4 * topk * inter, 0, 0};
  scratch[kExpertOut] = {4 * topk * h, 0, 0};

  auto add = [&](KernelSpec s, std::array<GpuGridAxis, 3> grid,
                 std::vector<GpuArgRef> args) {
    GpuLaunchSpec l;
    l.spec = std::move(s);
    l.grid = grid;
    l.args = std::move(args);
    lowering.launches.push_back(std::move(l));
  };
  MoeRouteParams route;
  route.e = routed;
  if (ep) {
    route.off = p.expertOffset;
    route.el = e;
  }
  route.h = h;
  route.topk = topk;
  route.ngroup = groups;
  route.topkgroup = topkGroup;
  route.norm = norm != 0;
  route.rbf = routerStored.dtype == fb::DType::BF16;
  route.scale = p.scale;
  add(makeSpec(route), {gridPerRow(), gridFixed(1), gridFixed(1)},
      {argData(0), argData(1), argData(2), argScratch(kIds),
       argScratch(kWeights)});

  MoeAlignParams align;
  align.e = e;
  align.topk = topk;
  align.bm = bm;
  add(makeSpec(align), {gridFixed(1), gridFixed(1), gridFixed(1)},
      {argScratch(kIds), argRows(), argScratch(kSorted),
       argScratch(kBlockExpert), argScratch(kMeta), argScratch(kAlignCounts)});

  // Expert GEMMs: grid x over N tiles, y over the most blocks R rows need.
  GpuGridAxis blocks{topk, e * (bm - 1), bm};
  // P: MoeGateUpParams or MoeDownParams, the same fields.
  auto expertParams = [&](auto p, int64_t n, int64_t k) {
    // BF16 gate_up loads two weights' rows per N tile and step: at 4 waves
    // (128 VGPRs) it keeps to 2 N tiles. FP8 gate_up with FP8 activations
    // (32 bytes of each weight per N tile and block, 32 activations to
    // quantize) keeps to 2 N tiles at 2 waves: at 4 LLVM spills a few
    // VGPRs on one chip or the other (moe.test).
    bool fp8GateUp =
        p.kind == KernelKind::MoeGateUp && fmt == 2 && c.fp8Activations;
    bool narrow = p.kind == KernelKind::MoeGateUp && (fmt == 1 || fp8GateUp) &&
                  mTiles == 1;
    int64_t nTiles = std::clamp<int64_t>(ceilDiv(n, kTile), 1, narrow ? 2 : 4);
    p.e = e;
    p.n = n;
    p.k = k;
    p.topk = topk;
    p.mt = mTiles;
    p.nt = nTiles;
    p.fmt = fmt;
    if (fmt == 2 && c.fp8Activations)
      p.qa = 1;
    p.wg = kWaveSize;
    p.waves = mTiles > 1 || fp8GateUp ? 2 : 4;
    return p;
  };
  auto weightArgs = [&](uint32_t i) {
    return fmt == 1 ? std::vector<GpuArgRef>{argData(i)}
                    : std::vector<GpuArgRef>{argData(i), argScales(i)};
  };
  auto tail = [&](uint32_t out) {
    return std::vector<GpuArgRef>{argScratch(kSorted), argScratch(kBlockExpert),
                                  argScratch(kMeta), argScratch(out),
                                  argRows()};
  };
  {
    MoeGateUpParams gateUp = expertParams(MoeGateUpParams(), inter, h);
    std::vector<GpuArgRef> args = {argData(0)};
    for (uint32_t w : {3u, 4u})
      for (GpuArgRef a : weightArgs(w))
        args.push_back(a);
    for (GpuArgRef a : tail(kAct))
      args.push_back(a);
    add(makeSpec(gateUp),
        {gridFixed(ceilDiv(inter, kTile * gateUp.nt)), blocks, gridFixed(1)},
        args);
  }
  {
    MoeDownParams down = expertParams(MoeDownParams(), h, inter);
    std::vector<GpuArgRef> args = {argScratch(kAct)};
    for (GpuArgRef a : weightArgs(5))
      args.push_back(a);
    for (GpuArgRef a : tail(kExpertOut))
      args.push_back(a);
    add(makeSpec(down),
        {gridFixed(ceilDiv(h, kTile * down.nt)), blocks, gridFixed(1)}, args);
  }

  if (shared) {
    const WeightSpec &sg = c.weight(6);
    if (sg.shape.size() != 2 || sg.shape[1] != h ||
        c.weight(7).shape != sg.shape ||
        c.weight(8).shape != std::vector<int64_t>{h, sg.shape[0]})
      return std::nullopt;
    int64_t is = sg.shape[0];
    scratch[kSharedGate] = {4 * is, 0, 0};
    scratch[kSharedUp] = {4 * is, 0, 0};
    scratch[kSharedOut] = {4 * h, 0, 0};
    scratch[kSharedAct] = {4 * is, 0, 0};
    std::optional<GpuLaunchSpec> g =
        gemmLaunch(c, 6, argData(0), argScratch(kSharedGate));
    std::optional<GpuLaunchSpec> u =
        gemmLaunch(c, 7, argData(0), argScratch(kSharedUp));
    std::optional<GpuLaunchSpec> dn =
        gemmLaunch(c, 8, argScratch(kSharedAct), argScratch(kSharedOut));
    if (!g || !u || !dn)
      return std::nullopt;
    lowering.launches.push_back(*g);
    lowering.launches.push_back(*u);
    SwiGluParams swiglu;
    swiglu.c = is;
    add(makeSpec(swiglu), {gridPerRow(), gridFixed(1), gridFixed(1)},
        {argScratch(kSharedGate), argScratch(kSharedUp),
         argScratch(kSharedAct)});
    lowering.launches.push_back(*dn);
  }

  MoeDownParams combine;
  combine.combine = 1;
  combine.h = h;
  combine.topk = topk;
  combine.shared = shared;
  if (ep)
    combine.ep = 1;
  std::vector<GpuArgRef> args = {argScratch(kExpertOut), argScratch(kWeights)};
  if (ep)
    args.push_back(argScratch(kIds));
  if (shared)
    args.push_back(argScratch(kSharedOut));
  args.push_back(argData(9));
  add(makeSpec(combine), {gridPerRow(), gridFixed(1), gridFixed(1)}, args);
  return lowering;
}
