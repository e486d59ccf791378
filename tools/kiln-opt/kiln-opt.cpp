//===- kiln-opt.cpp - Kiln's mlir-opt ------------------------------------===//
//
// Registers only the dialects Kiln's IR uses (kiln, kiln_plan, func, and
// the GPU kernels' dialects) and Kiln's own passes.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnDialect.h"
#include "dialects/kiln/IR/KilnOps.h"
#include "dialects/plan/IR/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#ifdef KILN_HAVE_PASSES
#include "passes/Passes.h"
#include "passes/codegen/rocdl/RocdlCodegen.h"
#include "passes/emit/EmitPasses.h"
#endif

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<kiln::KilnDialect, kiln::plan::PlanDialect,
                  mlir::func::FuncDialect>();
  // Generic cleanups the pipelines use.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
#ifdef KILN_HAVE_PASSES
  kiln::registerAllKilnPasses();
  kiln::registerKilnEmitPasses();
  // The GPU kernels kiln-generate-gpu-kernels adds, to read them back.
  kiln::rocdl::registerCodegenDialects(registry);
#endif
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
