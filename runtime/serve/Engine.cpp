//===- Engine.cpp ---------------------------------------------------------===//

#include "runtime/serve/Engine.h"
#include "runtime/comm/Communicator.h"
#include "runtime/engine/SpecSampling.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

using namespace kiln;
using namespace kiln::serve;
using engine::kDecodePlan;
using engine::kDraftPlan;
using engine::kPrefillPlan;
using engine::Model;
using engine::PlanInputs;
using engine::PlanOutputs;

namespace {

TokenLogprob tokenLogprob(const float *logits, int64_t vocab, int32_t token,
                          int32_t top) {
  float max = logits[0];
  for (int64_t i = 1; i < vocab; ++i)
    max = std::max(max, logits[i]);
  double sum = 0; // in index order: the same on every thread and batch
  for (int64_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - max);
  const double logZ = double(max) + std::log(sum);
  TokenLogprob lp;
  lp.logprob = float(double(logits[token]) - logZ);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    ids[size_t(i)] = int32_t(i);
  const size_t n = std::min<size_t>(size_t(top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[a] != logits[b] ? logits[a] > logits[b]
                                                    : a < b;
                    });
  for (size_t i = 0; i < n; ++i)
    lp.top.push_back({ids[i], float(double(logits[ids[i]]) - logZ)});
  return lp;
}

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// MemAvailable of /proc/meminfo in bytes (0 if unknown).
int64_t hostMemoryAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:")
      return kb * 1024;
  return 0;
}

/// The rows of one plan call, as the step builds them.
struct PlanRows {
  std::vector<int32_t> ids, seqs, pos, logitRows;
  std::vector<float> hidden; // [rows, H] for plans with a hidden input
  void add(int32_t id, int32_t seq, int64_t position) {
    ids.push_back(id);
    seqs.push_back(seq);
    pos.push_back(int32_t(position));
  }
  PlanInputs inputs() const {
    PlanInputs in;
    in.tokenIds = ids.data();
    in.seqIds = seqs.data();
    in.positions = pos.data();
    in.tokens = int64_t(ids.size());
    in.logitRows = logitRows.data();
    in.logitCount = int64_t(logitRows.size());
    in.hiddenIn = hidden.empty() ? nullptr : hidden.data();
    return in;
  }
  void clear() {
    ids.clear(), seqs.clear(), pos.clear(), logitRows.clear(), hidden.clear();
  }
};

/// One call of the draft plan, its time counted in `m`.
Result<PlanOutputs> runDraft(Model &model, EngineMetrics &m,
                             const PlanRows &rows) {
  const double t0 = now();
  Result<PlanOutputs> out = model.run(kDraftPlan, rows.inputs());
  m.specDraftS += now() - t0;
  ++m.specDraftCalls;
  return out;
}

} // namespace

struct Engine::Req {
  RequestId id = -1;
  RequestParams params;
  engine::Sampler sampler;
  std::mt19937_64 specRng;
  std::vector<int32_t> tokens;      // prompt + generated
  int64_t computed = 0;             // rows in the main caches
  int64_t draftLen = 0;             // rows in the draft caches
  std::vector<float> pendingHidden; // target hiddens of [draftLen, computed)
  std::vector<int32_t> pages;       // page table
  int64_t cachedPages = 0;          // leading pages given to the prefix cache
  int32_t seq = -1;                 // the Model's sequence id while admitted
  bool admitted = false;            // ever
  bool cancelled = false;
  double submitT = 0, lastTokenT = 0;
  RequestOutput out;
  // This step.
  int64_t rows = 0; // target rows scheduled
  int k = 0;        // drafts
  std::vector<int32_t> drafts;
  std::vector<float> q; // [k, vocab] draft distributions (sampling)
  std::vector<float> g; // draft hidden to chain from

  explicit Req(const engine::SamplingParams &s)
      : sampler(s), specRng(s.seed ^ 0x9E3779B97F4A7C15ull) {}
  int64_t promptLen() const { return int64_t(out.prompt.size()); }
  int64_t pending() const { return int64_t(tokens.size()) - computed; }
};

struct Engine::Batch {
  std::vector<Req *> reqs;
  int64_t budget = 0;
};

Result<int> kiln::serve::specDrafts(const Model &model, int64_t requested) {
  // The artifact's default where drafts pay: on a GPU. On the CPU a verify
  // of k + 1 rows costs 1.2-2.6 decode steps (the steps are bound by the
  // arithmetic per row), so every k measured is slower than none
  // (docs/cpu.md, "Speculation").
  int64_t k = requested >= 0   ? requested
              : model.device() ? model.info().defaultSpecK
                               : 0;
  if (k > 0 && !model.hasPlan(kDraftPlan)) {
    if (requested > 0)
      return makeError(StatusCode::FailedPrecondition, "--spec ", k,
                       ": the artifact has no draft plan (no MTP layer)");
    k = 0;
  }
  if (k > 16)
    return makeError(StatusCode::InvalidArgument, "--spec ", k,
                     ": expected 0 to 16");
  return int(k);
}

std::string KvLayout::describe(int64_t contextLength) const {
  std::ostringstream os;
  for (const Kind &k : kinds)
    os << "kv cache " << k.name << ": " << k.caches << " cache(s), "
       << k.bytesPerToken << " bytes/token\n";
  os << "kv pool: " << bytesPerToken << " bytes/token, " << pages
     << " pages of " << pageRows << " tokens (" << pageBytes << " bytes), "
     << maxTokens() << " tokens";
  if (contextLength > 0)
    os << ", " << maxTokens() / contextLength << " sequence(s) at the full "
       << contextLength << "-token context";
  os << ", " << double(pages * pageBytes) / double(1 << 30) << " GiB";
  return os.str();
}

Engine::Engine(Model &model, const EngineOptions &options,
               const KvLayout &layout)
    : model_(model), options_(options), layout_(layout),
      pool_(layout.pages, layout.pageRows), prefix_(pool_) {}

int64_t kiln::serve::kvBytesFor(const Model &model, int64_t sequences,
                                int64_t tokens, int64_t pageRows) {
  int64_t perToken = 0;
  for (size_t i = 0; i < model.cacheCount(); ++i)
    perToken += model.cache(i).rowBytes();
  int64_t pages = (tokens + pageRows - 1) / pageRows;
  return sequences * pages * pageRows * perToken;
}

std::vector<int32_t> Engine::stopIdsFor(const RequestParams &params) const {
  if (params.ignoreEos)
    return {};
  return params.stopIds.empty() ? defaultStops_ : params.stopIds;
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(Model &model,
                                               const EngineOptions &options) {
  if (options.pageRows < 1 || options.pageRows > 65536)
    return makeError(StatusCode::InvalidArgument, "page size ",
                     options.pageRows, " tokens, expected 1 to 65536");
  if (options.maxBatchedTokens < 1)
    return makeError(StatusCode::InvalidArgument, "max batched tokens ",
                     options.maxBatchedTokens, ", expected >= 1");
  if (options.maxRunning < 1)
    return makeError(StatusCode::InvalidArgument, "max running requests ",
                     options.maxRunning, ", expected >= 1");
  if (options.specK < 0 || options.specK > 16)
    return makeError(StatusCode::InvalidArgument,
                     "--spec must be 0 to 16, "
                     "found ",
                     options.specK);
  if (options.specK > 0 && !model.hasPlan(kDraftPlan))
    return makeError(StatusCode::FailedPrecondition,
                     "this artifact has no draft plan (no MTP layer): "
                     "speculative decoding needs one; use --spec 0");
  if (options.specK > 0 && options.maxBatchedTokens < options.specK + 1)
    return makeError(StatusCode::InvalidArgument, "max batched tokens ",
                     options.maxBatchedTokens,
                     " cannot hold one verify round "
                     "of ",
                     options.specK + 1, " rows");
  if (!model.hasPlan(kPrefillPlan))
    return makeError(StatusCode::NotFound, "the engine needs a '", kPrefillPlan,
                     "' plan");

  KvLayout layout;
  layout.pageRows = options.pageRows;
  const fb::Artifact &meta = *model.artifact().meta();
  for (size_t i = 0; i < model.cacheCount(); ++i) {
    std::string name = meta.caches()->Get(uint32_t(i))->name()->str();
    std::string kind =
        model.cacheOwner(i) + " " + name.substr(name.find_last_of('.') + 1);
    auto it =
        std::find_if(layout.kinds.begin(), layout.kinds.end(),
                     [&](const KvLayout::Kind &k) { return k.name == kind; });
    if (it == layout.kinds.end())
      it = layout.kinds.insert(layout.kinds.end(), {kind, 0, 0});
    ++it->caches;
    it->bytesPerToken += model.cache(i).rowBytes();
    layout.bytesPerToken += model.cache(i).rowBytes();
  }
  if (layout.bytesPerToken <= 0)
    return makeError(StatusCode::FailedPrecondition,
                     "the artifact declares no KV cache");
  layout.pageBytes = layout.bytesPerToken * options.pageRows;
  int64_t budget = options.kvMemoryBytes;
  if (budget <= 0) {
    // The caches live where the plans run.
    const engine::PlanDevice *device = model.device();
    int64_t avail = device ? device->freeMemory() : hostMemoryAvailable();
    if (avail <= 0)
      return makeError(StatusCode::FailedPrecondition,
                       device
                           ? "cannot read the free memory of " + device->name()
                           : std::string("cannot read the available "
                                         "memory (/proc/meminfo)"),
                       ": give the KV memory in bytes");
    double fraction = options.kvMemoryFraction > 0 ? options.kvMemoryFraction
                      : device ? kDefaultDeviceKvMemoryFraction
                               : kDefaultKvMemoryFraction;
    budget = int64_t(double(avail) * fraction);
  }
  layout.pages = budget / layout.pageBytes;
  if (comm::Communicator *comm = model.comm();
      comm && comm->size() > 1 &&
      (!model.info().attentionDataParallel || options.kvMemoryBytes <= 0)) {
    // Every rank's engine schedules alike (RankSync.h), so their pools are
    // the same size: the smallest of the ranks' (available memory differs).
    // Under data-parallel attention the ranks of one group must schedule
    // alike; a budget in bytes gives every rank the same pool already (and
    // kiln-run's single prompt creates engines on the first group only).
    std::vector<int64_t> all(size_t(comm->size()));
    std::array<int64_t, 1> mine = {layout.pages};
    KILN_RETURN_IF_ERROR(comm->allGather(mine, all));
    layout.pages = *std::min_element(all.begin(), all.end());
  }
  if (layout.pages < 1)
    return makeError(StatusCode::InvalidArgument, "KV memory of ", budget,
                     " bytes holds no page of ", layout.pageBytes, " bytes (",
                     options.pageRows, " tokens x ", layout.bytesPerToken,
                     " bytes/token)");
  if (layout.pages > (int64_t(1) << 30))
    layout.pages = int64_t(1) << 30;
  KILN_RETURN_IF_ERROR(model.usePool(layout.pages, options.pageRows));

  std::unique_ptr<Engine> e(new Engine(model, options, layout));
  e->vocab_ = model.plan(kPrefillPlan)->vocab();
  e->hidden_ = model.info().hiddenSize;
  e->defaultStops_ =
      model.tokenizer() ? model.tokenizer()->stopIds() : model.info().eosIds;
  e->metrics_.specReachedAt.assign(size_t(options.specK), 0);
  e->metrics_.specAcceptedAt.assign(size_t(options.specK), 0);
  e->updateGauges();
  return e;
}

Status Engine::validate(const RequestParams &params) const {
  const int64_t n = int64_t(params.prompt.size());
  if (n == 0)
    return makeError(StatusCode::InvalidArgument, "the prompt is empty");
  for (int64_t i = 0; i < n; ++i)
    if (params.prompt[i] < 0 || params.prompt[i] >= vocab_)
      return makeError(StatusCode::InvalidArgument, "prompt token ", i, " is ",
                       params.prompt[i], ", expected 0 to ", vocab_ - 1);
  if (params.maxTokens < 1)
    return makeError(StatusCode::InvalidArgument, "max tokens ",
                     params.maxTokens, ", expected >= 1");
  if (params.logprobs > vocab_)
    return makeError(StatusCode::InvalidArgument, "top logprobs ",
                     params.logprobs, " exceed the vocabulary of ", vocab_);
  KILN_RETURN_IF_ERROR(params.sampling.check());
  const int64_t maxPos = model_.info().maxPositions;
  if (maxPos > 0 && n + params.maxTokens > maxPos)
    return makeError(StatusCode::OutOfRange, "prompt of ", n, " tokens + ",
                     params.maxTokens, " max tokens = ", n + params.maxTokens,
                     " exceeds the model's context of ", maxPos, " positions");
  const int64_t need = pool_.pagesFor(n + params.maxTokens + options_.specK);
  if (need > pool_.pages())
    return makeError(StatusCode::ResourceExhausted, "prompt of ", n,
                     " tokens + ", params.maxTokens, " max tokens needs ", need,
                     " KV pages of ", pool_.pageRows(),
                     " tokens, but the whole pool has ", pool_.pages(),
                     " pages (", pool_.pages() * pool_.pageRows(), " tokens)");
  return Status::ok();
}

Result<RequestId> Engine::submit(RequestParams params) {
  if (Status s = validate(params); !s.isOk()) {
    ++metrics_.requestsRefused;
    return s;
  }
  const int64_t n = int64_t(params.prompt.size());
  auto r = std::make_unique<Req>(params.sampling);
  r->id = nextId_++;
  r->tokens = params.prompt;
  r->out.request = r->id;
  r->out.id = params.id;
  r->out.prompt = params.prompt;
  r->out.specReached.assign(size_t(options_.specK), 0);
  r->out.specAccepted.assign(size_t(options_.specK), 0);
  if (params.stopIds.empty())
    params.stopIds = defaultStops_;
  r->params = std::move(params);
  r->submitT = now();
  ++metrics_.requestsSubmitted;
  metrics_.promptTokens += n;
  waiting_.push_back(r.get());
  RequestId id = r->id;
  requests_.emplace(id, std::move(r));
  updateGauges();
  return id;
}

void Engine::cancel(RequestId id) {
  auto it = requests_.find(id);
  if (it != requests_.end())
    it->second->cancelled = true;
}

std::vector<RequestOutput> Engine::takeFinished() {
  std::vector<RequestOutput> out;
  out.swap(finished_);
  return out;
}

bool Engine::isStop(const Req &r, int32_t token) const {
  if (r.params.ignoreEos)
    return false;
  const auto &s = r.params.stopIds;
  return std::find(s.begin(), s.end(), token) != s.end();
}

void Engine::release(Req &r) {
  for (int32_t p : r.pages)
    pool_.release(p);
  r.pages.clear();
  r.cachedPages = 0;
  r.computed = r.draftLen = 0;
  r.pendingHidden.clear();
  if (r.seq >= 0)
    model_.closeSequence(r.seq);
  r.seq = -1;
}

void Engine::preempt(Req &r) {
  release(r);
  r.rows = 0;
  running_.erase(std::find(running_.begin(), running_.end(), &r));
  waiting_.push_front(&r);
  ++r.out.preemptions;
  ++metrics_.preemptions;
}

void Engine::finish(Req &r, FinishReason reason, std::string error) {
  if (reason != FinishReason::Error && reason != FinishReason::Cancelled)
    cachePages(r);
  release(r);
  auto it = std::find(running_.begin(), running_.end(), &r);
  if (it != running_.end())
    running_.erase(it);
  auto wt = std::find(waiting_.begin(), waiting_.end(), &r);
  if (wt != waiting_.end())
    waiting_.erase(wt);
  RequestOutput out = std::move(r.out);
  out.finish = reason;
  out.error = std::move(error);
  out.e2eS = now() - r.submitT;
  if (const Tokenizer *tok = model_.tokenizer()) {
    // Without a final stop id: it ends the text, it is not part of it.
    size_t shown = out.ids.size();
    if (reason == FinishReason::Stop && shown > 0 && isStop(r, out.ids.back()))
      --shown;
    Result<std::string> text = tok->decode(out.ids.data(), shown);
    if (text.isOk()) {
      out.text = std::move(text).value();
      for (const std::string &s : r.params.stopStrings) {
        size_t at = s.empty() ? std::string::npos : out.text.find(s);
        if (at != std::string::npos)
          out.text.resize(at);
      }
    }
  }
  ++metrics_.requestsFinished;
  finished_.push_back(std::move(out));
  requests_.erase(r.id); // destroys r
}

bool Engine::ensurePages(Req &r, int64_t rows, Batch &batch) {
  while (true) {
    int64_t need = pool_.pagesFor(rows) - int64_t(r.pages.size());
    if (need <= 0 || pool_.take(need, r.pages))
      return true;
    metrics_.evictedPages += prefix_.evict(need);
    if (pool_.freePages() >= need)
      continue;
    Req *victim = running_.back();
    if (victim->rows > 0) {
      batch.budget += victim->rows;
      batch.reqs.erase(std::find(batch.reqs.begin(), batch.reqs.end(), victim));
    }
    preempt(*victim);
    if (victim == &r)
      return false;
  }
}

bool Engine::admit(Req &r, int64_t budget) {
  const int64_t P = pool_.pageRows();
  if (r.pages.empty() && options_.prefixCache) {
    // Never the last token: its row gives the logits.
    std::vector<int32_t> hit =
        prefix_.match(r.tokens.data(), int64_t(r.tokens.size()) - 1);
    for (int32_t p : hit)
      pool_.retain(p);
    r.pages = hit;
    r.cachedPages = int64_t(hit.size());
    r.computed = r.draftLen = int64_t(hit.size()) * P;
  }
  const int64_t n = std::min(r.pending(), budget);
  const int64_t need = pool_.pagesFor(r.computed + n) - int64_t(r.pages.size());
  if (pool_.freePages() < need)
    metrics_.evictedPages += prefix_.evict(need);
  if (pool_.freePages() < need) {
    release(r);
    return false;
  }
  pool_.take(need, r.pages);
  Result<int32_t> seq = model_.openSequence();
  if (!seq.isOk()) {
    release(r);
    return false;
  }
  r.seq = *seq;
  metrics_.prefixQueriedTokens += int64_t(r.tokens.size());
  metrics_.prefixHitTokens += r.computed;
  if (!r.admitted) {
    r.admitted = true;
    r.out.cachedTokens = r.computed;
    r.out.queueS = now() - r.submitT;
  }
  r.rows = n;
  return true;
}

void Engine::schedule(Batch &batch) {
  batch.budget = options_.maxBatchedTokens;
  const int64_t maxPos = model_.info().maxPositions;
  for (Req *r : running_)
    r->rows = 0, r->k = 0;
  // Decodes first, then the next chunk of each prompt, in admission order.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size(); ++i) {
      Req *r = running_[i];
      bool decoding = r->pending() == 1 && r->computed >= r->promptLen();
      if (r->rows > 0 || decoding != (pass == 0) || batch.budget == 0)
        continue;
      int64_t rows = std::min(r->pending(), batch.budget);
      int k = 0;
      if (decoding && options_.specK > 0) {
        k = int(std::min<int64_t>(options_.specK, batch.budget - 1));
        if (maxPos > 0)
          k = int(std::min<int64_t>(k, maxPos - 1 - r->computed));
        k = std::max(k, 0);
        rows = 1 + k;
      }
      if (!ensurePages(*r, r->computed + rows, batch)) {
        --i; // r left running_
        continue;
      }
      // r may have preempted requests after it, never before it.
      r->rows = rows;
      r->k = k;
      batch.budget -= rows;
      batch.reqs.push_back(r);
    }
  }
  while (!waiting_.empty() && int64_t(running_.size()) < options_.maxRunning &&
         batch.budget > 0) {
    Req *r = waiting_.front();
    if (!admit(*r, batch.budget))
      break;
    waiting_.pop_front();
    running_.push_back(r);
    batch.budget -= r->rows;
    batch.reqs.push_back(r);
  }
}

void Engine::cachePages(Req &r) {
  if (!options_.prefixCache)
    return;
  // Only rows no later step rewrites: computed (and, with drafts, in the
  // draft caches too, so a hit brings every cache back).
  int64_t done =
      options_.specK > 0 ? std::min(r.computed, r.draftLen) : r.computed;
  int64_t full =
      std::min<int64_t>(done / pool_.pageRows(), int64_t(r.pages.size()));
  if (full <= r.cachedPages)
    return;
  prefix_.insert(r.tokens.data(),
                 std::vector<int32_t>(r.pages.begin(), r.pages.begin() + full));
  r.cachedPages = full;
}

void Engine::emit(Req &r, const std::vector<int32_t> &tokens,
                  const float *logits, double t) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t token = tokens[i];
    r.tokens.push_back(token);
    r.out.ids.push_back(token);
    const TokenLogprob *logprob = nullptr;
    if (r.params.logprobs >= 0) {
      r.out.logprobs.push_back(tokenLogprob(logits + int64_t(i) * vocab_,
                                            vocab_, token, r.params.logprobs));
      logprob = &r.out.logprobs.back();
    }
    ++metrics_.generatedTokens;
    if (r.out.ids.size() == 1)
      r.out.ttftS = t - r.submitT;
    else
      r.out.interTokenS.push_back(i == 0 ? t - r.lastTokenT : 0.0);
    r.lastTokenT = t;
    if (onToken_)
      onToken_(r.id, token, logprob);
    bool stop = isStop(r, token);
    if (!stop && !r.params.stopStrings.empty() && model_.tokenizer()) {
      // Stop strings may span tokens: look in the decoded tail.
      size_t longest = 0;
      for (const std::string &s : r.params.stopStrings)
        longest = std::max(longest, s.size());
      size_t from =
          r.out.ids.size() > longest + 1 ? r.out.ids.size() - longest - 1 : 0;
      Result<std::string> tail = model_.tokenizer()->decode(
          r.out.ids.data() + from, r.out.ids.size() - from);
      if (tail.isOk())
        for (const std::string &s : r.params.stopStrings)
          stop = stop || (!s.empty() && tail->find(s) != std::string::npos);
    }
    if (stop) {
      // The unused tail of the round was never committed.
      r.computed = std::min<int64_t>(r.computed, int64_t(r.tokens.size()) - 1);
      finish(r, FinishReason::Stop);
      return;
    }
    if (int64_t(r.out.ids.size()) >= r.params.maxTokens) {
      r.computed = std::min<int64_t>(r.computed, int64_t(r.tokens.size()) - 1);
      finish(r, FinishReason::Length);
      return;
    }
  }
}

Status Engine::draft(Batch &batch) {
  // Catch-up: draft rows for every pair (target hidden h_i, token x_{i+1})
  // with i in [draftLen, computed); decoding requests take the logits of
  // their last row to draft d_1.
  PlanRows rows;
  std::vector<Req *> drafting;
  for (Req *r : batch.reqs) {
    int64_t n = r->computed - r->draftLen;
    if (n <= 0) {
      if (r->k > 0)
        r->rows = 1, r->k = 0; // nothing to draft from: a plain decode
      continue;
    }
    for (int64_t i = r->draftLen; i < r->computed; ++i) {
      rows.add(r->tokens[size_t(i + 1)], r->seq, i);
    }
    rows.hidden.insert(rows.hidden.end(), r->pendingHidden.begin(),
                       r->pendingHidden.end());
    if (r->k > 0) {
      rows.logitRows.push_back(int32_t(rows.ids.size() - 1));
      drafting.push_back(r);
    }
  }
  auto run = [&]() { return runDraft(model_, metrics_, rows); };
  auto pick = [&](Req &r, const float *logits) {
    if (r.sampler.params().greedy())
      return engine::Sampler::argmax(logits, vocab_);
    std::vector<float> probs;
    r.sampler.distribution(logits, vocab_, probs);
    r.q.insert(r.q.end(), probs.begin(), probs.end());
    return engine::sampleIndex(probs.data(), vocab_, r.specRng);
  };
  if (rows.ids.empty())
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(PlanOutputs out, run());
  for (Req *r : batch.reqs) {
    r->draftLen = r->computed;
    r->pendingHidden.clear();
  }
  for (size_t j = 0; j < drafting.size(); ++j) {
    Req &r = *drafting[j];
    r.drafts.clear();
    r.q.clear();
    r.drafts.push_back(pick(r, out.logits + int64_t(j) * vocab_));
    const float *g = out.hidden + int64_t(rows.logitRows[j]) * hidden_;
    r.g.assign(g, g + hidden_);
  }
  // Chain: d_{j+2} from d_{j+1} at position computed + j, one call per j.
  for (int j = 0;; ++j) {
    rows.clear();
    std::vector<Req *> next;
    for (Req *r : drafting)
      if (r->k > j + 1) {
        rows.logitRows.push_back(int32_t(rows.ids.size()));
        rows.add(r->drafts.back(), r->seq, r->computed + j);
        rows.hidden.insert(rows.hidden.end(), r->g.begin(), r->g.end());
        next.push_back(r);
      }
    if (next.empty())
      break;
    KILN_ASSIGN_OR_RETURN(PlanOutputs o, run());
    for (size_t i = 0; i < next.size(); ++i) {
      Req &r = *next[i];
      r.drafts.push_back(pick(r, o.logits + int64_t(i) * vocab_));
      r.g.assign(o.hidden + int64_t(i) * hidden_,
                 o.hidden + int64_t(i + 1) * hidden_);
    }
  }
  return Status::ok();
}

Status Engine::catchUpDrafts() {
  // After the target call: draft rows for the pairs whose next token is now
  // known, all but the last (its logits draft the next round), for the
  // requests where that completes a page: full pages are then final in
  // every cache by the end of the step, and the prefix cache can share them
  // with the next admission. Other requests wait for their next draft(),
  // which takes these rows in the same call as the last one (one draft call
  // a round instead of two).
  if (!options_.prefixCache)
    return Status::ok();
  const int64_t P = pool_.pageRows();
  PlanRows rows;
  std::vector<std::pair<Req *, int64_t>> moved;
  for (Req *r : running_) {
    int64_t end = r->computed - 1;
    if (r->rows == 0 || end / P <= r->draftLen / P)
      continue;
    for (int64_t i = r->draftLen; i < end; ++i)
      rows.add(r->tokens[size_t(i + 1)], r->seq, i);
    rows.hidden.insert(rows.hidden.end(), r->pendingHidden.begin(),
                       r->pendingHidden.begin() +
                           (end - r->draftLen) * hidden_);
    moved.emplace_back(r, end);
  }
  if (moved.empty())
    return Status::ok();
  KILN_RETURN_IF_ERROR(runDraft(model_, metrics_, rows).status());
  for (auto &[r, end] : moved) {
    r->pendingHidden.erase(r->pendingHidden.begin(),
                           r->pendingHidden.begin() +
                               (end - r->draftLen) * hidden_);
    r->draftLen = end;
  }
  return Status::ok();
}

Status Engine::runTarget(Batch &batch) {
  PlanRows rows;
  bool allSingle = true;
  for (Req *r : batch.reqs) {
    for (int64_t i = 0; i < r->rows; ++i) {
      int64_t p = r->computed + i;
      // Verify rows: [x_n, d_1..d_k].
      rows.add(i == 0 || r->k == 0 ? r->tokens[size_t(p)]
                                   : r->drafts[size_t(i - 1)],
               r->seq, p);
    }
    int64_t first = int64_t(rows.ids.size()) - r->rows;
    if (r->k > 0)
      for (int64_t i = 0; i < r->rows; ++i)
        rows.logitRows.push_back(int32_t(first + i));
    else if (r->computed + r->rows == int64_t(r->tokens.size()))
      rows.logitRows.push_back(int32_t(rows.ids.size() - 1));
    allSingle = allSingle && r->rows == 1;
  }
  const char *plan =
      allSingle && options_.specK == 0 && model_.hasPlan(kDecodePlan)
          ? kDecodePlan
          : kPrefillPlan;
  const double t0 = now();
  KILN_ASSIGN_OR_RETURN(PlanOutputs out, model_.run(plan, rows.inputs()));
  metrics_.computedTokens += int64_t(rows.ids.size());

  const double t = now();
  if (std::any_of(batch.reqs.begin(), batch.reqs.end(),
                  [](const Req *r) { return r->k > 0; }))
    metrics_.specVerifyS += t - t0;
  int64_t row = 0, logit = 0;
  std::vector<Req *> reqs = batch.reqs; // emit() may finish (destroy) some
  for (Req *rp : reqs) {
    Req &r = *rp;
    const int64_t first = row;
    row += r.rows;
    const bool wantHidden = options_.specK > 0;
    if (r.k == 0) {
      if (wantHidden)
        r.pendingHidden.insert(r.pendingHidden.end(),
                               out.hidden + first * hidden_,
                               out.hidden + row * hidden_);
      r.computed += r.rows;
      if (r.computed < int64_t(r.tokens.size()))
        continue; // more prompt to go
      const float *logits = out.logits + (logit++) * vocab_;
      if (r.params.returnPromptLogits && r.out.ids.empty())
        r.out.promptLogits.assign(logits, logits + vocab_);
      emit(r, {r.sampler.sample(logits, vocab_)}, logits, t);
      continue;
    }
    // Verify the drafts.
    const float *logits = out.logits + logit * vocab_;
    logit += r.rows;
    engine::SpecRound round;
    if (r.sampler.params().greedy()) {
      round = engine::verifyGreedy(r.drafts.data(), r.k, logits, vocab_);
    } else {
      std::vector<float> p, rowP;
      for (int i = 0; i <= r.k; ++i) {
        r.sampler.distribution(logits + int64_t(i) * vocab_, vocab_, rowP);
        p.insert(p.end(), rowP.begin(), rowP.end());
      }
      round = engine::verifySampled(r.drafts.data(), r.k, p.data(), r.q.data(),
                                    vocab_, r.specRng);
    }
    const int a = round.accepted;
    r.pendingHidden.insert(r.pendingHidden.end(), out.hidden + first * hidden_,
                           out.hidden + (first + a + 1) * hidden_);
    r.computed += a + 1;
    ++metrics_.specRounds;
    metrics_.specDrafted += r.k;
    metrics_.specAccepted += a;
    for (int i = 0; i < r.k && i <= a; ++i) {
      ++metrics_.specReachedAt[size_t(i)];
      ++r.out.specReached[size_t(i)];
      if (i < a) {
        ++metrics_.specAcceptedAt[size_t(i)];
        ++r.out.specAccepted[size_t(i)];
      }
    }
    emit(r, round.tokens, logits, t);
  }
  return Status::ok();
}

void Engine::step() {
  // Cancelled requests leave first.
  std::vector<Req *> cancelled;
  for (auto &[id, r] : requests_)
    if (r->cancelled)
      cancelled.push_back(r.get());
  for (Req *r : cancelled)
    finish(*r, FinishReason::Cancelled);

  Batch batch;
  schedule(batch);
  ++metrics_.steps;
  Status s = Status::ok();
  for (Req *r : batch.reqs)
    if (s.isOk())
      s = model_.setPageTable(r->seq, r->pages.data(), int64_t(r->pages.size()),
                              r->computed, r->draftLen);
  if (s.isOk() && options_.specK > 0 && !batch.reqs.empty())
    s = draft(batch);
  if (s.isOk() && !batch.reqs.empty())
    s = runTarget(batch);
  if (!s.isOk()) {
    // The plan call failed: its requests end with the error, the rest go on.
    std::vector<Req *> reqs = batch.reqs;
    for (Req *r : reqs)
      if (requests_.count(r->id))
        finish(*r, FinishReason::Error, s.toString());
  } else if (options_.specK > 0) {
    if (Status c = catchUpDrafts(); !c.isOk()) {
      std::vector<Req *> reqs; // this step's, still running
      for (Req *r : running_)
        if (r->rows > 0)
          reqs.push_back(r);
      for (Req *r : reqs)
        finish(*r, FinishReason::Error, c.toString());
    }
  }
  for (Req *r : running_)
    cachePages(*r);
  updateGauges();
}

void Engine::updateGauges() {
  metrics_.running = int64_t(running_.size());
  metrics_.waiting = int64_t(waiting_.size());
  metrics_.pagesTotal = pool_.pages();
  metrics_.pagesUsed = pool_.usedPages();
  metrics_.pagesEvictable = pool_.evictablePages();
  metrics_.pagesFree = pool_.freePages();
}

void Engine::flushPrefixCache() {
  prefix_.flush();
  for (Req *r : running_)
    r->cachedPages = 0;
  updateGauges();
}

std::string Engine::checkInvariants() const {
  if (std::string e = pool_.checkInvariants(); !e.empty())
    return "pool: " + e;
  if (std::string e = prefix_.checkInvariants(); !e.empty())
    return "prefix cache: " + e;
  std::vector<int32_t> refs(size_t(pool_.pages()), 0);
  for (const auto &[id, r] : requests_) {
    bool running =
        std::find(running_.begin(), running_.end(), r.get()) != running_.end();
    if (!running && !r->pages.empty())
      return "request " + std::to_string(id) + " waits holding pages";
    if (r->computed > int64_t(r->pages.size()) * pool_.pageRows())
      return "request " + std::to_string(id) + " computed " +
             std::to_string(r->computed) + " rows in " +
             std::to_string(r->pages.size()) + " pages";
    for (int32_t p : r->pages)
      ++refs[size_t(p)];
  }
  for (int64_t p = 0; p < pool_.pages(); ++p)
    if (refs[size_t(p)] != pool_.refs(int32_t(p)))
      return "page " + std::to_string(p) + " has " +
             std::to_string(pool_.refs(int32_t(p))) + " references but is in " +
             std::to_string(refs[size_t(p)]) + " page tables";
  if (int64_t(running_.size() + waiting_.size()) != int64_t(requests_.size()))
    return "running + waiting != live requests";
  return "";
}
