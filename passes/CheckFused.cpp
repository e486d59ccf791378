//===- CheckFused.cpp - kiln-check-fused ----------------------------------===//
//
// The backend contract: code generation accepts fused-level programs only.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCHECKFUSEDPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct CheckFusedPass : kiln::impl::KilnCheckFusedPassBase<CheckFusedPass> {
  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](Operation *op) {
      if (isa<ExpertsOp>(op)) {
        op->emitError() << "unfused MoE: the router feeding this kiln.experts "
                           "does not match the model's declared router, so "
                           "kiln-fuse-moe-routing left it";
        ok = false;
      } else if (isa<DequantizeOp>(op)) {
        op->emitError() << "kiln.dequantize left in the program: its result "
                           "must feed a GEMM (kiln.matmul or kiln.moe) to be "
                           "fused";
        ok = false;
      }
    });
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
