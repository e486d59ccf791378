//===- PlanDevice.h - Another processor that runs a model's plans -------===//
//
// A Model runs its plans on the CPU kernels unless a PlanDevice is attached
// (Model::attachDevice); then every plan call, the caches and the sequence
// lengths live on the device (runtime/hip/HipPlanDevice for AMD GPUs), and
// the Generator, speculative decoding and the tools work unchanged. A
// device runs the device-neutral ValidatedPlan, never the CPU executor. No
// LLVM, no HIP here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_PLANDEVICE_H
#define KILN_RUNTIME_ENGINE_PLANDEVICE_H

#include "runtime/engine/ValidatedPlan.h"

#include <string>

namespace kiln::engine {

class PlanDevice {
public:
  virtual ~PlanDevice() = default;
  /// For messages and stats, e.g. "hip:gfx950".
  virtual std::string name() const = 0;
  /// Runs `plan` (ValidatedPlan::create) on the device. Outputs
  /// stay valid until the same plan runs again. On error the caches are as
  /// before the call.
  virtual Result<PlanOutputs> run(const ValidatedPlan &plan,
                                  const PlanInputs &inputs) = 0;
  /// What run() checks first (Model::run checks before the data-parallel
  /// ranks meet, after which every rank must run the plan to its end).
  virtual Status checkInputs(const ValidatedPlan &plan,
                             const PlanInputs &inputs) const = 0;
  /// Data-parallel attention, an idle rank: runs `plan` with no tokens of
  /// its own (its collectives and the MoE over the other ranks' rows).
  virtual Status runIdle(const ValidatedPlan &plan) = 0;
  /// Rows sequence `seq` holds in cache `cache` (Artifact.caches index).
  virtual int64_t cacheRows(size_t cache, int32_t seq) const = 0;
  /// Rolls cache `cache` of `seq` back to `length` rows.
  virtual void truncate(size_t cache, int32_t seq, int64_t length) = 0;
  /// The serving engine's page pool (Model::usePool): rebuilds every cache
  /// as `pages` pages of `pageRows` rows, page id i at the same place in
  /// every cache. Only while no sequence holds rows.
  virtual Status usePool(int64_t pages, int64_t pageRows) = 0;
  /// Pooled mode (Model::setPageTable): sequence `seq` holds pages[0,
  /// count) in every cache, `mainRows` rows in the main caches and
  /// `draftRows` in the draft ones.
  virtual Status setPageTable(int32_t seq, const int32_t *pages, int64_t count,
                              int64_t mainRows, int64_t draftRows) = 0;
  /// Bytes of device memory free for the page pool (0: unknown).
  virtual int64_t freeMemory() const { return 0; }
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_PLANDEVICE_H
