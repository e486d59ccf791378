//===- WeightGroups.h - Weight groups of a GLM checkpoint -------*- C++ -*-===//
//
// The groups the quantization policy selects, decided from Hugging Face
// tensor names. The MTP layer (`model.layers.<num_hidden_layers>.`) is its
// own group whatever the tensor inside it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_WEIGHTGROUPS_H
#define KILN_PASSES_WEIGHTGROUPS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

namespace kiln {

enum WeightGroup : unsigned {
  kGroupNone = 0,
  kGroupExperts = 1 << 0,
  kGroupShared = 1 << 1,
  kGroupDense = 1 << 2,
  kGroupAttention = 1 << 3,
  kGroupMtp = 1 << 4,
  kGroupLmHead = 1 << 5,
  kGroupAll = (1 << 6) - 1,
};

/// Parses "experts,shared" etc. into a mask; failure names nothing (the
/// caller reports the whole policy string).
mlir::FailureOr<unsigned> parseWeightGroups(llvm::StringRef policy);

/// The group of a checkpoint tensor; kGroupNone for tensors never quantized
/// (router gate, embeddings, norms). `mtpLayer` < 0 means no MTP layer.
/// `inDraft`: the use is the draft plan's; GLM-5.x's MTP layer ships no head
/// of its own and reads `lm_head`, which there counts as part of the MTP
/// layer (so `mtp` gives the draft its own quantized copy of the head and
/// leaves the model's as it is).
WeightGroup classifyWeight(llvm::StringRef name, int64_t mtpLayer,
                           bool inDraft = false);

} // namespace kiln

#endif // KILN_PASSES_WEIGHTGROUPS_H
