//===- ModelLayout.h - The tensors a GLM config implies ---------*- C++ -*-===//
//
// From a GlmConfig alone, lists every linear layer (HF module name, logical
// [out, in], bias or not) and every plain tensor (norms, router, embeddings)
// the model has, following GLM.md 4: main layers 0..L-1, then the MTP layers
// L.. (always MoE, always with a full indexer on GLM-5.x). Shared IndexShare
// layers have no indexer tensors; their indexer prefix is listed as
// forbidden so a checkpoint that disagrees with `indexer_types` is caught.
// Whether a linear is BF16, FP8 or MXFP4 is not decided here: WeightCatalog
// reads that from the tensors present.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_MODELLAYOUT_H
#define KILN_FRONTENDS_GLM_MODELLAYOUT_H

#include "frontends/glm/Config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::glm {

struct LinearSpec {
  std::string module; // e.g. "model.layers.3.mlp.experts.5.gate_proj"
  int64_t out = 0;
  int64_t in = 0;
  bool hasBias = false;
  bool optional = false; // may be absent (MTP shared_head.head)
};

struct PlainSpec {
  std::string name; // full tensor name, e.g. "model.norm.weight"
  std::vector<int64_t> shape;
  bool optional = false; // may be absent (MTP embed_tokens)
};

struct ModelLayout {
  std::vector<LinearSpec> linears;
  std::vector<PlainSpec> plains;
  /// Name prefixes no tensor may start with (indexers of shared layers).
  std::vector<std::string> forbiddenPrefixes;
};

/// "model.layers.<layer>."
std::string layerPrefix(int64_t layer);

/// The full inventory, main layers then MTP layers.
ModelLayout buildModelLayout(const GlmConfig &config);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_MODELLAYOUT_H
