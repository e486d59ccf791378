//===- WeightGroups.cpp ---------------------------------------------------===//

#include "passes/WeightGroups.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"

using namespace kiln;

mlir::FailureOr<unsigned> kiln::parseWeightGroups(llvm::StringRef policy) {
  llvm::SmallVector<llvm::StringRef> parts;
  policy.split(parts, ',', -1, /*KeepEmpty=*/false);
  if (parts.empty())
    return mlir::failure();
  unsigned mask = 0;
  for (llvm::StringRef p : parts) {
    p = p.trim();
    unsigned g = llvm::StringSwitch<unsigned>(p)
                     .Case("experts", kGroupExperts)
                     .Case("shared", kGroupShared)
                     .Case("dense", kGroupDense)
                     .Case("attention", kGroupAttention)
                     .Case("mtp", kGroupMtp)
                     .Case("lm_head", kGroupLmHead)
                     .Case("all", kGroupAll)
                     .Default(kGroupNone);
    if (g == kGroupNone)
      return mlir::failure();
    mask |= g;
  }
  return mask;
}

/// Layer index of "model.layers.<n>.<rest>", or -1.
static int64_t layerOf(llvm::StringRef name) {
  if (!name.consume_front("model.layers."))
    return -1;
  int64_t layer;
  if (name.consumeInteger(10, layer) || !name.starts_with("."))
    return -1;
  return layer;
}

WeightGroup kiln::classifyWeight(llvm::StringRef name, int64_t mtpLayer,
                                 bool inDraft) {
  if (name.ends_with("mlp.gate.weight") || name.contains("embed_tokens") ||
      name.contains("norm"))
    return kGroupNone;
  if (mtpLayer >= 0 && layerOf(name) == mtpLayer)
    return kGroupMtp;
  if (name.contains("lm_head"))
    return inDraft ? kGroupMtp : kGroupLmHead;
  if (name.contains(".mlp.experts."))
    return kGroupExperts;
  if (name.contains(".mlp.shared_experts."))
    return kGroupShared;
  if (name.contains(".self_attn."))
    return kGroupAttention;
  if (name.contains(".mlp."))
    return kGroupDense;
  return kGroupNone;
}
