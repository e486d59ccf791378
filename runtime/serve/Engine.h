//===- Engine.h - Continuous batching over one paged KV pool ----*- C++ -*-===//
//
// The serving engine: many requests share one Model through its compiled
// plans, which take ragged batches (per-row sequence ids and positions,
// selected logit rows). Each step():
//
//   1. drops cancelled requests;
//   2. schedules under a token budget (maxBatchedTokens): every running
//      request in decode (1 row, or 1 + k under MTP speculation), then the
//      next chunk of every running prompt (chunked prefill), then admits
//      waiting requests in arrival order while pages and budget allow, each
//      starting from the longest cached prefix of its tokens;
//   3. finds pages for the step: free ones, else evicts unreferenced prefix
//      pages (LRU), else preempts the most recently admitted running request
//      (its pages freed, itself back at the head of the queue: recomputed
//      later from its tokens so far, its output unchanged);
//   4. runs the drafts (MTP), then one target plan call for all rows, then
//      samples per request (own seed), verifies drafts, applies stop rules,
//      catches the draft caches up on the new rows (MTP), and caches every
//      page that became full in every cache.
//
// A request is its tokens (prompt + generated) and how many of them the
// caches hold; prefill and decode are the same operation (run the rows not
// yet computed, sample when the last one is). Device-neutral: the pool and
// prefix cache are page ids; the Model holds the pages (Model::usePool).
// Not thread-safe: one caller drives submit/step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_ENGINE_H
#define KILN_RUNTIME_SERVE_ENGINE_H

#include "runtime/engine/Model.h"
#include "runtime/serve/EngineMetrics.h"
#include "runtime/serve/KvPool.h"
#include "runtime/serve/PrefixCache.h"
#include "runtime/serve/Request.h"
#include "support/Status.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::serve {

inline constexpr int64_t kDefaultPageRows = 64;
inline constexpr int64_t kDefaultMaxBatchedTokens = 2048;
/// Of the host's MemAvailable: the CPU shares it with everything else.
inline constexpr double kDefaultKvMemoryFraction = 0.25;
/// Of a GPU's free memory once the weights are on it (vLLM's
/// gpu_memory_utilization and sglang's mem_fraction_static are 0.9 of the
/// total): the rest holds the plans' buffers and scratch.
inline constexpr double kDefaultDeviceKvMemoryFraction = 0.9;

struct EngineOptions {
  /// Bytes for the KV pool; 0: kvMemoryFraction of the memory available.
  int64_t kvMemoryBytes = 0;
  /// 0: kDefaultKvMemoryFraction on the CPU, kDefaultDeviceKvMemoryFraction
  /// with a device attached.
  double kvMemoryFraction = 0;
  /// Tokens per page (every cache of the model pages alike).
  int64_t pageRows = kDefaultPageRows;
  /// Rows of the target plan per step.
  int64_t maxBatchedTokens = kDefaultMaxBatchedTokens;
  /// Requests running at once.
  int64_t maxRunning = 256;
  bool prefixCache = true;
  /// Drafts per round with the MTP plan (0: no speculation).
  int specK = 0;
};

/// The pool's sizing, from the artifact's cache layout.
struct KvLayout {
  struct Kind {
    std::string name; // "main latent", "draft index_keys", ...
    int64_t caches = 0;
    int64_t bytesPerToken = 0;
  };
  std::vector<Kind> kinds;
  int64_t bytesPerToken = 0; // all caches
  int64_t pageRows = 0;
  int64_t pageBytes = 0;
  int64_t pages = 0;
  int64_t maxTokens() const { return pages * pageRows; }
  /// One line per kind and the totals, for the start-up log.
  std::string describe(int64_t contextLength) const;
};

/// KV bytes for `sequences` sequences of `tokens` tokens each, in whole
/// pages of `pageRows` (every cache of the model counted): a pool size for
/// callers that know their workload.
int64_t kvBytesFor(const engine::Model &model, int64_t sequences,
                   int64_t tokens, int64_t pageRows);

/// Drafts per round for `requested` (--spec): < 0 takes the artifact's
/// default when the plans run on a device (Model::device), none on the CPU
/// (0 without a draft plan); > 0 needs a draft plan.
Result<int> specDrafts(const engine::Model &model, int64_t requested);

class Engine {
public:
  static Result<std::unique_ptr<Engine>> create(engine::Model &model,
                                                const EngineOptions &options);
  ~Engine();

  /// Queues a request; refused (and counted) when it can never run: empty
  /// or out-of-vocabulary prompt, prompt + max tokens past the model's
  /// positions, or more pages than the whole pool.
  Result<RequestId> submit(RequestParams params);
  /// What submit() would refuse `params` for (nothing is counted). Reads
  /// only what is fixed at creation: safe from any thread.
  Status validate(const RequestParams &params) const;
  /// The ids that end `params` (its own, else the tokenizer's stop set, else
  /// config.eos_token_ids); empty with ignoreEos. Safe from any thread.
  std::vector<int32_t> stopIdsFor(const RequestParams &params) const;
  /// Ends a request at the next step (finish reason "cancelled").
  void cancel(RequestId id);
  /// One scheduling step. An error of a plan call ends the requests of that
  /// step (finish reason "error"); the engine keeps serving the others.
  void step();
  bool hasWork() const { return !waiting_.empty() || !running_.empty(); }
  void runToCompletion() {
    while (hasWork())
      step();
  }

  /// Outputs of requests finished so far, in finishing order.
  std::vector<RequestOutput> takeFinished();
  /// Called with each emitted token (request, token, and its log-probability
  /// when the request asked for them, else null).
  using TokenFn = std::function<void(RequestId, int32_t, const TokenLogprob *)>;
  void setOnToken(TokenFn fn) { onToken_ = std::move(fn); }
  /// Data-parallel attention: joins the other ranks' plan calls with no
  /// tokens until every rank has ended its turn (Model::idle); a no-op
  /// otherwise.
  Status endTurn() { return model_.idle(); }
  const engine::Model &model() const { return model_; }

  const EngineMetrics &metrics() const { return metrics_; }
  const KvLayout &layout() const { return layout_; }
  const EngineOptions &options() const { return options_; }
  /// Drops every cached prefix page not held by a running request.
  void flushPrefixCache();
  /// "" when pool, prefix tree and page tables agree, else what is wrong.
  std::string checkInvariants() const;

private:
  struct Req;
  struct Batch;
  Engine(engine::Model &model, const EngineOptions &options,
         const KvLayout &layout);

  bool isStop(const Req &r, int32_t token) const;
  bool ensurePages(Req &r, int64_t rows, Batch &batch);
  void preempt(Req &r);
  void release(Req &r);
  void finish(Req &r, FinishReason reason, std::string error = "");
  bool admit(Req &r, int64_t budget);
  void schedule(Batch &batch);
  Status draft(Batch &batch);
  Status catchUpDrafts();
  Status runTarget(Batch &batch);
  /// Appends `tokens` to r's output; `logits` holds their rows (row i gave
  /// token i).
  void emit(Req &r, const std::vector<int32_t> &tokens, const float *logits,
            double now);
  void cachePages(Req &r);
  void updateGauges();

  engine::Model &model_;
  EngineOptions options_;
  KvLayout layout_;
  KvPool pool_;
  PrefixCache prefix_;
  EngineMetrics metrics_;
  RequestId nextId_ = 0;
  std::map<RequestId, std::unique_ptr<Req>> requests_;
  std::deque<Req *> waiting_;
  std::vector<Req *> running_; // admission order
  std::vector<RequestOutput> finished_;
  TokenFn onToken_;
  std::vector<int32_t> defaultStops_;
  int64_t vocab_ = 0, hidden_ = 0;
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_ENGINE_H
