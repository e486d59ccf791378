//===- Passes.h - Kiln's passes ---------------------------------*- C++ -*-===//

#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the graph-to-fused pipeline (`kiln-fuse-graph`).
struct FusePipelineOptions {
  bool quantize = false;
  std::string quantizePolicy = "experts";
  std::string scaleRule = "even";
  int64_t moeBlockSize = 16;
};

/// quantize (optional) -> canonicalize -> fuse MoE routing -> fuse dequant
/// GEMMs -> canonicalize/CSE -> check the backend contract.
void buildFusePipeline(mlir::OpPassManager &pm,
                       const FusePipelineOptions &options);

/// Fused level to plan level (kiln_plan, docs/plans.md): kiln-build-plan ->
/// kiln-reuse-buffers -> (with `hostKernels`) kiln-select-host-kernels.
void buildPlanPipeline(mlir::OpPassManager &pm, bool hostKernels);

/// Registers every pass (generated registerKilnPasses) and the named
/// pipelines with the global registry.
void registerAllKilnPasses();

} // namespace kiln

#endif // KILN_PASSES_PASSES_H
