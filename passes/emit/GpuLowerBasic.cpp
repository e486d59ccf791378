//===- GpuLowerBasic.cpp - GEMMs and the first row kernels as launches ----===//
//
// matmul with a 2-D weight stored as MXFP4 (read through its GPU layout,
// MxWeightLayout) or dense BF16; rms_norm; rope; argmax. One launch each,
// no scratch. Adds go to GpuLowerData's binary kernel.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/GpuLaunch.h"

using namespace kiln;
using namespace kiln::emit;
using namespace kiln::rocdl;

std::optional<GpuDispatchLowering>
kiln::emit::lowerBasicDispatch(const GpuDispatchContext &c) {
  const DispatchSpec &d = c.dispatch;
  GpuLaunchSpec l;
  KernelSpec &s = l.spec;
  switch (d.kernel) {
  case abi::Kernel::Matmul: {
    if (!c.isBuffer(0) || !c.isWeight(1) || !c.isBuffer(2))
      return std::nullopt;
    const WeightSpec &w = c.weight(1);
    const StoredForm &stored = c.stored(1);
    if (w.shape.size() != 2 || w.experts > 0)
      return std::nullopt;
    if (stored.gpuMxfp4())
      s.kind = KernelKind::MxGemm;
    else if (stored.layout == fb::WeightLayout::Dense &&
             stored.dtype == fb::DType::BF16)
      s.kind = KernelKind::Bf16Gemm;
    else
      return std::nullopt;
    s.n = w.shape[0];
    s.k = w.shape[1];
    if (c.bufferElems(0) != s.k || c.bufferElems(2) != s.n)
      return std::nullopt;
    // Decode runs a few rows; prefill and draft get the two-tile kernel.
    s.m = c.plan.name == "decode" ? 1 : 64;
    s.chooseTiling();
    l.grid = {gridFixed(s.tiling.gridX(s.n)),
              GpuGridAxis{1, 0, kTile * s.tiling.mTiles}, gridFixed(1)};
    if (s.kind == KernelKind::MxGemm)
      l.args = {argData(0), argData(1), argScales(1), argData(2), argRows()};
    else
      l.args = {argData(0), argData(1), argData(2), argRows()};
    break;
  }
  case abi::Kernel::RmsNorm: {
    if (!c.isBuffer(0) || !c.isWeight(1) || !c.isBuffer(2))
      return std::nullopt;
    RmsNormParams p;
    p.c = c.weight(1).shape.back();
    p.eps = d.get<abi::RmsNormParams>().eps;
    if (p.c <= 0 || c.bufferElems(0) % p.c != 0)
      return std::nullopt;
    s = makeSpec(p);
    l.grid[0] = gridPerRow(c.bufferElems(0) / p.c);
    l.args = {argData(0), argData(1), argData(2)};
    break;
  }
  case abi::Kernel::Rope: {
    const auto &rope = d.get<abi::RopeParams>();
    if (!c.isBuffer(0) || !c.isBuffer(1) || !c.isBuffer(2) || rope.heads <= 0 ||
        c.bufferElems(0) % rope.heads != 0)
      return std::nullopt;
    RopeParams p;
    p.neox = rope.style == 1 ? 1 : 0;
    p.h = rope.heads;
    p.d = c.bufferElems(0) / rope.heads;
    p.o = rope.offset;
    p.r = rope.rotaryDim;
    p.theta = rope.theta;
    s = makeSpec(p);
    l.grid[0] = gridPerRow();
    l.args = {argData(0), argData(1), argData(2)};
    break;
  }
  case abi::Kernel::Argmax: {
    if (!c.isBuffer(0) || !c.isBuffer(1))
      return std::nullopt;
    ArgmaxParams p;
    p.c = c.buffer(0).rowShape.empty() ? 1 : c.buffer(0).rowShape.back();
    if (p.c <= 0 || c.bufferElems(0) % p.c != 0)
      return std::nullopt;
    s = makeSpec(p);
    l.grid[0] = gridPerRow(c.bufferElems(0) / p.c);
    l.args = {argData(0), argData(1)};
    break;
  }
  default:
    return std::nullopt;
  }
  GpuDispatchLowering lowering;
  lowering.launches.push_back(std::move(l));
  return lowering;
}
