//===- QuantizeMxfp4.cpp - kiln-quantize-mxfp4 ----------------------------===//
//
// Chooses which weights become MXFP4 (by weight group, from the checkpoint
// name) and rewrites them into values + scales + dequantize. The bytes are
// produced later, while the compiler streams weights into the artifact.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"
#include "passes/WeightGroups.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNQUANTIZEMXFP4PASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// True when every use of `v` reads it as a GEMM weight.
bool onlyFeedsGemms(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto mm = dyn_cast<MatmulOp>(user)) {
      if (mm.getRhs() != v)
        return false;
      continue;
    }
    if (auto ex = dyn_cast<ExpertsOp>(user)) {
      if (v != ex.getGate() && v != ex.getUp() && v != ex.getDown())
        return false;
      continue;
    }
    if (auto moe = dyn_cast<MoeOp>(user)) {
      if (v == moe.getInput() || v == moe.getRouter() ||
          v == moe.getRouterBias())
        return false;
      continue;
    }
    return false;
  }
  return !v.use_empty();
}

struct QuantizeMxfp4Pass
    : kiln::impl::KilnQuantizeMxfp4PassBase<QuantizeMxfp4Pass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto groups = parseWeightGroups(policy);
    if (failed(groups)) {
      module.emitError() << "unknown weight group in policy '" << policy
                         << "'; expected a comma-separated list of experts, "
                            "shared, dense, attention, mtp, lm_head, all";
      return signalPassFailure();
    }
    std::optional<ScaleRule> scaleRule = symbolizeScaleRule(rule);
    if (!scaleRule) {
      module.emitError() << "unknown scale rule '" << rule
                         << "'; expected even or floor";
      return signalPassFailure();
    }
    int64_t mtpLayer = -1;
    if (auto n = module->getAttrOfType<IntegerAttr>("kiln.num_hidden_layers"))
      mtpLayer = n.getInt();

    auto selected = [&](Operation *op, StringRef name) {
      auto fn = op->getParentOfType<func::FuncOp>();
      bool inDraft = fn && fn.getSymName() == "draft";
      return (*groups & classifyWeight(name, mtpLayer, inDraft)) != 0;
    };

    SmallVector<WeightOp> floats;
    SmallVector<DequantizeOp> fp8;
    module.walk([&](Operation *op) {
      if (auto w = dyn_cast<WeightOp>(op)) {
        Type e = w.getType().getElementType();
        if (w.getEncoding().getKind() == StorageKind::raw &&
            isa<FloatType>(e) &&
            !isa<Float4E2M1FNType, Float8E4M3FNType, Float8E8M0FNUType>(e))
          floats.push_back(w);
      } else if (auto dq = dyn_cast<DequantizeOp>(op)) {
        auto values = dq.getValues().getDefiningOp<WeightOp>();
        if (values && isa<Float8E4M3FNType>(values.getType().getElementType()))
          fp8.push_back(dq);
      }
    });

    OpBuilder b(&getContext());
    auto makeMx = [&](Location loc, StringRef name, RankedTensorType logical,
                      StringAttr sourceScale, Type resultType) -> Value {
      ArrayRef<int64_t> shape = logical.getShape();
      SmallVector<int64_t> scaleShape(shape);
      scaleShape.back() /= 32;
      auto valuesType =
          RankedTensorType::get(shape, b.getType<Float4E2M1FNType>());
      auto scalesType =
          RankedTensorType::get(scaleShape, b.getType<Float8E8M0FNUType>());
      auto vals = WeightOp::create(
          b, loc, valuesType, name,
          EncodingAttr::get(b.getContext(), StorageKind::mxfp4_values,
                            *scaleRule),
          sourceScale, IntegerAttr(), DenseI64ArrayAttr());
      auto scales = WeightOp::create(
          b, loc, scalesType, name,
          EncodingAttr::get(b.getContext(), StorageKind::mxfp4_scales,
                            *scaleRule),
          sourceScale, IntegerAttr(), DenseI64ArrayAttr());
      return DequantizeOp::create(b, loc, resultType, vals, scales,
                                  b.getDenseI64ArrayAttr({1, 32}));
    };

    for (WeightOp w : floats) {
      auto type = w.getType();
      if (type.getRank() < 2 || type.getShape().back() % 32 != 0 ||
          !selected(w, w.getName()) || !onlyFeedsGemms(w.getResult()))
        continue;
      b.setInsertionPoint(w);
      Value dq = makeMx(w.getLoc(), w.getName(), type, StringAttr(), type);
      w.getResult().replaceAllUsesWith(dq);
      w.erase();
    }
    for (DequantizeOp dq : fp8) {
      auto values = dq.getValues().getDefiningOp<WeightOp>();
      auto scales = dq.getScales().getDefiningOp<WeightOp>();
      auto type = values.getType();
      if (!scales || type.getShape().back() % 32 != 0 ||
          !selected(dq, values.getName()) || !onlyFeedsGemms(dq.getResult()))
        continue;
      b.setInsertionPoint(dq);
      Value mx = makeMx(dq.getLoc(), values.getName(), type,
                        b.getStringAttr(scales.getName()), dq.getType());
      dq.getResult().replaceAllUsesWith(mx);
      dq.erase();
      if (values->use_empty())
        values.erase();
      if (scales->use_empty())
        scales.erase();
    }
  }
};

} // namespace
