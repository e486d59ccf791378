//===- HipPlanDevice.h - A model's plans on one AMD GPU ------------------===//
//
// Runs every dispatch of the artifact's plans as the GPU launches the
// compiler recorded (KernelSymbol.launches, passes/emit/GpuLaunch.h):
//
//   create   opens the GPU (HipDevice), loads the first code object the GPU
//            accepts, resolves every launch's kernel (an artifact with a
//            dispatch the GPU cannot run is refused, naming it), uploads the
//            weights the launches read.
//            A model split over ranks (kiln-compile --tp/--ep, run under
//            mpirun) gets an RCCL communicator (runtime/comm/Rccl.h,
//            bootstrapped over MPI): its all_reduce dispatches are an
//            RCCL all-gather and the rank-order sum kernel, so every rank
//            gets the CPU ranks' fixed-order sum. Under data-parallel
//            attention (--dp-attention) the row exchanges around each MoE
//            are RCCL's all-gather-v and all-to-all-v, the second followed
//            by the same sum (engine/RowExchange.h, HipCollectives.cpp).
//   usePool  (the serving engine's page pool) allocates the caches as its
//            pages; any sequence holds any page, through the page table
//            the kernels read, uploaded when it changed. Without it the
//            first run allocates each slot its own capacity / page_rows
//            pages.
//   run      maps sequence ids to cache slots, checks the inputs, copies
//            them in, launches every dispatch's kernels in order on one
//            stream, copies the logits (and hidden rows) back. runIdle is
//            a run with no tokens (an idle data-parallel rank).
//
// HipPlanDevice.cpp loads and runs the plans; HipCollectives.cpp runs the
// collectives; HipPlanCaches.cpp keeps the caches, slots and page pool.
// Sequence lengths are kept on the host, as the CPU caches keep theirs, so
// rollback after speculative decoding is a length change.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HIP_HIPPLANDEVICE_H
#define KILN_RUNTIME_HIP_HIPPLANDEVICE_H

#include "runtime/comm/Rccl.h"
#include "runtime/engine/Model.h"
#include "runtime/engine/PlanDevice.h"
#include "runtime/hip/HipDevice.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::hip {

struct HipPlanOptions {
  HipDeviceOptions device;
  /// Sequences the caches hold at once.
  int64_t slots = 4;
  /// Positions per sequence (0: the model's max positions, capped at 8192),
  /// rounded up to whole pages.
  int64_t capacity = 0;
  /// Rows per cache page until usePool() sets the pool's (at most the
  /// capacity).
  int64_t pageRows = 64;
  /// Code object target to use ("gfx950"); empty: the first the GPU loads.
  std::string target;
  /// A multi-rank model's GPU collectives: the RCCL libraries to try (empty:
  /// comm::defaultRcclLibraries()).
  std::vector<std::string> rcclLibraries;
  /// Replay a plan call's launches as one HIP graph once the same shape
  /// comes again (one rank, a runtime with stream capture);
  /// KILN_HIP_GRAPHS=0 turns it off.
  bool graphs = true;
};

class HipPlanDevice final : public engine::PlanDevice {
public:
  static Result<std::unique_ptr<HipPlanDevice>>
  create(engine::Model &model, const HipPlanOptions &options = {});
  ~HipPlanDevice() override;

  std::string name() const override { return "hip:" + target_; }
  Result<engine::PlanOutputs> run(const engine::ValidatedPlan &plan,
                                  const engine::PlanInputs &inputs) override;
  Status checkInputs(const engine::ValidatedPlan &plan,
                     const engine::PlanInputs &inputs) const override;
  Status runIdle(const engine::ValidatedPlan &plan) override;
  int64_t cacheRows(size_t cache, int32_t seq) const override;
  void truncate(size_t cache, int32_t seq, int64_t length) override;
  Status usePool(int64_t pages, int64_t pageRows) override;
  Status setPageTable(int32_t seq, const int32_t *pages, int64_t count,
                      int64_t mainRows, int64_t draftRows) override;
  int64_t freeMemory() const override;

  const std::string &target() const { return target_; }
  int64_t capacity() const { return capacity_; }
  int64_t pageRows() const { return pageRows_; }
  /// Device bytes allocated for weights, caches and buffers.
  uint64_t deviceBytes() const { return deviceBytes_; }
  /// Plan calls captured into HIP graphs, and calls run as one graph launch
  /// (the capturing call included).
  int64_t graphsCaptured() const { return graphsCaptured_; }
  int64_t graphLaunches() const { return graphLaunches_; }

private:
  struct Launch {
    hipFunction_t function = nullptr;
    std::string symbol;
    uint32_t workgroupSize = 0;
    int64_t mul[3] = {}, add[3] = {}, div[3] = {};
    int32_t rowsOf[3] = {-1, -1, -1};
    std::vector<fb::GpuArg> args;
  };
  struct Scratch {
    int64_t perRow = 0, fixed = 0, perPosition = 0;
  };
  struct Dispatch {
    std::vector<Launch> launches;
    std::vector<Scratch> scratch;
    /// all_reduce, all_gather_rows or reduce_scatter_rows: the
    /// communicator runs it (the one launch of the first and the last is
    /// the rank-order sum after the exchange; the gather has none).
    bool collective = false;
  };
  struct PlanState {
    std::vector<Dispatch> dispatches; // per ValidatedPlan step
    std::vector<void *> buffers;      // device, per plan buffer
    int64_t capTokens = 0, capSelected = 0, capGathered = 0;
    std::vector<float> logits, hidden; // host copies of the outputs
    bool hasCollective = false;        // some dispatch is a collective
    /// HIP graphs by (tokens, logit rows, gathered rows), the calls seen of
    /// each shape, and the allocation generation they were captured in.
    std::map<std::array<int64_t, 3>, std::unique_ptr<HipGraph>> graphs;
    std::map<std::array<int64_t, 3>, int> seen;
    uint64_t graphGeneration = 0;
  };
  static constexpr size_t kMaxGraphsPerPlan = 64, kMaxShapesSeen = 4096;

  HipPlanDevice(engine::Model &model, std::unique_ptr<HipDevice> device)
      : model_(model), device_(std::move(device)) {}
  Status prepare(const HipPlanOptions &options);
  Status loadPlan(uint32_t planIndex, PlanState &state);
  Result<void *> weightPointer(uint32_t weight, fb::GpuArgPart part);
  Result<void *> allocate(size_t bytes);
  Status release(void *p);
  /// (Re)allocates every cache as `pages` pages of pageRows_ rows and the
  /// page table as slots_ x capacity_ / pageRows_ entries.
  Status allocateCaches(int64_t pages);
  Status reserve(const engine::ValidatedPlan &plan, PlanState &state,
                 int64_t tokens, int64_t selected, int64_t gathered);
  /// The collective `step` (Dispatch::collective), whose input has `rows`
  /// rows (HipCollectives.cpp).
  Status collective(const engine::ValidatedPlan &plan, const engine::Step &step,
                    const Dispatch &dispatch, PlanState &state, int64_t rows);
  /// Rows of a plan buffer, of a step's argument, and of a step (its first
  /// buffer argument's) in the call `in`.
  int64_t bufferRows(const engine::ValidatedPlan &plan, uint32_t buffer,
                     const engine::PlanInputs &in) const;
  int64_t argRows(const engine::ValidatedPlan &plan, const engine::Step &step,
                  size_t arg, const engine::PlanInputs &in) const;
  int64_t stepRows(const engine::ValidatedPlan &plan, const engine::Step &step,
                   const engine::PlanInputs &in) const;
  /// Grows the scratch buffers to what every dispatch of the call needs
  /// (before any launch: a capture must not allocate).
  Status reserveScratch(const engine::ValidatedPlan &plan,
                        const PlanState &state, const engine::PlanInputs &in);
  /// Every dispatch's launches (and collectives), in order.
  Status launchSteps(const engine::ValidatedPlan &plan, PlanState &state,
                     const engine::PlanInputs &in);
  /// launchSteps, or the graph of this call's shape (captured the second
  /// time the shape comes).
  Status launchPlan(const engine::ValidatedPlan &plan, PlanState &state,
                    const engine::PlanInputs &in);
  /// Enqueues the rank-order sum `l`: out[i] = parts[0][i] + ... +
  /// parts[ranks-1][i], parts[r] = parts + r * count floats.
  Status rankSum(const Launch &l, const void *parts, void *out, size_t count,
                 int ranks);
  /// The device buffer the exchanges gather into, at least `bytes`.
  Result<void *> exchangeBuffer(size_t bytes);
  /// Data-parallel attention over more than one rank: the ranks met
  /// (Model::rankTokens) before this call.
  bool dataParallel() const { return rccl_ && !model_.rankTokens().empty(); }
  Status checkInputs(const engine::ValidatedPlan &plan,
                     const engine::PlanInputs &in,
                     std::vector<int32_t> &slots) const;
  Result<int32_t> slotOf(int32_t seq, bool create) const;
  /// `slots`: the cache slot of each token (checkInputs).
  Status execute(const engine::ValidatedPlan &plan, PlanState &state,
                 const engine::PlanInputs &in,
                 const std::vector<int32_t> &slots);

  engine::Model &model_;
  std::unique_ptr<HipDevice> device_;
  std::string target_;
  uint32_t codeObject_ = 0;
  hipModule_t module_ = nullptr;
  int64_t slots_ = 0, capacity_ = 0;
  int64_t pageRows_ = 0, pages_ = 0;
  bool pooled_ = false;                // usePool() was called
  std::map<uint64_t, void *> weights_; // (weight << 3 | part) -> device
  std::vector<void *> caches_;
  std::vector<int32_t> table_;      // [slot][capacity_ / pageRows_] page ids
  std::vector<int64_t> tablePages_; // [slot] pages setPageTable gave it
  void *deviceTable_ = nullptr;
  bool tableChanged_ = true;
  std::vector<std::vector<int64_t>> lengths_; // [cache][slot]
  mutable std::vector<int32_t> slotSeq_;      // slot -> seq, -1 free
  std::map<std::string, PlanState> plans_;
  std::vector<void *> scratch_;
  std::vector<size_t> scratchBytes_;
  std::vector<void *> allocations_;
  uint64_t deviceBytes_ = 0;
  /// Bumped by every allocation and release: graphs hold addresses.
  uint64_t generation_ = 0;
  bool graphs_ = false;
  int64_t graphsCaptured_ = 0, graphLaunches_ = 0;
  /// The ranks' collectives when the model has more than one rank.
  std::unique_ptr<comm::RcclCommunicator> rccl_;
  void *gathered_ = nullptr; // its all-gather buffer (exchangeBuffer)
  size_t gatheredBytes_ = 0;
  /// This call's own rows and Gathered rows.
  int64_t callTokens_ = 0, callGathered_ = 0;
  /// How long a plan call waits for the GPU when ranks share its work.
  double waitSeconds_ = 0;
};

} // namespace kiln::hip

#endif // KILN_RUNTIME_HIP_HIPPLANDEVICE_H
