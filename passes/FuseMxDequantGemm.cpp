//===- FuseMxDequantGemm.cpp - kiln-fuse-mx-dequant-gemm ------------------===//
//
// Folds kiln.dequantize into the GEMMs that consume it: kiln.matmul becomes
// kiln.mx_matmul, and kiln.moe takes the quantized expert stacks with their
// scales.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEMXDEQUANTGEMMPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct FuseMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto dq = op.getRhs().getDefiningOp<DequantizeOp>();
    if (!dq)
      return rewriter.notifyMatchFailure(op, "rhs is not dequantized");
    rewriter.replaceOpWithNewOp<MxMatmulOp>(op, op.getType(), op.getLhs(),
                                            dq.getValues(), dq.getScales(),
                                            dq.getBlockAttr());
    return success();
  }
};

/// kiln.moe with dequantized routed (and optionally shared) experts. All
/// three matrices of a group must be dequantized with one block shape.
struct FuseMoe : OpRewritePattern<MoeOp> {
  using OpRewritePattern::OpRewritePattern;

  static FailureOr<std::array<DequantizeOp, 3>> matchGroup(Value gate, Value up,
                                                           Value down) {
    std::array<DequantizeOp, 3> ops = {gate.getDefiningOp<DequantizeOp>(),
                                       up.getDefiningOp<DequantizeOp>(),
                                       down.getDefiningOp<DequantizeOp>()};
    for (DequantizeOp dq : ops)
      if (!dq || dq.getBlock() != ops[0].getBlock())
        return failure();
    return ops;
  }

  LogicalResult matchAndRewrite(MoeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getGateScales())
      return rewriter.notifyMatchFailure(op, "already fused");
    auto routed = matchGroup(op.getGate(), op.getUp(), op.getDown());
    if (failed(routed))
      return rewriter.notifyMatchFailure(op, "experts are not dequantized");
    Value sharedGate = op.getSharedGate(), sharedUp = op.getSharedUp(),
          sharedDown = op.getSharedDown();
    Value sgs, sus, sds;
    DenseI64ArrayAttr sharedBlock;
    if (sharedGate) {
      // The shared expert may be stored in another format than the routed
      // ones (BF16 next to MXFP4 experts stays as it is; FP8 next to
      // re-quantized MXFP4 keeps its own block).
      auto shared = matchGroup(sharedGate, sharedUp, sharedDown);
      if (succeeded(shared)) {
        sharedBlock = (*shared)[0].getBlockAttr();
        sharedGate = (*shared)[0].getValues();
        sharedUp = (*shared)[1].getValues();
        sharedDown = (*shared)[2].getValues();
        sgs = (*shared)[0].getScales();
        sus = (*shared)[1].getScales();
        sds = (*shared)[2].getScales();
      }
    }
    rewriter.replaceOpWithNewOp<MoeOp>(
        op, op.getType(), op.getInput(), op.getRouter(), op.getRouterBias(),
        (*routed)[0].getValues(), (*routed)[1].getValues(),
        (*routed)[2].getValues(), (*routed)[0].getScales(),
        (*routed)[1].getScales(), (*routed)[2].getScales(), sharedGate,
        sharedUp, sharedDown, sgs, sus, sds, op.getTopKAttr(),
        op.getNGroupAttr(), op.getTopkGroupAttr(),
        op.getRoutedScalingFactorAttr(), op.getNormTopkProbAttr(),
        op.getBlockSizeAttr(), (*routed)[0].getBlockAttr(), sharedBlock,
        op.getExpertOffsetAttr());
    return success();
  }
};

/// kiln.mla_attention reads kv_b_proj inside the kernel: it takes the
/// block-scaled values and scales directly.
struct FuseMla : OpRewritePattern<MlaAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MlaAttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto dq = op.getKvB().getDefiningOp<DequantizeOp>();
    if (!dq || op.getKvBScales())
      return rewriter.notifyMatchFailure(op, "kv_b is not dequantized");
    rewriter.modifyOpInPlace(op, [&] {
      op.getKvBMutable().assign(dq.getValues());
      op.getKvBScalesMutable().assign(dq.getScales());
      op.setBlockAttr(dq.getBlockAttr());
    });
    return success();
  }
};

struct FuseMxDequantGemmPass
    : kiln::impl::KilnFuseMxDequantGemmPassBase<FuseMxDequantGemmPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMatmul, FuseMoe, FuseMla>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
