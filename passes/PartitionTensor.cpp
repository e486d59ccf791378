//===- PartitionTensor.cpp - kiln-partition-tensor ------------------------===//
//
// One rank's share of the model under tensor parallelism (Passes.td): the
// heads of every MLA and GQA attention (GQA's K/V caches narrowed with
// them), the intermediate columns of every dense SwiGLU MLP and of every
// kiln.moe's experts (routed and shared; a kiln.block_scaled's values and
// scales together), each followed by a kiln.all_reduce over the
// tensor-parallel group. Weights are cut with `slice` on their kiln.weight
// ops, so a rank's artifact holds its share's bytes only.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPARTITIONTENSORPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

RankedTensorType withDim(Type type, size_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

/// A weight operand of `user`, with its block scales when it has them.
struct WeightRef {
  OpOperand *values = nullptr;
  OpOperand *scales = nullptr;
  ArrayRef<int64_t> block;
};

/// Whether [first, first + count) of an axis of `full` values cuts its
/// blocks of `block` (a slice may end at the axis's end mid-block).
bool cutsBlocks(int64_t first, int64_t count, int64_t block, int64_t full) {
  return first % block != 0 || (count % block != 0 && first + count != full);
}

/// The projection (kiln.matmul or kiln.mx_matmul) that defines `v`, or null.
Operation *projectionOf(Value v) {
  Operation *op = v.getDefiningOp();
  return isa_and_nonnull<MatmulOp, MxMatmulOp>(op) ? op : nullptr;
}

WeightRef weightOf(Operation *projection) {
  if (auto mm = dyn_cast<MatmulOp>(projection))
    return {&mm.getRhsMutable(), nullptr, {}};
  auto mx = cast<MxMatmulOp>(projection);
  return {&mx.getValuesMutable(), &mx.getScalesMutable(), mx.getBlock()};
}

class Partitioner {
public:
  Partitioner(int64_t ranks, int64_t rank) : ranks_(ranks), rank_(rank) {}

  /// Cuts `ref`'s weights (and scales) to [first, first + count) along
  /// matrix axis `axis` (0 rows, 1 columns), counted in values.
  LogicalResult slice(Operation *&user, WeightRef ref, int64_t axis,
                      int64_t first, int64_t count) {
    auto values = ref.values->get().getDefiningOp<WeightOp>();
    if (!values)
      return user->emitOpError()
             << "kiln-partition-tensor: the weight is not a kiln.weight";
    if (values.getSlice())
      return user->emitOpError() << "kiln-partition-tensor: weight '"
                                 << values.getName() << "' is already sliced";
    int64_t rank = values.getType().getRank();
    size_t dim = size_t(rank == 1 ? 0 : rank - 2 + axis);
    int64_t full = values.getType().getDimSize(int64_t(dim));
    if (!ref.scales) {
      replaced_.insert(values);
      ref.values->assign(sliced(values, dim, axis, first, count));
      return success();
    }
    auto scales = ref.scales->get().getDefiningOp<WeightOp>();
    if (!scales)
      return user->emitOpError()
             << "kiln-partition-tensor: the scales are not a kiln.weight";
    int64_t block = ref.block[size_t(axis)];
    bool cut = cutsBlocks(first, count, block, full);
    // FP8 or MXFP4 blocks cut by the slice: the projection reads the
    // weight dequantized to f32 instead (the FP8 fixture's 384 rows over 2
    // ranks, the MXFP4 one's 128 expert columns over 8).
    if (cut && dequantizable(values)) {
      FailureOr<WeightRef> dense = dequantized(user, values, scales);
      if (succeeded(dense))
        return slice(user, *dense, axis, first, count);
    }
    if (cut)
      return user->emitOpError()
             << "kiln-partition-tensor: weight '" << values.getName()
             << "' has blocks of " << block << " along its "
             << (axis == 0 ? "rows" : "columns") << ", and this rank's ["
             << first << ", " << first + count
             << ") does not start and end on them";
    Value v = sliced(values, dim, axis, first, count);
    Value s =
        sliced(scales, dim, axis, first / block, (count + block - 1) / block);
    replaced_.insert(values);
    replaced_.insert(scales);
    ref.values->assign(v);
    ref.scales->assign(s);
    return success();
  }

  /// Whether `values` can be read dequantized to f32 (dequantizedWeight):
  /// FP8 or MXFP4 elements.
  static bool dequantizable(WeightOp values) {
    return isa<Float8E4M3FNType, Float4E2M1FNType>(
        values.getType().getElementType());
  }

  /// `values` x `scales` as one f32 kiln.weight, what the CPU kernels form
  /// from the quantized bytes: a checkpoint's FP8 or Quark MXFP4 values as
  /// raw f32 with source_scale (the streamer writes q * s); Kiln's MXFP4
  /// values as f32 with their mxfp4_values encoding (the streamer
  /// quantizes, then writes the values times their scales). Warns at
  /// `user`: the weight takes 4 bytes a value on this rank (once per
  /// weight name).
  Value dequantizedWeight(Operation *user, WeightOp values, WeightOp scales) {
    bool fp8 = isa<Float8E4M3FNType>(values.getType().getElementType());
    if (warned_.insert(values.getName()).second)
      mlir::emitWarning(user->getLoc())
          << "kiln-partition-tensor: this rank's slice of '" << values.getName()
          << "' cuts its " << (fp8 ? "128x128 FP8" : "32-value MXFP4")
          << " blocks; it is stored dequantized to f32 (4 bytes a value)";
    OpBuilder b(values);
    auto type =
        RankedTensorType::get(values.getType().getShape(), b.getF32Type());
    replaced_.insert(values);
    replaced_.insert(scales);
    bool kilns = values.getEncoding().getKind() == StorageKind::mxfp4_values;
    StringAttr sourceScale =
        kilns ? values.getSourceScaleAttr() : b.getStringAttr(scales.getName());
    return WeightOp::create(b, values.getLoc(), type, values.getName(),
                            values.getEncoding(), sourceScale,
                            values.getFirstExpertAttr(), DenseI64ArrayAttr())
        .getResult();
  }

  /// Makes `user` (a kiln.mx_matmul, or kiln.mla_attention's kv_b) read
  /// `values` x `scales` as one f32 kiln.weight dequantized at compile time
  /// (dequantizedWeight): a kiln.mx_matmul becomes a kiln.matmul. The same
  /// values the CPU kernels form from the quantized bytes, 4 bytes each.
  /// Fails for other users.
  FailureOr<WeightRef> dequantized(Operation *&user, WeightOp values,
                                   WeightOp scales) {
    if (!isa<MxMatmulOp, MlaAttentionOp>(user))
      return failure();
    Value dense = dequantizedWeight(user, values, scales);
    if (auto mx = dyn_cast<MxMatmulOp>(user)) {
      OpBuilder at(mx);
      auto mm =
          MatmulOp::create(at, mx.getLoc(), mx.getType(), mx.getLhs(), dense);
      mx.getResult().replaceAllUsesWith(mm.getResult());
      mx.erase();
      user = mm;
      return WeightRef{&mm.getRhsMutable(), nullptr, {}};
    }
    auto attention = cast<MlaAttentionOp>(user);
    attention.getKvBMutable().assign(dense);
    attention.getKvBScalesMutable().clear();
    attention.removeBlockAttr();
    return WeightRef{&attention.getKvBMutable(), nullptr, {}};
  }

  /// Splits the heads of `attention` (GLM-5 MLA): q_b_proj's rows, kv_b's
  /// rows and o_proj's columns, then sums o_proj's partial results.
  LogicalResult partition(MlaAttentionOp attention) {
    auto qn = cast<RankedTensorType>(attention.getQNope().getType());
    int64_t heads = qn.getDimSize(1), dn = qn.getDimSize(2),
            dv = attention.getType().getDimSize(2);
    if (heads % ranks_ != 0)
      return attention.emitOpError()
             << "kiln-partition-tensor: " << heads
             << " heads do not split evenly over " << ranks_ << " ranks";
    int64_t local = heads / ranks_, first = rank_ * local;

    // q: split(reshape(projection)), the rope part through kiln.rope ops.
    auto split = attention.getQNope().getDefiningOp<SplitOp>();
    auto reshape =
        split ? split.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
    Operation *qb = reshape ? projectionOf(reshape.getInput()) : nullptr;
    if (!qb || split->getNumResults() != 2 ||
        !split->getResult(0).hasOneUse() || !reshape->hasOneUse() ||
        !qb->hasOneUse())
      return attention.emitOpError()
             << "kiln-partition-tensor: q_nope is not one result of "
                "kiln.split(kiln.reshape(q_b projection)) used by this op "
                "alone";
    SmallVector<Operation *> ropes;
    Value pe = attention.getQPe();
    while (auto rope = pe.getDefiningOp<RopeOp>()) {
      ropes.push_back(rope);
      pe = rope.getInput();
    }
    if (pe != split->getResult(1))
      return attention.emitOpError()
             << "kiln-partition-tensor: q_pe does not come from the same "
                "kiln.split as q_nope (through kiln.rope ops only)";
    int64_t width = cast<RankedTensorType>(reshape.getType()).getDimSize(2);
    if (failed(slice(qb, weightOf(qb), 0, first * width, local * width)))
      return failure();
    qb->getResult(0).setType(
        withDim(qb->getResult(0).getType(), 1, local * width));
    reshape.getResult().setType(withDim(reshape.getType(), 1, local));
    for (Value r : split->getResults())
      r.setType(withDim(r.getType(), 1, local));
    for (Operation *rope : ropes)
      rope->getResult(0).setType(
          withDim(rope->getResult(0).getType(), 1, local));

    // kv_b: each head's [k_nope | v] rows.
    WeightRef kvb{&attention.getKvBMutable(), nullptr, {}};
    if (attention.getKvBScales()) {
      kvb.scales = &attention.getKvBScalesMutable()[0];
      kvb.block = *attention.getBlock();
    }
    Operation *user = attention; // kv_b is replaced in place
    if (failed(slice(user, kvb, 0, first * (dn + dv), local * (dn + dv))))
      return failure();
    attention.getResult().setType(withDim(attention.getType(), 1, local));

    return project(attention, first * dv, local * dv);
  }

  /// Splits the heads of `attention` (GQA, GLM-4.x): the q, k and v
  /// projections (and their biases) by heads, the K and V caches' widths,
  /// then o_proj's columns. The caches' kiln.kv_cache.append values are
  /// traced back the same way as q.
  LogicalResult partition(GqaAttentionOp attention, ModuleOp module) {
    auto q = cast<RankedTensorType>(attention.getQ().getType());
    int64_t heads = q.getDimSize(1), dv = attention.getType().getDimSize(2);
    SmallVector<KvCacheOp> caches;
    for (FlatSymbolRefAttr ref :
         {attention.getKCacheAttr(), attention.getVCacheAttr()})
      caches.push_back(module.lookupSymbol<KvCacheOp>(ref.getAttr()));
    // Another entry function's attention may have narrowed it already.
    int64_t kvHeads = caches[0].getWidth() / q.getDimSize(2) *
                      (narrowed_.contains(caches[0]) ? ranks_ : 1);
    if (heads % ranks_ != 0 || kvHeads % ranks_ != 0)
      return attention.emitOpError()
             << "kiln-partition-tensor: " << heads << " query and " << kvHeads
             << " KV heads do not split evenly over " << ranks_ << " ranks";
    if (failed(splitHeads(attention, attention.getQ())))
      return failure();
    for (KvCacheOp cache : caches) {
      if (!narrowed_.insert(cache).second)
        continue;
      int64_t width = cache.getWidth();
      cache.setWidth(width / ranks_);
      // Every append to it, in every entry function.
      SmallVector<KvCacheAppendOp> appends;
      module.walk([&](KvCacheAppendOp a) {
        if (a.getCache() == cache.getSymName())
          appends.push_back(a);
      });
      for (KvCacheAppendOp a : appends)
        if (failed(splitHeads(a, a.getValues())))
          return failure();
    }
    attention.getResult().setType(
        withDim(attention.getType(), 1, heads / ranks_));
    int64_t local = heads / ranks_;
    return project(attention, rank_ * local * dv, local * dv);
  }

  /// Splits a dense SwiGLU MLP, down(silu(gate x) * up x), by intermediate
  /// columns. `product` is the kiln.mul; anything else is left alone.
  LogicalResult partition(MulOp product) {
    auto act = product.getLhs().getDefiningOp<SiluOp>();
    Operation *gate = act ? projectionOf(act.getInput()) : nullptr;
    Operation *up = projectionOf(product.getRhs());
    Operation *down = product->hasOneUse() ? *product->user_begin() : nullptr;
    if (!gate || !up || !down || !projectionOf(down->getResult(0)) ||
        down->getOperand(0) != product.getResult() || !act->hasOneUse() ||
        !gate->hasOneUse() || !up->hasOneUse())
      return success(); // not an MLP
    int64_t inter = cast<RankedTensorType>(product.getType()).getDimSize(1);
    if (inter % ranks_ != 0)
      return product.emitOpError()
             << "kiln-partition-tensor: the MLP's " << inter
             << " intermediate columns do not split evenly over " << ranks_
             << " ranks";
    int64_t local = inter / ranks_, first = rank_ * local;
    if (failed(slice(gate, weightOf(gate), 0, first, local)) ||
        failed(slice(up, weightOf(up), 0, first, local)) ||
        failed(slice(down, weightOf(down), 1, first, local)))
      return failure();
    for (Value v :
         std::initializer_list<Value>{gate->getResult(0), up->getResult(0),
                                      act.getResult(), product.getResult()})
      v.setType(withDim(v.getType(), 1, local));
    return sum(down->getResult(0));
  }

  /// Splits every expert of `moe` (routed and shared) by intermediate
  /// columns. Under expert parallelism the op is already followed by a
  /// kiln.all_reduce (or, under data-parallel attention, a
  /// kiln.reduce_scatter_rows) over every rank, which then sums these parts
  /// too.
  LogicalResult partition(MoeOp moe) {
    if (failed(partitionExperts(moe, moe.getGateMutable(), moe.getUpMutable(),
                                moe.getDownMutable())))
      return failure();
    if (moe.getSharedGate() &&
        failed(partitionExperts(moe, moe.getSharedMutable()[0],
                                moe.getSharedMutable()[1],
                                moe.getSharedMutable()[2])))
      return failure();
    // Summed over every rank already (expert parallelism, or the
    // data-parallel exchange), these parts included.
    if (moe->hasOneUse() &&
        isa<AllReduceOp, ReduceScatterRowsOp>(*moe->user_begin()))
      return success();
    return sum(moe.getResult());
  }

private:
  /// The single use of `attention`'s result: a kiln.reshape to [T, heads *
  /// dv], then o_proj over this rank's columns [first, first + count); its
  /// partial result summed over the group.
  LogicalResult project(Operation *attention, int64_t first, int64_t count) {
    auto flat = attention->hasOneUse()
                    ? dyn_cast<ReshapeOp>(*attention->user_begin())
                    : ReshapeOp();
    Operation *o = flat && flat->hasOneUse() ? *flat->user_begin() : nullptr;
    if (!o || !projectionOf(o->getResult(0)) || o->getOperand(0) != flat)
      return attention->emitOpError()
             << "kiln-partition-tensor: the result does not feed o_proj "
                "through one kiln.reshape";
    flat.getResult().setType(withDim(flat.getType(), 1, count));
    if (failed(slice(o, weightOf(o), 1, first, count)))
      return failure();
    return sum(o->getResult(0));
  }

  /// Walks back from `v` (used by `user` alone) through per-head ops
  /// (kiln.rope, a kiln.rms_norm over the head dim, kiln.reshape, a bias
  /// kiln.add) to the projection that makes it; keeps this rank's share of
  /// the projection's rows and of the bias, and narrows dim 1 (heads, or
  /// heads x head dim) of every value on the way.
  LogicalResult splitHeads(Operation *user, Value v) {
    SmallVector<Value> chain;
    AddOp bias; // x + b, b a vector weight
    while (true) {
      if (!v.hasOneUse())
        return user->emitOpError()
               << "kiln-partition-tensor: a value on the way to the "
                  "projection has other uses";
      chain.push_back(v);
      Operation *op = v.getDefiningOp();
      if (projectionOf(v))
        break;
      if (auto r = dyn_cast_or_null<RopeOp>(op)) {
        v = r.getInput();
      } else if (auto r = dyn_cast_or_null<ReshapeOp>(op)) {
        v = r.getInput();
      } else if (auto n = dyn_cast_or_null<RmsNormOp>(op);
                 n && cast<RankedTensorType>(n.getType()).getRank() == 3) {
        v = n.getInput();
      } else if (auto a = dyn_cast_or_null<AddOp>(op); a && !bias) {
        auto w = a.getRhs().getDefiningOp<WeightOp>();
        if (!w || w.getType().getRank() != 1)
          return user->emitOpError()
                 << "kiln-partition-tensor: an add on the way to the "
                    "projection is not a bias";
        bias = a;
        v = a.getLhs();
      } else {
        return user->emitOpError()
               << "kiln-partition-tensor: the value is not made by a "
                  "projection through kiln.rope, a per-head kiln.rms_norm, "
                  "kiln.reshape or a bias kiln.add";
      }
    }
    Operation *p = v.getDefiningOp();
    int64_t rows = cast<RankedTensorType>(v.getType()).getDimSize(1);
    int64_t local = rows / ranks_, first = rank_ * local;
    if (failed(slice(p, weightOf(p), 0, first, local)))
      return failure();
    Operation *biasOp = bias;
    if (bias && failed(slice(biasOp, {&bias.getRhsMutable(), nullptr, {}}, 0,
                             first, local)))
      return failure();
    for (Value c : chain) {
      auto type = cast<RankedTensorType>(c.getType());
      c.setType(withDim(type, 1, type.getDimSize(1) / ranks_));
    }
    return success();
  }

  /// `w` cut to [first, first + count) along `dim` (matrix axis `axis`).
  Value sliced(WeightOp w, size_t dim, int64_t axis, int64_t first,
               int64_t count) {
    OpBuilder b(w);
    return WeightOp::create(b, w.getLoc(), withDim(w.getType(), dim, count),
                            w.getName(), w.getEncoding(),
                            w.getSourceScaleAttr(), w.getFirstExpertAttr(),
                            b.getDenseI64ArrayAttr({axis, first}))
        .getResult();
  }

  LogicalResult partitionExperts(MoeOp moe, OpOperand &gate, OpOperand &up,
                                 OpOperand &down) {
    RankedTensorType type = valuesType(gate.get().getType());
    int64_t inter = type.getDimSize(type.getRank() - 2);
    if (inter % ranks_ != 0)
      return moe.emitOpError()
             << "kiln-partition-tensor: " << inter
             << " expert intermediate columns do not split evenly over "
             << ranks_ << " ranks";
    int64_t local = inter / ranks_, first = rank_ * local;
    // A kiln.moe takes gate, up and down in one form: if this rank's share
    // of one cuts its blocks, all three are read dequantized.
    bool dense = cutsExpertBlocks(gate, 0, first, local) ||
                 cutsExpertBlocks(up, 0, first, local) ||
                 cutsExpertBlocks(down, 1, first, local);
    if (failed(sliceExpert(moe, gate, 0, first, local, dense)) ||
        failed(sliceExpert(moe, up, 0, first, local, dense)) ||
        failed(sliceExpert(moe, down, 1, first, local, dense)))
      return failure();
    return success();
  }

  /// The values and scales of a kiln.block_scaled expert weight that can
  /// be read dequantized (FP8, MXFP4), or nulls.
  static std::pair<WeightOp, WeightOp> dequantizableParts(BlockScaledOp s) {
    auto values = s ? s.getValues().getDefiningOp<WeightOp>() : WeightOp();
    auto scales = s ? s.getScales().getDefiningOp<WeightOp>() : WeightOp();
    if (!values || !scales || !dequantizable(values))
      return {};
    return {values, scales};
  }

  /// Whether [first, first + count) along matrix axis `axis` of the expert
  /// weight `operand` cuts its blocks (one that could be dequantized).
  static bool cutsExpertBlocks(OpOperand &operand, int64_t axis, int64_t first,
                               int64_t count) {
    auto scaled = operand.get().getDefiningOp<BlockScaledOp>();
    auto [values, scales] = dequantizableParts(scaled);
    if (!values)
      return false;
    RankedTensorType type = values.getType();
    int64_t full = type.getDimSize(type.getRank() - 2 + axis);
    return cutsBlocks(first, count, scaled.getType().getBlock()[size_t(axis)],
                      full);
  }

  /// Cuts the expert weight `operand` of `moe`: a kiln.weight, or a
  /// kiln.block_scaled whose values and scales are cut together (into a
  /// copy of it for this operand alone), or, with `dense`, read as f32
  /// (dequantizedWeight) and cut.
  LogicalResult sliceExpert(MoeOp moe, OpOperand &operand, int64_t axis,
                            int64_t first, int64_t count, bool dense) {
    auto scaled = operand.get().getDefiningOp<BlockScaledOp>();
    Operation *user = moe; // its operands change, never the op
    if (!scaled)
      return slice(user, {&operand, nullptr, {}}, axis, first, count);
    auto [values, scales] = dequantizableParts(scaled);
    if (dense && values) {
      operand.assign(dequantizedWeight(moe, values, scales));
      if (scaled->use_empty())
        scaled.erase();
      return slice(user, {&operand, nullptr, {}}, axis, first, count);
    }
    OpBuilder b(scaled);
    auto own = cast<BlockScaledOp>(b.clone(*scaled));
    operand.assign(own.getResult());
    ArrayRef<int64_t> block = scaled.getType().getBlock();
    if (scaled->use_empty())
      scaled.erase();
    if (failed(slice(user,
                     {&own.getValuesMutable(), &own.getScalesMutable(), block},
                     axis, first, count)))
      return failure();
    own.getResult().setType(
        blockScaledType(own.getValues(), own.getScales(), block));
    return success();
  }

  /// Replaces the uses of `partial` with its sum over the group.
  LogicalResult sum(Value partial) {
    OpBuilder b(partial.getContext());
    b.setInsertionPointAfterValue(partial);
    auto total = AllReduceOp::create(b, partial.getLoc(), partial,
                                     b.getI64IntegerAttr(ranks_));
    partial.replaceAllUsesExcept(total.getResult(), total);
    return success();
  }

public:
  /// Erases the whole weights this pass cut and nothing reads any more
  /// (weights unused before the pass are left as they were).
  void eraseReplaced() {
    for (Operation *w : replaced_)
      if (w->use_empty())
        w->erase();
    replaced_.clear();
  }

private:
  int64_t ranks_, rank_;
  llvm::SmallPtrSet<Operation *, 16> replaced_; // weights cut by slice()
  llvm::StringSet<> warned_;                    // weights dequantized, by name
  llvm::SmallPtrSet<Operation *, 8> narrowed_;  // caches made narrower
};

struct PartitionTensorPass
    : kiln::impl::KilnPartitionTensorPassBase<PartitionTensorPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || rank < 0 || rank >= ranks) {
      module.emitError() << "kiln-partition-tensor: rank " << int64_t(rank)
                         << " of " << int64_t(ranks)
                         << " ranks, expected 0 <= rank < ranks";
      return signalPassFailure();
    }
    if (ranks == 1)
      return;
    Partitioner p(ranks, rank);
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<GqaAttentionOp, MlaAttentionOp, MulOp, MoeOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult done = success();
      if (auto g = dyn_cast<GqaAttentionOp>(op))
        done = p.partition(g, module);
      else if (auto a = dyn_cast<MlaAttentionOp>(op))
        done = p.partition(a);
      else if (auto m = dyn_cast<MulOp>(op))
        done = p.partition(m);
      else
        done = p.partition(cast<MoeOp>(op));
      if (failed(done))
        return signalPassFailure();
    }
    p.eraseReplaced();
  }
};

} // namespace
