//===- Weights.h - Artifact weights as CPU kernel views ---------*- C++ -*-===//
//
// Binds each fb::Weight to what the kernels take: a 2-D WeightView (or a
// stack of them for a rank-3 expert weight), or, for rank-1 weights (norm
// weights, biases), a float array: mapped directly when stored as F32,
// otherwise decoded once into memory the binding owns. Weights the CPU
// runtime cannot use keep an error that plan validation reports when a
// dispatch references them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_WEIGHTS_H
#define KILN_RUNTIME_ENGINE_WEIGHTS_H

#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Types.h"
#include "support/Status.h"

#include <string>
#include <vector>

namespace kiln::engine {

struct BoundWeight {
  std::string name;
  std::vector<int64_t> shape;
  /// Rank 2: one matrix [N, K]; rank 3: a stack of shape[0] matrices.
  cpu::WeightView view;
  /// Rank 1: the values as F32 (length shape[0]).
  const float *values = nullptr;
  /// Why the CPU runtime cannot use this weight; empty when it can.
  std::string unsupported;
  /// Set when only a GPU can read it (WeightLayout Mxfp4Gpu, the only
  /// copy in a GPU-only artifact): what and why. The plans validate its
  /// shape; `view` has no bytes, and the CPU runs no plan that reads it.
  std::string deviceOnly;

  int64_t rank() const { return int64_t(shape.size()); }
  bool isMatrix() const { return unsupported.empty() && rank() == 2; }
  bool isStack() const { return unsupported.empty() && rank() == 3; }
  bool isVector() const { return unsupported.empty() && rank() == 1; }
  int64_t length() const { return rank() == 1 ? shape[0] : 0; }

  /// Decoded rank-1 values when not stored as F32.
  std::vector<float> owned;
};

/// Binds weights[index] of a verified artifact. Never fails: problems are
/// recorded in BoundWeight::unsupported.
void bindWeight(const artifact::Artifact &artifact, uint32_t index,
                BoundWeight &out);

/// "F32 [256]", "Mxfp4 F4E2M1 [16, 128, 256]": for error messages.
std::string describeWeight(const fb::Weight &weight);

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_WEIGHTS_H
