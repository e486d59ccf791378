//===- PlanRunner.h - A validated plan on the CPU kernels -------*- C++ -*-===//
//
// A PlanRunner runs one ValidatedPlan (ValidatedPlan.h) on the CPU: run()
// copies the inputs in and calls the CPU kernels in order without further
// plan checks; it only checks the request's own data (token ids, positions,
// rows) and what the caches hold. Buffers are allocated once for the
// largest T and R seen so far and reused.
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
#include "runtime/engine/ExpertExchange.h"
#include "runtime/engine/StepProfile.h"
#include "runtime/engine/ValidatedPlan.h"
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
  /// Data-parallel attention: every rank's T in the call being run, in
  /// rank order (Model::run fills it before each call); null or empty:
  /// the Gathered rows are this rank's own.
  const std::vector<int64_t> *rankTokens = nullptr;
  /// Ranks per data-parallel group (ModelConfig.tensor_parallel): the
  /// ranks of a group run the same tokens, which count once among the
  /// Gathered rows.
  int64_t rowGroup = 1;
};

/// Runs a ValidatedPlan on the CPU kernels.
class PlanRunner {
public:
  /// Validates plans[index] of the artifact (ValidatedPlan::create) and
  /// binds it to the CPU state in `context`.
  static Result<std::unique_ptr<PlanRunner>>
  create(const fb::Artifact &meta, uint32_t index, const ExecContext &context);

  /// The plan as validated, device-neutral.
  const ValidatedPlan &plan() const { return *plan_; }
  const std::string &name() const { return plan_->name(); }

  /// Runs the plan once. On error the caches of the sequences involved are
  /// rolled back to their lengths before the call.
  Result<PlanOutputs> run(const PlanInputs &inputs);
  /// Runs the plan with no tokens of this rank's own (data-parallel
  /// attention, an idle rank): its collectives, and the MoE over the rows
  /// the other ranks gathered, are all that do work.
  Status runIdle();

  /// Times the buffers were (re)allocated, for tests.
  int64_t bufferAllocations() const { return allocations_; }

  /// What run() checks first: token ids, sequences, positions (within the
  /// model's and each sequence's length) and logit rows.
  Status checkInputs(const PlanInputs &in) const;
  /// run() of inputs checkInputs() accepted, with no rows appended to the
  /// caches since (Model::run checks before the data-parallel meeting).
  Result<PlanOutputs> runChecked(const PlanInputs &inputs);

private:
  PlanRunner() = default;

  Status reserve(int64_t tokens, int64_t selected, int64_t gathered);
  /// The rows of every data-parallel rank in this call (this rank's T when
  /// there is one rank).
  int64_t gatheredTokens(int64_t tokens) const;
  Status runSteps(const PlanInputs *in);
  /// all_reduce, all_gather_rows and reduce_scatter_rows: on one rank a
  /// copy; under data-parallel attention over the groups of
  /// ExecContext::rankTokens, whose row counts differ between groups.
  Status collective(const Step &step);
  /// dispatch_rows and combine_rows (ExpertExchange.h).
  Status exchangeRows(const Step &step);
  /// Counts `bytes` sent to other ranks by `step` when profiling.
  void recordSent(const Step &step, int64_t bytes) const {
    if (ctx_.profile && ctx_.profile->enabled)
      ctx_.profile->sent(step.kernel, bytes);
  }
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

  std::unique_ptr<ValidatedPlan> plan_;
  ExecContext ctx_;

  // Execution state.
  int64_t tokens_ = 0, selected_ = 0, gathered_ = 0; // this call's rows
  int64_t routed_ = 0; // rows the last dispatch_rows brought (Rows::Routed)
  ExpertExchange exchange_;
  int64_t capTokens_ = 0, capSelected_ = 0, capGathered_ = 0; // allocated
  struct AlignedFree {
    void operator()(uint8_t *p) const;
  };
  std::unique_ptr<uint8_t[], AlignedFree> storage_;
  std::vector<uint8_t *> data_;
  int64_t allocations_ = 0;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_PLANRUNNER_H
