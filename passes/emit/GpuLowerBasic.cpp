//===- GpuLowerBasic.cpp - GEMMs and the first row kernels as launches ----===//
//
// matmul with a 2-D weight stored as MXFP4 (read through its GPU layout,
// MxWeightLayout) or dense BF16; rms_norm; add of two same-shaped buffers;
// rope; argmax. One launch each, no scratch.
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
    const StreamedWeight &stored = c.stored(1);
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
  case abi::Kernel::RmsNorm:
    if (!c.isBuffer(0) || !c.isWeight(1) || !c.isBuffer(2))
      return std::nullopt;
    s.kind = KernelKind::RmsNorm;
    s.cols = c.weight(1).shape.back();
    s.eps = d.get<abi::RmsNormParams>().eps;
    if (s.cols <= 0 || c.bufferElems(0) % s.cols != 0)
      return std::nullopt;
    l.grid[0] = gridPerRow(c.bufferElems(0) / s.cols);
    l.args = {argData(0), argData(1), argData(2)};
    break;
  case abi::Kernel::Add:
    if (!c.isBuffer(0) || !c.isBuffer(1) || !c.isBuffer(2) ||
        c.bufferElems(0) != c.bufferElems(1) ||
        c.bufferElems(2) != c.bufferElems(0) ||
        c.buffer(0).rows != c.buffer(1).rows)
      return std::nullopt;
    s.kind = KernelKind::Add;
    s.cols = c.bufferElems(0);
    l.grid[0] = gridPerRow();
    l.args = {argData(0), argData(1), argData(2)};
    break;
  case abi::Kernel::Rope:
    if (!c.isBuffer(0) || !c.isBuffer(1) || !c.isBuffer(2) ||
        d.get<abi::RopeParams>().heads <= 0)
      return std::nullopt;
    s.kind = KernelKind::Rope;
    s.neox = d.get<abi::RopeParams>().style == 1;
    s.offset = d.get<abi::RopeParams>().offset;
    s.rotaryDim = d.get<abi::RopeParams>().rotaryDim;
    s.heads = d.get<abi::RopeParams>().heads;
    if (c.bufferElems(0) % s.heads != 0)
      return std::nullopt;
    s.headDim = c.bufferElems(0) / s.heads;
    s.theta = d.get<abi::RopeParams>().theta;
    l.grid[0] = gridPerRow();
    l.args = {argData(0), argData(1), argData(2)};
    break;
  case abi::Kernel::Argmax:
    if (!c.isBuffer(0) || !c.isBuffer(1))
      return std::nullopt;
    s.kind = KernelKind::Argmax;
    s.cols = c.buffer(0).rowShape.empty() ? 1 : c.buffer(0).rowShape.back();
    if (s.cols <= 0 || c.bufferElems(0) % s.cols != 0)
      return std::nullopt;
    l.grid[0] = gridPerRow(c.bufferElems(0) / s.cols);
    l.args = {argData(0), argData(1)};
    break;
  default:
    return std::nullopt;
  }
  GpuDispatchLowering lowering;
  lowering.launches.push_back(std::move(l));
  return lowering;
}
