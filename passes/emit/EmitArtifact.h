//===- EmitArtifact.h - Fused kiln IR + weights to an artifact --*- C++ -*-===//

#ifndef KILN_PASSES_EMIT_EMITARTIFACT_H
#define KILN_PASSES_EMIT_EMITARTIFACT_H

#include "support/Status.h"
#include "support/TensorSource.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// What the artifact's ModelConfig records about the model, as the frontend
/// read it (kiln-compile fills it from config.json): the back end knows no
/// checkpoint format and no frontend's config class.
struct ModelFacts {
  std::string family; // e.g. "glm_moe_dsa"
  int64_t hiddenSize = 0, vocabSize = 0, numLayers = 0, maxPositions = 0;
  std::vector<int32_t> eosTokenIds;
  int32_t padTokenId = -1; // -1: none
};

struct CompileOptions {
  std::string outputPath;
  std::string targets = "cpu";
  uint64_t maxFileBytes = uint64_t(64) << 30;
  int specDefault = 3;
  /// With cpu among the targets: compile the host kernels into an x86-64
  /// shared object (passes/emit/HostKernels.h).
  bool hostKernels = true;
  /// CPU-only artifacts: store the BF16 matrices only matmuls read in row
  /// panels (support/WeightPanels.h); kiln-compile --no-weight-panels.
  bool weightPanels = true;
  /// Several ranks: this artifact is rank `rank` of `ranks`, of which
  /// `tensorParallel` form each tensor-parallel group (the module already
  /// partitioned: kiln-partition-experts, kiln-partition-tensor).
  int ranks = 1;
  int rank = 0;
  int tensorParallel = 1;
  /// kiln-compile --dp-attention (ModelConfig.attention_data_parallel).
  bool attentionDataParallel = false;
  /// GPU targets: MLA attention in decode plans, "vector" (a workgroup per
  /// (token, head), keys split) or "mfma" (16 heads a workgroup on the
  /// matrix units); kiln-compile --gpu-decode-attention.
  std::string decodeAttention = "vector";
  /// GPU targets: GEMMs over FP8 block-scaled weights, "bf16" (weights
  /// decoded to bf16, bf16 MFMAs) or "fp8" (activations quantized to FP8
  /// per 1 x 128 block, FP8 MFMAs); kiln-compile --gpu-fp8-gemm.
  std::string fp8Gemm = "bf16";
};

/// Lowers the fused module to execution plans, streams the weights from
/// `source` (quantizing where the IR says so) and writes the artifact.
/// `checkpointDir` holds config.json and the tokenizer files.
Status compileArtifact(mlir::ModuleOp module, const ModelFacts &model,
                       const TensorSource &source,
                       const std::string &checkpointDir,
                       const CompileOptions &options);

} // namespace kiln

#endif // KILN_PASSES_EMIT_EMITARTIFACT_H
