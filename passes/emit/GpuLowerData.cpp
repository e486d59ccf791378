//===- GpuLowerData.cpp - Data dispatches as GPU launches ----------------===//
//
// embedding, layer_norm, sigmoid/silu/relu/scale (one unary kernel), the
// add/mul shapes GpuLowerBasic leaves (broadcast, swapped operands, mul),
// softmax, normalize, group_limit, top_k, gather, split/concat (one
// copy_blocks launch per piece), take_rows, and matmul with an FP8
// block-scaled weight (fp8_gemm). One launch each except split/concat; no
// scratch. The shapes follow PlanValidator.cpp (which
// derives the CPU runner's Step) so that the GPU computes what the CPU
// does; params and arguments: DataSpecs.cpp / DataKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/emit/GpuLaunch.h"

using namespace kiln;
using namespace kiln::emit;
using namespace kiln::rocdl;

namespace {

int64_t lastDim(const BufferSpec &b) {
  return b.rowShape.empty() ? 1 : b.rowShape.back();
}

/// Flat kernels: ceil(rows * elems / (wg * w)) workgroups, rows counted on
/// dispatch argument `rowsOf` (-1: the dispatch's rows).
GpuGridAxis flatGrid(int64_t elems, int64_t w, int32_t rowsOf = -1) {
  return GpuGridAxis{elems, 0, kRowBlock * w, rowsOf};
}

int64_t widthFor(int64_t v) { return v % 4 == 0 ? 4 : 1; }

} // namespace

Fp8GemmParams kiln::emit::fp8GemmParams(const KernelSpec &bf16Gemm,
                                        bool fp8Activations) {
  Fp8GemmParams p;
  p.n = bf16Gemm.n;
  p.k = bf16Gemm.k;
  p.mt = bf16Gemm.tiling.mTiles;
  p.nt = bf16Gemm.tiling.nTiles;
  p.wg = kWaveSize;
  p.waves = 4;
  if (fp8Activations)
    p.qa = 1;
  return p;
}

namespace {

/// A row kernel (P has the row width c) over `elems` elements per dispatch
/// row in rows of p.c.
template <typename P>
std::optional<GpuLaunchSpec> rowLaunch(const P &p, int64_t elems) {
  if (p.c <= 0 || elems % p.c != 0)
    return std::nullopt;
  GpuLaunchSpec l;
  l.spec = makeSpec(p);
  l.grid[0] = gridPerRow(elems / p.c);
  return l;
}

struct Lowerer {
  const GpuDispatchContext &c;
  const DispatchSpec &d;

  bool buffers(std::initializer_list<size_t> args) const {
    for (size_t i : args)
      if (!c.isBuffer(i))
        return false;
    return true;
  }

  std::optional<GpuLaunchSpec> embedding() const {
    if (!buffers({0, 2}) || !c.isWeight(1))
      return std::nullopt;
    const WeightSpec &w = c.weight(1);
    const StoredForm &stored = c.stored(1);
    if (w.shape.size() != 2 || w.experts > 0 ||
        stored.layout != fb::WeightLayout::Dense ||
        c.bufferElems(2) != w.shape[1])
      return std::nullopt;
    int64_t dt;
    switch (stored.dtype) {
    case fb::DType::F32:
      dt = 0;
      break;
    case fb::DType::BF16:
      dt = 1;
      break;
    case fb::DType::F16:
      dt = 2;
      break;
    default:
      return std::nullopt;
    }
    EmbeddingParams p;
    p.h = w.shape[1];
    p.v = w.shape[0];
    p.dt = dt;
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    l.grid[0] = gridPerRow();
    l.args = {argData(0), argData(1), argData(2)};
    return l;
  }

  std::optional<GpuLaunchSpec> layerNorm() const {
    if (!buffers({0, 3}) || !c.isWeight(1) || !c.isWeight(2) ||
        c.weight(1).shape.size() != 1 || c.weight(2).shape != c.weight(1).shape)
      return std::nullopt;
    LayerNormParams p;
    p.c = c.weight(1).shape[0];
    p.eps = d.get<abi::LayerNormParams>().eps;
    std::optional<GpuLaunchSpec> l = rowLaunch(p, c.bufferElems(0));
    if (!l)
      return std::nullopt;
    l->args = {argData(0), argData(1), argData(2), argData(3)};
    return l;
  }

  std::optional<GpuLaunchSpec> unary(int64_t op) const {
    if (!buffers({0, 1}))
      return std::nullopt;
    int64_t elems = c.bufferElems(0), w = widthFor(elems);
    UnaryParams p;
    p.op = op;
    p.c = elems;
    p.w = w;
    if (op == 3)
      p.s = d.get<abi::ScaleParams>().factor;
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    l.grid[0] = flatGrid(elems, w);
    l.args = {argData(0), argData(1), argRows()};
    return l;
  }

  /// PlanValidator checkBinary: one operand (lhs first) has the output's
  /// shape; the other has it too, or broadcasts a vector weight or a
  /// one-row buffer along the rows.
  std::optional<GpuLaunchSpec> binary(int64_t op) const {
    if (!c.isBuffer(2))
      return std::nullopt;
    const BufferSpec &out = c.buffer(2);
    auto isFull = [&](size_t i) {
      return c.isBuffer(i) && !c.buffer(i).i32 &&
             c.buffer(i).rows == out.rows && c.bufferElems(i) == out.rowElems();
    };
    uint32_t full = isFull(0) ? 0 : 1, other = 1 - full;
    if (!isFull(full))
      return std::nullopt;
    int64_t bc = 0;
    if (!isFull(other)) {
      if (c.isWeight(other)) {
        const WeightSpec &w = c.weight(other);
        if (w.shape.size() != 1 || w.experts > 0)
          return std::nullopt;
        bc = w.shape[0];
      } else if (c.isBuffer(other) && !c.buffer(other).i32 &&
                 c.buffer(other).rows == abi::RowsKind::One) {
        bc = c.bufferElems(other);
      } else {
        return std::nullopt;
      }
      if (bc < 1 || out.rowElems() % bc != 0)
        return std::nullopt;
    }
    int64_t elems = out.rowElems();
    int64_t w = widthFor(elems) == 4 && (bc == 0 || bc % 4 == 0) ? 4 : 1;
    BinaryParams p;
    p.op = op;
    p.c = elems;
    p.bc = bc;
    p.w = w;
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    // The full operand's rows: a swapped lhs may be a one-row buffer,
    // which would make the dispatch's rows 1.
    l.grid[0] = flatGrid(elems, w, int32_t(full));
    l.args = {argData(full), argData(other), argData(2), argRowsOf(full)};
    return l;
  }

  /// softmax, normalize, group_limit: rows of the output's last dim.
  std::optional<GpuLaunchSpec> rowOp(KernelKind kind) const {
    if (!buffers({0, 1}) || c.bufferElems(1) != c.bufferElems(0))
      return std::nullopt;
    int64_t elems = c.bufferElems(0), cols = lastDim(c.buffer(1));
    std::optional<GpuLaunchSpec> l;
    if (kind == KernelKind::Softmax) {
      SoftmaxParams p;
      p.c = cols;
      l = rowLaunch(p, elems);
    } else if (kind == KernelKind::Normalize) {
      NormalizeParams p;
      p.c = cols;
      p.eps = d.get<abi::NormalizeParams>().eps;
      l = rowLaunch(p, elems);
    } else {
      const auto &group = d.get<abi::GroupLimitParams>();
      GroupLimitParams p;
      p.c = cols;
      p.g = group.nGroup;
      p.k = group.topkGroup;
      l = rowLaunch(p, elems);
    }
    if (!l)
      return std::nullopt;
    l->args = {argData(0), argData(1)};
    return l;
  }

  std::optional<GpuLaunchSpec> topK() const {
    int64_t k = d.get<abi::TopKParams>().k;
    if (!buffers({0, 1, 2}) || k < 1 || c.bufferElems(1) % k != 0)
      return std::nullopt;
    int64_t groups = c.bufferElems(1) / k;
    if (groups < 1 || c.bufferElems(0) % groups != 0)
      return std::nullopt;
    TopKParams p;
    p.c = c.bufferElems(0) / groups;
    p.k = k;
    std::optional<GpuLaunchSpec> l = rowLaunch(p, c.bufferElems(0));
    if (!l)
      return std::nullopt;
    l->args = {argData(0), argData(1), argData(2)};
    return l;
  }

  std::optional<GpuLaunchSpec> gather() const {
    if (!buffers({0, 1, 2}))
      return std::nullopt;
    int64_t n = c.bufferElems(2), k = lastDim(c.buffer(2));
    if (k < 1 || n % k != 0 || c.bufferElems(1) != n)
      return std::nullopt;
    int64_t groups = n / k;
    if (c.bufferElems(0) % groups != 0)
      return std::nullopt;
    GatherParams p;
    p.c = c.bufferElems(0) / groups;
    p.k = k;
    p.n = n;
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    l.grid[0] = flatGrid(n, 1);
    l.args = {argData(0), argData(1), argData(2), argRows()};
    return l;
  }

  std::optional<GpuLaunchSpec> takeRows() const {
    if (!buffers({0, 1, 2}) || c.bufferElems(2) != c.bufferElems(0) ||
        c.bufferElems(1) != 1)
      return std::nullopt;
    TakeRowsParams p;
    p.c = c.bufferElems(0);
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    l.grid[0] = GpuGridAxis{1, 0, 1, 1};
    l.args = {argData(0), argData(1), argData(2), argRowsOf(0)};
    return l;
  }

  /// all_reduce and reduce_scatter_rows: the device communicator exchanges
  /// the parts (an RCCL all-gather or all-to-all, runtime/hip/
  /// HipCollectives.cpp), then this launch's rank_sum adds them in rank
  /// order; the runtime passes the arguments (parts, out, count, ranks)
  /// itself; the grid is over the row's elements.
  std::optional<GpuLaunchSpec> allReduce() const {
    if (!buffers({0, 1}) || c.bufferElems(0) != c.bufferElems(1))
      return std::nullopt;
    RankSumParams p;
    p.w = c.bufferElems(0) % 4 == 0 ? 4 : 1;
    GpuLaunchSpec l;
    l.spec = makeSpec(p);
    l.grid[0] = flatGrid(c.bufferElems(0), p.w);
    return l;
  }

  /// One strided block copy per piece (PlanRunner's Split/Concat).
  std::optional<GpuDispatchLowering> splitConcat(bool split) const {
    size_t n = c.argCount();
    int64_t outer = split ? d.get<abi::SplitParams>().outer
                          : d.get<abi::ConcatParams>().outer;
    if (n < 2 || outer < 1)
      return std::nullopt;
    size_t whole = split ? 0 : n - 1;
    for (size_t i = 0; i < n; ++i)
      if (!c.isBuffer(i) || c.bufferElems(i) % outer != 0)
        return std::nullopt;
    int64_t stride = c.bufferElems(whole) / outer, offset = 0;
    GpuDispatchLowering lowering;
    for (size_t i = 0; i < n; ++i) {
      if (i == whole)
        continue;
      int64_t chunk = c.bufferElems(i) / outer;
      int64_t sstride = split ? stride : chunk, soff = split ? offset : 0;
      int64_t dstride = split ? chunk : stride, doff = split ? 0 : offset;
      bool vec = chunk % 4 == 0 && stride % 4 == 0 && offset % 4 == 0;
      int64_t w = vec ? 4 : 1;
      offset += chunk;
      if (chunk == 0)
        continue;
      CopyBlocksParams p;
      p.outer = outer;
      p.chunk = chunk;
      p.sstride = sstride;
      p.soff = soff;
      p.dstride = dstride;
      p.doff = doff;
      p.w = w;
      GpuLaunchSpec l;
      l.spec = makeSpec(p);
      l.grid[0] = flatGrid(outer * chunk, w);
      uint32_t src = uint32_t(split ? whole : i),
               dst = uint32_t(split ? i : whole);
      l.args = {argData(src), argData(dst), argRows()};
      lowering.launches.push_back(std::move(l));
    }
    if (offset != stride || lowering.launches.empty())
      return std::nullopt;
    return lowering;
  }

  /// A matmul whose 2-D weight is stored Fp8Block128 (GpuLowerBasic takes
  /// MXFP4 and BF16): the fp8_gemm with the tiling GpuLowerBasic picks for
  /// the BF16 GEMM.
  std::optional<GpuLaunchSpec> fp8Matmul() const {
    if (!buffers({0, 2}) || !c.isWeight(1))
      return std::nullopt;
    const WeightSpec &w = c.weight(1);
    const StoredForm &stored = c.stored(1);
    if (w.shape.size() != 2 || w.experts > 0 ||
        stored.layout != fb::WeightLayout::Fp8Block128 || !stored.scales)
      return std::nullopt;
    int64_t n = w.shape[0], k = w.shape[1];
    if (c.bufferElems(0) != k || c.bufferElems(2) != n)
      return std::nullopt;
    KernelSpec shape;
    shape.kind = KernelKind::Bf16Gemm;
    shape.n = n;
    shape.k = k;
    shape.m = c.plan.name == "decode" ? 1 : 64;
    shape.chooseTiling();
    GpuLaunchSpec l;
    l.spec = makeSpec(fp8GemmParams(shape, c.fp8Activations));
    l.grid = {gridFixed(shape.tiling.gridX(n)),
              GpuGridAxis{1, 0, kTile * shape.tiling.mTiles}, gridFixed(1)};
    l.args = {argData(0), argData(1), argScales(1), argData(2), argRows()};
    return l;
  }

  std::optional<GpuLaunchSpec> single() const {
    switch (d.kernel) {
    case abi::Kernel::Matmul:
      return fp8Matmul();
    case abi::Kernel::Embedding:
      return embedding();
    case abi::Kernel::LayerNorm:
      return layerNorm();
    case abi::Kernel::Sigmoid:
      return unary(0);
    case abi::Kernel::Silu:
      return unary(1);
    case abi::Kernel::Relu:
      return unary(2);
    case abi::Kernel::Scale:
      return unary(3);
    case abi::Kernel::Add:
      return binary(0);
    case abi::Kernel::Mul:
      return binary(1);
    case abi::Kernel::Softmax:
      return rowOp(KernelKind::Softmax);
    case abi::Kernel::Normalize:
      return rowOp(KernelKind::Normalize);
    case abi::Kernel::GroupLimit:
      return rowOp(KernelKind::GroupLimit);
    case abi::Kernel::TopK:
      return topK();
    case abi::Kernel::Gather:
      return gather();
    case abi::Kernel::TakeRows:
      return takeRows();
    case abi::Kernel::AllReduce:
    case abi::Kernel::ReduceScatterRows:
      return allReduce();
    default:
      return std::nullopt;
    }
  }
};

} // namespace

std::optional<GpuDispatchLowering>
kiln::emit::lowerDataDispatch(const GpuDispatchContext &context) {
  Lowerer lower{context, context.dispatch};
  // all_gather_rows: RCCL's all-gather-v alone.
  if (context.dispatch.kernel == abi::Kernel::AllGatherRows) {
    if (!lower.buffers({0, 1}) ||
        context.bufferElems(0) != context.bufferElems(1))
      return std::nullopt;
    GpuDispatchLowering lowering;
    lowering.communicatorOnly = true;
    return lowering;
  }
  if (context.dispatch.kernel == abi::Kernel::Split ||
      context.dispatch.kernel == abi::Kernel::Concat)
    return lower.splitConcat(context.dispatch.kernel == abi::Kernel::Split);
  std::optional<GpuLaunchSpec> launch = lower.single();
  if (!launch)
    return std::nullopt;
  GpuDispatchLowering lowering;
  lowering.launches.push_back(std::move(*launch));
  return lowering;
}
