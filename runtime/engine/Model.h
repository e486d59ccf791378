//===- Model.h - A loaded artifact bound to the CPU kernels -----*- C++ -*-===//
//
// Model::load opens and verifies an artifact, binds its weights to kernel
// views, rebuilds its tokenizer, creates one paged cache per fb::Cache and
// validates every plan against the kernel contract (Kernels.td) once. run()
// then executes a plan by name. Sequences are small integer ids shared by all
// caches; a Session holds one for its lifetime.
//
//   KILN_ASSIGN_OR_RETURN(auto model, Model::load("m.kiln", /*threads=*/8));
//   KILN_ASSIGN_OR_RETURN(Session s, Session::open(*model)); // a sequence
//   PlanInputs in{ids, seqs, positions, T, rows, R};
//   KILN_ASSIGN_OR_RETURN(PlanOutputs out, model->run("prefill", in));
//
// Not thread-safe: one run() at a time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_MODEL_H
#define KILN_RUNTIME_ENGINE_MODEL_H

#include "runtime/artifact/Artifact.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/attention/PagedKvCache.h"
#include "runtime/cpu/attention/Workspace.h"
#include "runtime/engine/HostKernels.h"
#include "runtime/engine/PlanDevice.h"
#include "runtime/engine/PlanRunner.h"
#include "runtime/engine/Weights.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "support/Status.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {

struct LoadOptions {
  /// Kernel threads; 0 = the CPUs this process may run on.
  int threads = 0;
  /// Pin each kernel thread to one CPU (`--cpu-affinity`).
  bool pinThreads = false;
  /// Check every segment's CRC32C at load (reads the whole model once).
  bool verifyChecksums = true;
  /// Rows per KV-cache page.
  int64_t pageRows = 256;
  /// Pages each cache may hold at once (0: unlimited).
  int64_t maxCachePages = 0;
  /// Run the artifact's compiled x86-64 kernels where it has them
  /// (HostKernels.h); KILN_HOST_KERNELS=0 in the environment, or the scalar
  /// CPU path (CpuFeatures.h), also disables.
  bool hostKernels = true;
  /// The ranks the plans' collectives (all_reduce, ...) run over; null: this
  /// process is the only rank. Not owned; must outlive the model.
  comm::Communicator *comm = nullptr;
  /// The plans will run on a device attached after loading
  /// (attachDevice): weights only a GPU reads (a GPU-only artifact) are
  /// allowed. Without it, such an artifact is refused at load.
  bool forDevice = false;
  /// The MXFP4 weights only the draft (MTP) plan reads take int8
  /// activations on CPUs with AVX-512 VNNI (cpu::WeightView::
  /// int8Activations): the draft's precision changes how many drafts are
  /// accepted, never the output; false: cpu::mxfp4Activations() as for
  /// every other weight.
  bool draftInt8Activations = true;
};

/// The model facts from the artifact's ModelConfig.
struct ModelInfo {
  std::string family;
  int64_t hiddenSize = 0;
  int64_t vocabSize = 0;
  int64_t numLayers = 0;
  int64_t maxPositions = 0; // 0: unknown
  std::vector<int32_t> eosIds;
  int32_t padId = -1;
  int32_t mtpLayers = 0;
  int32_t defaultSpecK = 0;
  /// kiln-compile --dp-attention: each data-parallel group (the
  /// `tensorParallel` consecutive ranks of one expert share) runs its own
  /// requests.
  bool attentionDataParallel = false;
  int tensorParallel = 1;
};

/// Plan names the compiler emits.
inline constexpr const char *kPrefillPlan = "prefill";
inline constexpr const char *kDecodePlan = "decode";
inline constexpr const char *kDraftPlan = "draft";
/// fb::Cache.plan values.
inline constexpr const char *kMainCaches = "main";
inline constexpr const char *kDraftCaches = "draft";

class Model {
public:
  static Result<std::unique_ptr<Model>> load(const std::string &path,
                                             const LoadOptions &options = {});
  static Result<std::unique_ptr<Model>> load(const std::string &path,
                                             int threads) {
    LoadOptions options;
    options.threads = threads;
    return load(path, options);
  }

  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;
  ~Model();

  const artifact::Artifact &artifact() const { return *artifact_; }
  const ModelInfo &info() const { return info_; }
  /// The artifact's tokenizer; null when it carries none.
  const Tokenizer *tokenizer() const {
    return tokenizer_ ? &*tokenizer_ : nullptr;
  }
  int threads() const { return pool_->size(); }
  /// The ranks this model's plans run over (LoadOptions::comm), or null.
  comm::Communicator *comm() const { return comm_; }
  cpu::ThreadPool &pool() { return *pool_; }
  /// Time per kernel kind of the CPU plans (off until enabled).
  StepProfile &profile() { return profile_; }

  bool hasPlan(std::string_view name) const { return findPlan(name); }
  /// The validated plan, or null.
  const ValidatedPlan *plan(std::string_view name) const {
    const PlanRunner *p = findPlan(name);
    return p ? &p->plan() : nullptr;
  }
  /// Its CPU executor, or null (for tests and profiles).
  const PlanRunner *cpuRunner(std::string_view name) const {
    return findPlan(name);
  }
  /// Runs plan `name`; outputs stay valid until that plan runs again.
  ///
  /// Data-parallel attention (ModelInfo::attentionDataParallel, several
  /// ranks): each rank calls run() for its own requests, and the ranks
  /// meet before every plan call (one small all-gather of each rank's plan
  /// and token count): the plan with the lowest index any rank asks for
  /// runs on every rank, the ranks that asked for another one joining it
  /// with no tokens, and they meet again until this rank's own plan has
  /// run. So every rank runs the same plans in the same order, and their
  /// collectives match. Inputs are checked before the meeting: a rank with
  /// bad inputs gets its error without meeting, and the others' call goes
  /// on once it meets them again (run() or idle()) with no tokens.
  Result<PlanOutputs> run(std::string_view name, const PlanInputs &inputs);
  /// Data-parallel attention: joins the other ranks' plan calls with no
  /// tokens until every rank has called idle() (the end of this rank's
  /// work). Returns at once on other artifacts.
  Status idle();
  /// Data-parallel attention: plan calls this rank joined with no tokens.
  int64_t idlePlanCalls() const { return idlePlanCalls_; }
  /// Data-parallel attention: every rank's tokens in the plan call being
  /// run, in rank order (empty: one rank, or no data-parallel attention),
  /// and the ranks per data-parallel group, which run the same tokens.
  const std::vector<int64_t> &rankTokens() const { return rankTokens_; }
  int64_t rowGroup() const { return rowGroup_; }

  /// From now on plans, caches and sequence lengths live on `device`
  /// (PlanDevice.h). Only before any sequence holds rows.
  Status attachDevice(std::unique_ptr<PlanDevice> device);
  /// The attached device, or null (the CPU runs the plans).
  PlanDevice *device() const { return device_.get(); }
  /// Weight `i` as bound for the CPU (1-D weights have f32 `values`).
  const BoundWeight &weight(size_t i) const { return weights_[i]; }

  // --- Sequences --------------------------------------------------------

  /// The lowest free sequence id.
  Result<int32_t> openSequence();
  /// Drops every cached row of `seq` and makes the id free again.
  void closeSequence(int32_t seq);
  /// Rolls every cache (main and draft) of `seq` back to `length` rows.
  void truncate(int32_t seq, int64_t length);
  /// Rolls back only the caches whose fb::Cache.plan is `owner`.
  void truncate(int32_t seq, int64_t length, std::string_view owner);
  /// Rows `seq` holds in the caches of `owner` (the smallest over them; 0
  /// if the owner has no caches).
  int64_t sequenceLength(int32_t seq,
                         std::string_view owner = kMainCaches) const;

  // --- The serving engine's page pool (runtime/serve/) ----------------

  /// Rebuilds every cache in pooled mode: `pages` pages of `pageRows` rows
  /// each, page id i at the same place in every cache (on the attached
  /// device, if any), only while no sequence holds rows.
  Status usePool(int64_t pages, int64_t pageRows);
  /// Pooled mode: sequence `seq` gets pages[0, count) in every cache, with
  /// `mainRows` rows in the main caches and `draftRows` in the draft ones.
  Status setPageTable(int32_t seq, const int32_t *pages, int64_t count,
                      int64_t mainRows, int64_t draftRows);

  size_t cacheCount() const { return caches_.size(); }
  const cpu::PagedKvCache &cache(size_t i) const { return *caches_[i]; }
  const std::string &cacheOwner(size_t i) const { return cacheOwners_[i]; }

private:
  Model() = default;
  PlanRunner *findPlan(std::string_view name) const;
  bool meets() const;
  /// One meeting of the data-parallel ranks: every rank's wish (a plan
  /// index, -1: idle) and token count; fills rankTokens_ and returns the
  /// plan every rank runs now (-1: every rank is idle).
  Result<int> meet(int plan, int64_t tokens);
  /// Runs plans_[plan] with no tokens (on the device, if any).
  Status runIdle(size_t plan);

  std::unique_ptr<artifact::Artifact> artifact_;
  ModelInfo info_;
  std::optional<Tokenizer> tokenizer_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::vector<BoundWeight> weights_;
  std::vector<std::unique_ptr<cpu::PagedKvCache>> caches_;
  std::vector<std::string> cacheOwners_;
  cpu::Workspace workspace_;
  cpu::Arena arena_;
  StepProfile profile_;
  std::unique_ptr<HostKernels> hostKernels_;
  std::vector<std::unique_ptr<PlanRunner>> plans_;
  std::vector<bool> sequenceUsed_;
  std::unique_ptr<PlanDevice> device_;
  comm::Communicator *comm_ = nullptr;
  /// Each rank's tokens in the plan call being run (ExecContext::rankTokens).
  std::vector<int64_t> rankTokens_;
  int64_t rowGroup_ = 1;
  int64_t idlePlanCalls_ = 0;
  /// Why the CPU cannot run the plans (BoundWeight::deviceOnly of the
  /// first such weight); empty when it can.
  std::string deviceOnly_;
};

/// One sequence of a Model for the Session's lifetime (closed, with its
/// cache rows, on destruction).
class Session {
public:
  static Result<Session> open(Model &model);
  Session(Session &&other) noexcept;
  Session &operator=(Session &&other) noexcept;
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session();

  int32_t id() const { return seq_; }
  Model &model() const { return *model_; }
  /// Rows in the main caches.
  int64_t length() const { return model_->sequenceLength(seq_); }
  void truncate(int64_t length) { model_->truncate(seq_, length); }

private:
  Session(Model &model, int32_t seq) : model_(&model), seq_(seq) {}
  Model *model_ = nullptr;
  int32_t seq_ = -1;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_MODEL_H
