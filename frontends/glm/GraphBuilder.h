//===- GraphBuilder.h - GLM checkpoint to kiln graph IR ---------*- C++ -*-===//
//
// Builds the graph-level kiln module of a GLM model: module-level cache
// declarations, and the entry points
//
//   func.func @prefill(%ids, %seq, %pos, %rows) -> (logits [R, V], hidden [T,
//   H]) func.func @decode (same signature; one token per sequence) func.func
//   @draft  (%ids, %seq, %pos, %rows, %hidden) -> (logits, hidden)
//
// `ids`, `seq`, `pos` are [T] i32 (token, sequence, position per row),
// `rows` [R] i32 selects the rows whose logits are computed. `hidden` is the
// final-normed hidden state (model.norm output; for @draft the MTP layer's
// shared_head.norm output, which the next draft step takes). Weights are
// `kiln.weight` references; the router is written op by op.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_GRAPHBUILDER_H
#define KILN_FRONTENDS_GLM_GRAPHBUILDER_H

#include "frontends/glm/Config.h"
#include "frontends/glm/WeightSource.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::glm {

struct GraphOptions {
  /// Element type of the KV caches: "f32" or "bf16".
  std::string cacheType = "f32";
  /// Emit @draft when the config has an MTP layer.
  bool emitDraft = true;
};

/// Builds the module; on failure emits an error diagnostic at `loc` that
/// names the tensor or field, and returns null.
mlir::OwningOpRef<mlir::ModuleOp> buildGlmModule(mlir::MLIRContext *context,
                                                 mlir::Location loc,
                                                 const GlmConfig &config,
                                                 const WeightSource &weights,
                                                 const GraphOptions &options);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_GRAPHBUILDER_H
