//===- PartitionExperts.cpp - kiln-partition-experts ----------------------===//
//
// One rank's share of every kiln.moe's routed experts (Passes.td). Each
// expert stack operand is a kiln.weight of E experts, or a kiln.block_scaled
// of two (values and scales); each such kiln.weight is replaced by one of
// E / ranks experts starting at this rank's first, the shared expert is
// dropped on ranks other than 0, and a kiln.all_reduce sums the ranks'
// results (with dp-attention: kiln.all_gather_rows before,
// kiln.reduce_scatter_rows after; or, exchange=all-to-all,
// kiln.dispatch_rows before, kiln.combine_rows after, and the shared expert
// on every rank for its own rows).
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPARTITIONEXPERTSPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The stack `v` (a kiln.weight of E experts) cut to experts [first,
/// first + count).
FailureOr<Value> localStack(OpBuilder &b, MoeOp moe, Value v, int64_t first,
                            int64_t count) {
  auto weight = v.getDefiningOp<WeightOp>();
  if (!weight || !weight.isExpertStack() || weight.getFirstExpert())
    return moe.emitOpError()
           << "kiln-partition-experts: an expert operand is not a whole "
              "kiln.weight expert stack";
  auto type = cast<RankedTensorType>(weight.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = count;
  b.setInsertionPoint(weight);
  auto local = WeightOp::create(
      b, weight.getLoc(), RankedTensorType::get(shape, type.getElementType()),
      weight.getName(), weight.getEncoding(), weight.getSourceScaleAttr(),
      b.getI64IntegerAttr(first), weight.getSliceAttr());
  return local.getResult();
}

/// The expert stack operand `v` of `moe` cut to experts [first, first +
/// count): a kiln.weight, or a kiln.block_scaled whose values and scales
/// are both cut.
FailureOr<Value> localExperts(OpBuilder &b, MoeOp moe, Value v, int64_t first,
                              int64_t count) {
  auto scaled = v.getDefiningOp<BlockScaledOp>();
  if (!scaled)
    return localStack(b, moe, v, first, count);
  FailureOr<Value> values =
      localStack(b, moe, scaled.getValues(), first, count);
  if (failed(values))
    return failure();
  FailureOr<Value> scales =
      localStack(b, moe, scaled.getScales(), first, count);
  if (failed(scales))
    return failure();
  BlockScaledType type =
      blockScaledType(*values, *scales, scaled.getType().getBlock());
  b.setInsertionPoint(scaled);
  return BlockScaledOp::create(b, scaled.getLoc(), type, *values, *scales)
      .getResult();
}

/// Erases the kiln.weight or kiln.block_scaled (and then its weights) that
/// defines `v` once nothing reads it.
void eraseIfUnused(Value v) {
  Operation *op = v.getDefiningOp();
  if (!isa_and_nonnull<WeightOp, BlockScaledOp>(op) || !op->use_empty())
    return;
  SmallVector<Value> operands(op->getOperands());
  op->erase();
  for (Value operand : operands)
    eraseIfUnused(operand);
}

struct PartitionExpertsPass
    : kiln::impl::KilnPartitionExpertsPassBase<PartitionExpertsPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || rank < 0 || rank >= ranks) {
      module.emitError() << "kiln-partition-experts: rank " << int64_t(rank)
                         << " of " << int64_t(ranks)
                         << " ranks, expected 0 <= rank < ranks";
      return signalPassFailure();
    }
    if (dpGroup < 1) {
      module.emitError() << "kiln-partition-experts: dp-group "
                         << int64_t(dpGroup) << ", expected >= 1";
      return signalPassFailure();
    }
    if (exchange != "gather" && exchange != "all-to-all") {
      module.emitError() << "kiln-partition-experts: exchange '" << exchange
                         << "', expected gather or all-to-all";
      return signalPassFailure();
    }
    if (exchange == "all-to-all" && (!dpAttention || dpGroup != 1)) {
      module.emitError()
          << "kiln-partition-experts: exchange all-to-all sends each rank's "
             "own rows, so it needs dp-attention with dp-group 1 (no tensor "
             "parallelism beside it), found "
          << (dpAttention ? "dp-group " + std::to_string(dpGroup)
                          : std::string("no dp-attention"));
      return signalPassFailure();
    }
    if (ranks == 1)
      return;
    SmallVector<MoeOp> moes;
    module.walk([&](MoeOp op) { moes.push_back(op); });
    for (MoeOp moe : moes)
      if (failed(partition(moe)))
        return signalPassFailure();
  }

  LogicalResult partition(MoeOp moe) {
    if (moe.getExpertOffset())
      return moe.emitOpError() << "kiln-partition-experts: already partitioned";
    if (llvm::any_of(moe->getUsers(),
                     [](Operation *u) { return isa<AllReduceOp>(u); }))
      return moe.emitOpError()
             << "kiln-partition-experts: the result is already summed over "
                "ranks; run this pass before kiln-partition-tensor";
    int64_t experts =
        cast<RankedTensorType>(moe.getRouter().getType()).getDimSize(0);
    if (experts % ranks != 0)
      return moe.emitOpError() << "kiln-partition-experts: " << experts
                               << " experts do not split evenly over "
                               << int64_t(ranks) << " ranks";
    int64_t count = experts / int64_t(ranks), first = int64_t(rank) * count;
    OpBuilder b(moe);
    SmallVector<Value> local;
    for (Value s : {moe.getGate(), moe.getUp(), moe.getDown()}) {
      FailureOr<Value> l = localExperts(b, moe, s, first, count);
      if (failed(l))
        return failure();
      local.push_back(*l);
    }
    // The whole stacks and the shared expert, each once (gate and up may be
    // one value).
    llvm::SetVector<Value> whole;
    for (Value s : {moe.getGate(), moe.getUp(), moe.getDown()})
      whole.insert(s);
    whole.insert_range(moe.getShared());
    bool allToAll = exchange == "all-to-all";
    bool shared = rank == 0 || allToAll;
    b.setInsertionPoint(moe);
    Value input = moe.getInput();
    DispatchRowsOp dispatch;
    if (allToAll) {
      bool hasShared = !moe.getShared().empty();
      int64_t words = (int64_t(ranks) + 31) / 32;
      auto routes =
          RankedTensorType::get({ShapedType::kDynamic, words}, b.getI32Type());
      dispatch = DispatchRowsOp::create(
          b, moe.getLoc(), input.getType(), routes, input, moe.getRouter(),
          moe.getRouterBias(), moe.getTopKAttr(), moe.getNGroupAttr(),
          moe.getTopkGroupAttr(), b.getI64IntegerAttr(count),
          hasShared ? b.getUnitAttr() : UnitAttr());
      input = dispatch.getRows();
    } else if (dpAttention) {
      input = AllGatherRowsOp::create(b, moe.getLoc(), input.getType(), input,
                                      b.getI64IntegerAttr(dpGroup));
    }
    auto part = MoeOp::create(
        b, moe.getLoc(), moe.getType(), input, moe.getRouter(),
        moe.getRouterBias(), local[0], local[1], local[2],
        shared ? ValueRange(moe.getShared()) : ValueRange(), moe.getTopKAttr(),
        moe.getNGroupAttr(), moe.getTopkGroupAttr(),
        moe.getRoutedScalingFactorAttr(), moe.getNormTopkProbAttr(),
        moe.getBlockSizeAttr(), b.getI64IntegerAttr(first),
        allToAll && !moe.getShared().empty() ? b.getUnitAttr() : UnitAttr());
    Value sum =
        allToAll ? CombineRowsOp::create(b, moe.getLoc(), moe.getType(), part,
                                         dispatch.getRoutes())
                       .getResult()
        : dpAttention
            ? ReduceScatterRowsOp::create(b, moe.getLoc(), moe.getType(), part,
                                          b.getI64IntegerAttr(dpGroup))
                  .getResult()
            : AllReduceOp::create(b, moe.getLoc(), part).getResult();
    moe.getResult().replaceAllUsesWith(sum);
    moe.erase();
    // Whole stacks, and the shared expert on ranks that drop it, nothing
    // reads any more.
    for (Value s : whole)
      eraseIfUnused(s);
    return success();
  }
};

} // namespace
