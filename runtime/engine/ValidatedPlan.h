//===- ValidatedPlan.h - One plan, checked against the contract -*- C++ -*-===//
//
// A ValidatedPlan is built once per plan at load: create() checks every
// dispatch against its kernel's declaration (support/abi/Kernels.td through
// Signature.h: argument count and kinds, dtypes, aliasing, parameter type,
// row rules) and then that the buffers' row sizes agree with the kernel's
// weights and caches (PlanValidator.cpp), and resolves each dispatch into a
// Step. It holds no memory and runs nothing: the CPU executor (PlanRunner)
// and the GPU plan devices (PlanDevice.h) each run it their own way.
//
// Buffers are row-major [rows, row_shape...] with rows = T (Tokens), R
// (Selected) or 1 (One). A reshape in the IR is an alias (the same buffer
// index read with another shape), so checks use element counts per row,
// and split/concat take their geometry from the dispatch's parameters.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_VALIDATEDPLAN_H
#define KILN_RUNTIME_ENGINE_VALIDATEDPLAN_H

#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Router.h"
#include "runtime/cpu/attention/Mla.h"
#include "runtime/cpu/attention/Rope.h"
#include "runtime/engine/Weights.h"
#include "support/Status.h"
#include "support/abi/KernelAbi.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

/// One call's inputs (KernelAbi.h PlanInput). Pointers are read during
/// run() only.
struct PlanInputs {
  const int32_t *tokenIds = nullptr;  // [T]
  const int32_t *seqIds = nullptr;    // [T], each < kMaxSequences
  const int32_t *positions = nullptr; // [T], each >= 0
  int64_t tokens = 0;                 // T >= 1
  const int32_t *logitRows = nullptr; // [R], each < T
  int64_t logitCount = 0;             // R >= 0
  const float *hiddenIn = nullptr;    // [T, H]: plans with a hidden input
};

/// Pointers into the runner's buffers, valid until its next run().
struct PlanOutputs {
  const float *logits = nullptr; // [logitRows, vocab]
  int64_t logitRows = 0;
  int64_t vocab = 0;
  const float *hidden = nullptr; // [hiddenRows, hiddenSize]; null if the
  int64_t hiddenRows = 0;        // plan has no hidden output
  int64_t hiddenSize = 0;
};

/// Limits on one call.
inline constexpr int64_t kMaxPlanTokens = int64_t(1) << 20;

/// A buffer of the plan, as validated.
struct BufferInfo {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  fb::Rows rows = fb::Rows::Tokens;
  std::vector<int64_t> rowShape;
  int64_t rowElems = 1;
  int64_t lastDim() const { return rowShape.empty() ? 1 : rowShape.back(); }
};

/// A dispatch resolved against its kernel's contract. Which fields are
/// meaningful depends on the kernel (see PlanValidator.cpp).
struct Step {
  abi::Kernel kernel = abi::Kernel::Count;
  uint32_t dispatch = 0;
  std::vector<fb::Arg> args;
  abi::Params params; // the kernel's own struct (support/abi/Kernels.td)
  template <typename P> const P &get() const { return std::get<P>(params); }
  /// Row kernels: the length of the innermost dim they work on (norm width,
  /// softmax/top-k/argmax columns, broadcast length).
  int64_t cols = 0;
  /// top_k / gather: entries kept per row; split/concat: the number of
  /// outer blocks per buffer row.
  int64_t k = 0;
  /// split/concat: elements of each piece per outer block.
  std::vector<int64_t> chunks;
  /// add/mul: operands swapped (the full operand is args[1]); the other
  /// operand is broadcast when `broadcast`.
  bool swap = false;
  bool broadcast = false;
  /// rope
  cpu::RopeStyle ropeStyle = cpu::RopeStyle::Interleaved;
  /// attention
  cpu::MlaDims mla;
  int64_t heads = 0, headDim = 0, kvHeads = 0, valueDim = 0;
  /// moe
  cpu::MoeParams moe;
};

class ValidatedPlan {
public:
  /// Validates plans[index] of the artifact; `weights` are the artifact's
  /// weights as bound at load (their shapes and layouts).
  static Result<std::unique_ptr<ValidatedPlan>>
  create(const fb::Artifact &meta, uint32_t index,
         const std::vector<BoundWeight> &weights);

  const std::string &name() const { return name_; }
  bool hasHiddenInput() const { return hiddenIn_ >= 0; }
  bool hasHiddenOutput() const { return hiddenOut_ >= 0; }
  int64_t vocab() const { return buffers_[logits_].rowElems; }
  /// Width of the hidden output (or input), 0 if none.
  int64_t hiddenSize() const;
  /// Caches this plan appends to.
  const std::vector<uint32_t> &appendedCaches() const { return appended_; }
  const std::vector<Step> &steps() const { return steps_; }
  /// Buffer indices of the plan's inputs and outputs (KernelAbi.h order);
  /// -1 for an absent hidden input or output.
  uint32_t tokenIdsBuffer() const { return tokenIds_; }
  uint32_t seqIdsBuffer() const { return seqIds_; }
  uint32_t positionsBuffer() const { return positions_; }
  uint32_t logitRowsBuffer() const { return logitRows_; }
  uint32_t logitsBuffer() const { return logits_; }
  int64_t hiddenInBuffer() const { return hiddenIn_; }
  int64_t hiddenOutBuffer() const { return hiddenOut_; }
  /// Smallest embedding table that reads token_ids (0: none).
  int64_t tokenLimit() const { return tokenLimit_; }
  const std::vector<BufferInfo> &buffers() const { return buffers_; }
  /// Rows sequence `seq` holds in cache `cache` (Artifact.caches index).
  using CacheRows = std::function<int64_t(uint32_t cache, int32_t seq)>;
  /// The checks a run makes before anything runs: counts, ids within the
  /// embedding table, positions below `maxPositions` (0: no limit;
  /// `limitReason` follows the message), logit rows, and positions that
  /// continue each sequence. Errors read "plan 'NAME'<where>: ...".
  Status checkInputs(const PlanInputs &in, int64_t maxPositions,
                     const CacheRows &rows, std::string_view where,
                     std::string_view limitReason) const;

private:
  ValidatedPlan() = default;
  friend class PlanValidator;

  std::string name_;
  std::vector<BufferInfo> buffers_;
  std::vector<Step> steps_;
  uint32_t tokenIds_ = 0, seqIds_ = 0, positions_ = 0, logitRows_ = 0;
  int64_t hiddenIn_ = -1;
  uint32_t logits_ = 0;
  int64_t hiddenOut_ = -1;
  std::vector<uint32_t> appended_;
  int64_t tokenLimit_ = 0;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_VALIDATEDPLAN_H
