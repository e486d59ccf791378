//===- FuseMoeRouting.cpp - kiln-fuse-moe-routing -------------------------===//
//
// Matches, from each kiln.experts upwards, the GLM noaux_tc router:
//
//   %l   = kiln.matmul %x, %router          (f32 result)
//   %s   = kiln.sigmoid %l
//   %sel = kiln.add %s, %bias               (1-D bias: selection only)
//   %m   = kiln.group_limit %sel ...        (absent when it is a no-op)
//   %v, %idx = kiln.top_k %m k K
//   %w   = kiln.gather %s[%idx]             (the unbiased scores)
//   %n   = kiln.normalize %w eps 1e-20      (iff norm_topk_prob)
//   %f   = kiln.scale %n by F               (absent when F == 1)
//   %y   = kiln.experts %x, %idx, %f, %gate, %up, %down
//
// and, when the only use of %y is an add with the shared expert
// down(silu(gate x) * up x) of the same %x, that too. Everything must agree
// with the module's `kiln.router` attribute; anything else is left alone.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEMOEROUTINGPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The router the frontend declared from config.json.
struct RouterSpec {
  int64_t topK = 0, nGroup = 1, topkGroup = 1;
  bool norm = true;
  float scale = 1.0f;
};

FailureOr<RouterSpec> readRouterSpec(ModuleOp module) {
  auto router = module->getAttrOfType<RouterAttr>("kiln.router");
  if (!router)
    return failure();
  RouterSpec spec;
  spec.topK = router.getTopK();
  spec.nGroup = router.getNGroup();
  spec.topkGroup = router.getTopkGroup();
  spec.norm = router.getNormTopkProb();
  spec.scale = router.getRoutedScalingFactor().getValueAsDouble();
  return spec;
}

/// The shared expert `down(silu(gate x) * up x)`: its three weights.
struct SharedExpert {
  Value gate, up, down;
};

std::optional<SharedExpert> matchSharedExpert(Value v, Value x) {
  auto down = v.getDefiningOp<MatmulOp>();
  if (!down)
    return std::nullopt;
  auto mul = down.getLhs().getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  auto silu = mul.getLhs().getDefiningOp<SiluOp>();
  auto upMm = mul.getRhs().getDefiningOp<MatmulOp>();
  if (!silu || !upMm)
    return std::nullopt;
  auto gateMm = silu.getInput().getDefiningOp<MatmulOp>();
  if (!gateMm || gateMm.getLhs() != x || upMm.getLhs() != x)
    return std::nullopt;
  return SharedExpert{gateMm.getRhs(), upMm.getRhs(), down.getRhs()};
}

struct FuseRouting : OpRewritePattern<ExpertsOp> {
  FuseRouting(MLIRContext *ctx, RouterSpec spec, int64_t blockSize)
      : OpRewritePattern(ctx), spec(spec), blockSize(blockSize) {}

  LogicalResult matchAndRewrite(ExpertsOp op,
                                PatternRewriter &rewriter) const override {
    // Routing weights: [scale] <- [normalize] <- gather.
    Value w = op.getWeights();
    float scale = 1.0f;
    if (auto s = w.getDefiningOp<ScaleOp>()) {
      scale = s.getFactor().convertToFloat();
      w = s.getInput();
    }
    if (scale != spec.scale)
      return rewriter.notifyMatchFailure(op, "routed scale differs");
    bool norm = false;
    if (auto n = w.getDefiningOp<NormalizeOp>()) {
      if (n.getEpsilon().convertToFloat() != 1e-20f)
        return rewriter.notifyMatchFailure(op, "normalization epsilon");
      norm = true;
      w = n.getInput();
    }
    if (norm != spec.norm)
      return rewriter.notifyMatchFailure(op, "normalization differs");
    auto gather = w.getDefiningOp<GatherOp>();
    if (!gather || gather.getIndices() != op.getIndices())
      return rewriter.notifyMatchFailure(op, "weights are not gathered");

    // Selection: top_k <- [group_limit] <- add(sigmoid, bias).
    auto topk = op.getIndices().getDefiningOp<TopKOp>();
    if (!topk || topk.getK() != spec.topK)
      return rewriter.notifyMatchFailure(op, "top-k differs");
    Value sel = topk.getInput();
    int64_t nGroup = 1, topkGroup = 1;
    if (auto g = sel.getDefiningOp<GroupLimitOp>()) {
      nGroup = g.getNGroup();
      topkGroup = g.getTopkGroup();
      sel = g.getInput();
    }
    bool groupsAgree = (nGroup == spec.nGroup && topkGroup == spec.topkGroup) ||
                       (nGroup == topkGroup && spec.nGroup == spec.topkGroup);
    if (!groupsAgree)
      return rewriter.notifyMatchFailure(op, "group limit differs");
    auto add = sel.getDefiningOp<AddOp>();
    if (!add)
      return rewriter.notifyMatchFailure(op, "no selection bias");
    auto sigmoid = add.getLhs().getDefiningOp<SigmoidOp>();
    Value bias = add.getRhs();
    if (!sigmoid || cast<RankedTensorType>(bias.getType()).getRank() != 1)
      return rewriter.notifyMatchFailure(op, "not a sigmoid + bias router");
    // The weights must use the unbiased scores.
    if (gather.getInput() != sigmoid.getResult())
      return rewriter.notifyMatchFailure(op, "bias reaches the weights");
    auto gateMm = sigmoid.getInput().getDefiningOp<MatmulOp>();
    if (!gateMm || gateMm.getLhs() != op.getInput() ||
        !gateMm.getType().getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "router logits are not FP32");

    // The shared expert, when the experts' only user adds it.
    Operation *root = op;
    std::optional<SharedExpert> shared;
    if (op->hasOneUse()) {
      if (auto sum = dyn_cast<AddOp>(*op->user_begin())) {
        Value other =
            sum.getLhs() == op.getResult() ? sum.getRhs() : sum.getLhs();
        shared = matchSharedExpert(other, op.getInput());
        if (shared)
          root = sum;
      }
    }

    SmallVector<Value, 3> sharedExpert;
    if (shared)
      sharedExpert = {shared->gate, shared->up, shared->down};
    rewriter.setInsertionPoint(root);
    auto moe = MoeOp::create(
        rewriter, root->getLoc(), op.getType(), op.getInput(), gateMm.getRhs(),
        bias, op.getGate(), op.getUp(), op.getDown(), sharedExpert,
        rewriter.getI64IntegerAttr(spec.topK),
        rewriter.getI64IntegerAttr(spec.nGroup),
        rewriter.getI64IntegerAttr(spec.topkGroup),
        rewriter.getF32FloatAttr(spec.scale),
        spec.norm ? rewriter.getUnitAttr() : UnitAttr(),
        rewriter.getI64IntegerAttr(blockSize), IntegerAttr());
    rewriter.replaceOp(root, moe.getResult());
    return success();
  }

  RouterSpec spec;
  int64_t blockSize;
};

struct FuseMoeRoutingPass
    : kiln::impl::KilnFuseMoeRoutingPassBase<FuseMoeRoutingPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize < 1) {
      module.emitError() << "block-size must be positive, found " << blockSize;
      return signalPassFailure();
    }
    auto spec = readRouterSpec(module);
    if (failed(spec)) {
      bool hasExperts = false;
      module.walk([&](ExpertsOp) { hasExperts = true; });
      if (hasExperts) {
        module.emitError() << "kiln.experts present but the module has no "
                              "valid 'kiln.router' attribute (top_k, "
                              "n_group, topk_group, norm_topk_prob, "
                              "routed_scaling_factor)";
        signalPassFailure();
      }
      return;
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRouting>(&getContext(), *spec, blockSize);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
