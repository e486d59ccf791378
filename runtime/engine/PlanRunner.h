//===- PlanRunner.h - Validated execution of one plan -----------*- C++ -*-===//
//
// A PlanRunner is built once per plan at load: create() checks every
// dispatch against its kernel's declaration (support/abi/Kernels.td through
// Signature.h: argument count and kinds, dtypes, aliasing, parameter type)
// and then that the buffers' row sizes agree with the kernel and its
// weights and caches (PlanValidator.cpp) and resolves it into a Step. run()
// then copies the inputs in and calls the CPU kernels in order without further
// plan checks; it only checks the request's own data (token ids, positions,
// rows) and what the caches hold.
//
// Buffers are row-major [rows, row_shape...] with rows = T (Tokens), R
// (Selected) or 1 (One). They are allocated once for the largest T and R
// seen so far and reused. A reshape in the IR is an alias (the same buffer
// index read with another shape), so checks use element counts per row,
// and split/concat take their geometry from the pieces' shapes.
//
// Not thread-safe: one run at a time per runner (the Model serializes).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_PLANRUNNER_H
#define KILN_RUNTIME_ENGINE_PLANRUNNER_H

#include "runtime/artifact/Artifact.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Router.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/attention/Mla.h"
#include "runtime/cpu/attention/PagedKvCache.h"
#include "runtime/cpu/attention/Rope.h"
#include "runtime/cpu/attention/Workspace.h"
#include "runtime/engine/StepProfile.h"
#include "runtime/engine/Weights.h"
#include "support/Status.h"
#include "support/abi/KernelAbi.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

class HostKernels;

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

/// The model state a plan reads and writes.
struct ExecContext {
  const fb::Artifact *meta = nullptr;
  const std::vector<BoundWeight> *weights = nullptr;
  const std::vector<std::unique_ptr<cpu::PagedKvCache>> *caches = nullptr;
  cpu::ThreadPool *pool = nullptr;
  cpu::Workspace *workspace = nullptr;
  cpu::Arena *arena = nullptr;
  /// Positions must stay below this (0: no limit).
  int64_t maxPositions = 0;
  /// Compiled kernels from the artifact (HostKernels.h); null: built-ins.
  const HostKernels *host = nullptr;
  /// Time per kernel kind, when enabled; may be null.
  StepProfile *profile = nullptr;
  /// The ranks collectives run over; null: one rank.
  comm::Communicator *comm = nullptr;
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

class PlanRunner {
public:
  /// Validates plans[index] of the artifact against KernelAbi.h.
  static Result<std::unique_ptr<PlanRunner>>
  create(const fb::Artifact &meta, uint32_t index, const ExecContext &context);

  /// Runs the plan once. On error the caches of the sequences involved are
  /// rolled back to their lengths before the call.
  Result<PlanOutputs> run(const PlanInputs &inputs);

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
  /// The checks run() makes before anything runs, for a device that keeps
  /// its own caches (PlanDevice.h): counts, ids within the embedding table,
  /// positions below `maxPositions` (0: no limit; `limitReason` follows the
  /// message), logit rows, and positions that continue each sequence.
  /// Errors read "plan 'NAME'<where>: ...".
  Status checkInputs(const PlanInputs &in, int64_t maxPositions,
                     const CacheRows &rows, std::string_view where,
                     std::string_view limitReason) const;
  /// Times the buffers were (re)allocated, for tests.
  int64_t bufferAllocations() const { return allocations_; }

private:
  PlanRunner() = default;
  friend class PlanValidator;

  Status checkInputs(const PlanInputs &in) const;
  Status reserve(int64_t tokens, int64_t selected);
  int64_t rowCount(uint32_t buffer) const;
  float *f32(uint32_t buffer) const {
    return reinterpret_cast<float *>(data_[buffer]);
  }
  int32_t *i32(uint32_t buffer) const {
    return reinterpret_cast<int32_t *>(data_[buffer]);
  }
  const float *vectorOperand(const fb::Arg &arg) const;
  Status execute(const Step &step);
  Status checkCacheRows(const Step &step, uint32_t cacheArg) const;

  std::string name_;
  ExecContext ctx_;
  std::vector<BufferInfo> buffers_;
  std::vector<Step> steps_;
  uint32_t tokenIds_ = 0, seqIds_ = 0, positions_ = 0, logitRows_ = 0;
  int64_t hiddenIn_ = -1;
  uint32_t logits_ = 0;
  int64_t hiddenOut_ = -1;
  std::vector<uint32_t> appended_;
  /// Smallest embedding table that reads the token_ids input (0: none).
  int64_t tokenLimit_ = 0;

  // Execution state.
  int64_t tokens_ = 0, selected_ = 0;       // this call's T and R
  int64_t capTokens_ = 0, capSelected_ = 0; // rows allocated
  struct AlignedFree {
    void operator()(uint8_t *p) const;
  };
  std::unique_ptr<uint8_t[], AlignedFree> storage_;
  std::vector<uint8_t *> data_;
  int64_t allocations_ = 0;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_PLANRUNNER_H
