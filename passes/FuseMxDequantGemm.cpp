//===- FuseMxDequantGemm.cpp - kiln-fuse-mx-dequant-gemm ------------------===//
//
// Folds kiln.dequantize into the GEMMs that consume it: kiln.matmul becomes
// kiln.mx_matmul, and kiln.moe takes the quantized expert stacks as
// kiln.block_scaled values (values with their scales).
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
/// three matrices of a group must be dequantized with one block shape; each
/// becomes a kiln.block_scaled of the dequantize's values and scales.
struct FuseMoe : OpRewritePattern<MoeOp> {
  using OpRewritePattern::OpRewritePattern;

  static FailureOr<SmallVector<Value, 3>> blockScaled(PatternRewriter &rewriter,
                                                      Location loc, Value gate,
                                                      Value up, Value down) {
    std::array<DequantizeOp, 3> ops = {gate.getDefiningOp<DequantizeOp>(),
                                       up.getDefiningOp<DequantizeOp>(),
                                       down.getDefiningOp<DequantizeOp>()};
    for (DequantizeOp dq : ops)
      if (!dq || dq.getBlock() != ops[0].getBlock())
        return failure();
    SmallVector<Value, 3> scaled;
    for (DequantizeOp dq : ops) {
      BlockScaledType type =
          blockScaledType(dq.getValues(), dq.getScales(), dq.getBlock());
      scaled.push_back(BlockScaledOp::create(rewriter, loc, type,
                                             dq.getValues(), dq.getScales()));
    }
    return scaled;
  }

  LogicalResult matchAndRewrite(MoeOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<BlockScaledType>(op.getGate().getType()))
      return rewriter.notifyMatchFailure(op, "already fused");
    auto routed = blockScaled(rewriter, op.getLoc(), op.getGate(), op.getUp(),
                              op.getDown());
    if (failed(routed))
      return rewriter.notifyMatchFailure(op, "experts are not dequantized");
    // The shared expert may be stored in another format than the routed
    // ones (BF16 next to MXFP4 experts stays as it is; FP8 next to
    // re-quantized MXFP4 keeps its own block).
    FailureOr<SmallVector<Value, 3>> shared = failure();
    if (op.getSharedGate())
      shared = blockScaled(rewriter, op.getLoc(), op.getSharedGate(),
                           op.getSharedUp(), op.getSharedDown());
    rewriter.modifyOpInPlace(op, [&] {
      op.getGateMutable().assign((*routed)[0]);
      op.getUpMutable().assign((*routed)[1]);
      op.getDownMutable().assign((*routed)[2]);
      if (succeeded(shared))
        op.getSharedMutable().assign(*shared);
    });
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
