//===- SpecDecoder.cpp ----------------------------------------------------===//

#include "runtime/engine/SpecDecoder.h"

#include "runtime/engine/SpecSampling.h"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace kiln;
using namespace kiln::engine;

std::vector<double> SpecStats::acceptRateByPosition() const {
  std::vector<double> rates;
  for (size_t i = 0; i < reached.size(); ++i)
    rates.push_back(reached[i] ? double(accepted[i]) / double(reached[i]) : 0);
  return rates;
}

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

class SpecLoop {
public:
  SpecLoop(Model &model, int32_t seq, const SamplingParams &sampling,
           const SpecOptions &options)
      : model_(model), seq_(seq), sampler_(sampling), options_(options),
        rng_(sampling.seed ^ 0x9E3779B97F4A7C15ull),
        hidden_(size_t(model.info().hiddenSize)),
        vocab_(model.info().vocabSize) {}

  Result<SpecResult> run(const std::vector<int32_t> &prompt,
                         const std::function<void(int32_t)> &onToken);

private:
  /// Runs a plan over rows [tokens, positions] of this sequence.
  Result<PlanOutputs> runPlan(const char *plan,
                              const std::vector<int32_t> &tokens,
                              int32_t firstPosition, bool allLogits,
                              const float *hiddenIn = nullptr);
  /// Draft rows for every pair (h_i, x_{i+1}) whose hidden and next token
  /// are known; returns the last row's logits and hidden when asked.
  Status catchUp(bool wantLast);
  int32_t pick(const float *logits, std::vector<float> *probs);
  bool isStop(int32_t t) const {
    return options_.stopAtEos &&
           std::find(options_.stopIds.begin(), options_.stopIds.end(), t) !=
               options_.stopIds.end();
  }

  Model &model_;
  int32_t seq_;
  Sampler sampler_;
  SpecOptions options_;
  std::mt19937_64 rng_;
  std::vector<float> hidden_;
  int64_t vocab_;

  std::vector<int32_t> tokens_; // the whole sequence: prompt + generated
  int64_t targetLen_ = 0;       // rows in the target caches
  int64_t draftLen_ = 0;        // rows in the draft caches (real hiddens)
  // Target hiddens for positions [draftLen_, targetLen_).
  std::vector<float> pendingHidden_;
  // Last catch-up row.
  std::vector<float> lastLogits_, lastHidden_;
};

Result<PlanOutputs> SpecLoop::runPlan(const char *plan,
                                      const std::vector<int32_t> &tokens,
                                      int32_t firstPosition, bool allLogits,
                                      const float *hiddenIn) {
  int64_t t = int64_t(tokens.size());
  std::vector<int32_t> seqs(static_cast<size_t>(t), seq_),
      positions(static_cast<size_t>(t)), rows;
  for (int64_t i = 0; i < t; ++i)
    positions[size_t(i)] = firstPosition + int32_t(i);
  if (allLogits)
    for (int64_t i = 0; i < t; ++i)
      rows.push_back(int32_t(i));
  else
    rows.push_back(int32_t(t - 1));
  PlanInputs in;
  in.tokenIds = tokens.data();
  in.seqIds = seqs.data();
  in.positions = positions.data();
  in.tokens = t;
  in.logitRows = rows.data();
  in.logitCount = int64_t(rows.size());
  in.hiddenIn = hiddenIn;
  return model_.run(plan, in);
}

Status SpecLoop::catchUp(bool wantLast) {
  int64_t h = model_.info().hiddenSize;
  // Pairs i in [draftLen_, targetLen_) need x_{i+1}.
  int64_t end = std::min<int64_t>(targetLen_, int64_t(tokens_.size()) - 1);
  if (end <= draftLen_)
    return Status::ok();
  std::vector<int32_t> next(tokens_.begin() + draftLen_ + 1,
                            tokens_.begin() + end + 1);
  int64_t rows = end - draftLen_;
  KILN_ASSIGN_OR_RETURN(PlanOutputs out,
                        runPlan(kDraftPlan, next, int32_t(draftLen_), false,
                                pendingHidden_.data()));
  if (wantLast) {
    lastLogits_.assign(out.logits, out.logits + vocab_);
    lastHidden_.assign(out.hidden + (rows - 1) * h, out.hidden + rows * h);
  }
  pendingHidden_.erase(pendingHidden_.begin(),
                       pendingHidden_.begin() + rows * h);
  draftLen_ = end;
  return Status::ok();
}

int32_t SpecLoop::pick(const float *logits, std::vector<float> *probs) {
  if (sampler_.params().greedy())
    return Sampler::argmax(logits, vocab_);
  sampler_.distribution(logits, vocab_, *probs);
  return sampleIndex(probs->data(), vocab_, rng_);
}

Result<SpecResult> SpecLoop::run(const std::vector<int32_t> &prompt,
                                 const std::function<void(int32_t)> &onToken) {
  SpecResult result;
  const int k = options_.k;
  const int64_t h = model_.info().hiddenSize;
  result.stats.reached.assign(size_t(k), 0);
  result.stats.accepted.assign(size_t(k), 0);
  double start = now();

  // Prefill the target in chunks, feeding the draft as pairs complete.
  tokens_ = prompt;
  std::vector<float> lastTargetLogits;
  for (int64_t begin = 0; begin < int64_t(prompt.size());
       begin += options_.prefillChunk) {
    int64_t end = std::min<int64_t>(int64_t(prompt.size()),
                                    begin + options_.prefillChunk);
    std::vector<int32_t> chunk(prompt.begin() + begin, prompt.begin() + end);
    KILN_ASSIGN_OR_RETURN(PlanOutputs out,
                          runPlan(kPrefillPlan, chunk, int32_t(begin), false));
    pendingHidden_.insert(pendingHidden_.end(), out.hidden,
                          out.hidden + out.hiddenRows * h);
    targetLen_ = end;
    if (end == int64_t(prompt.size()))
      lastTargetLogits.assign(out.logits, out.logits + vocab_);
    KILN_RETURN_IF_ERROR(catchUp(false));
  }
  result.lastPromptLogits = lastTargetLogits;
  std::vector<float> p, q;
  int32_t first = pick(lastTargetLogits.data(), &p);
  result.prefillSeconds = now() - start;
  result.ttftSeconds = result.prefillSeconds;
  tokens_.push_back(first);
  result.ids.push_back(first);
  if (onToken)
    onToken(first);
  double decodeStart = now();
  bool done = isStop(first) || options_.maxNewTokens <= 1;

  std::vector<int32_t> drafts(static_cast<size_t>(k));
  std::vector<float> qRows, pRows;
  while (!done) {
    // Draft k tokens: the catch-up's last row gives d_1, then chain.
    KILN_RETURN_IF_ERROR(catchUp(true));
    qRows.clear();
    const float *logits = lastLogits_.data();
    std::vector<float> g = lastHidden_;
    int64_t n = targetLen_; // position of tokens_.back()
    for (int j = 0; j < k; ++j) {
      drafts[size_t(j)] = pick(logits, &q);
      if (!sampler_.params().greedy())
        qRows.insert(qRows.end(), q.begin(), q.end());
      if (j + 1 == k)
        break;
      KILN_ASSIGN_OR_RETURN(PlanOutputs out,
                            runPlan(kDraftPlan, {drafts[size_t(j)]},
                                    int32_t(n + j), false, g.data()));
      logits = out.logits;
      g.assign(out.hidden, out.hidden + h);
    }
    // Verify [x_n, d_1..d_k] at positions n..n+k.
    std::vector<int32_t> verify{tokens_.back()};
    verify.insert(verify.end(), drafts.begin(), drafts.end());
    KILN_ASSIGN_OR_RETURN(PlanOutputs out,
                          runPlan(kPrefillPlan, verify, int32_t(n), true));
    SpecRound round;
    if (sampler_.params().greedy()) {
      round = verifyGreedy(drafts.data(), k, out.logits, vocab_);
    } else {
      pRows.clear();
      for (int i = 0; i <= k; ++i) {
        sampler_.distribution(out.logits + int64_t(i) * vocab_, vocab_, p);
        pRows.insert(pRows.end(), p.begin(), p.end());
      }
      round = verifySampled(drafts.data(), k, pRows.data(), qRows.data(),
                            vocab_, rng_);
    }
    // Keep the hiddens of the accepted rows for the next catch-up.
    int a = round.accepted;
    pendingHidden_.insert(pendingHidden_.end(), out.hidden,
                          out.hidden + (a + 1) * h);
    targetLen_ = n + a + 1;
    model_.truncate(seq_, targetLen_, kMainCaches);
    model_.truncate(seq_, draftLen_, kDraftCaches);

    ++result.stats.rounds;
    result.stats.draftedTokens += k;
    result.stats.acceptedTokens += a;
    for (int i = 0; i < k; ++i) {
      if (i > a)
        break;
      ++result.stats.reached[size_t(i)];
      if (i < a)
        ++result.stats.accepted[size_t(i)];
    }
    for (int32_t t : round.tokens) {
      tokens_.push_back(t);
      result.ids.push_back(t);
      if (onToken)
        onToken(t);
      if (isStop(t) || int64_t(result.ids.size()) >= options_.maxNewTokens) {
        done = true;
        break;
      }
    }
  }
  result.decodeSeconds = now() - decodeStart;
  return result;
}

} // namespace

Result<SpecResult> kiln::engine::generateSpeculative(
    Model &model, int32_t seq, const std::vector<int32_t> &prompt,
    const SamplingParams &sampling, const SpecOptions &options,
    const std::function<void(int32_t)> &onToken) {
  if (!model.hasPlan(kDraftPlan))
    return makeError(StatusCode::FailedPrecondition,
                     "this artifact has no draft plan (no MTP layer): "
                     "speculative decoding needs one; use --spec 0");
  if (options.k < 1 || options.k > 16)
    return makeError(StatusCode::InvalidArgument,
                     "--spec must be between 1 and 16, found ", options.k);
  if (prompt.empty())
    return makeError(StatusCode::InvalidArgument, "the prompt is empty");
  KILN_RETURN_IF_ERROR(sampling.check());
  SpecLoop loop(model, seq, sampling, options);
  return loop.run(prompt, onToken);
}

Result<GenerateResult> kiln::engine::generateSpeculative(
    Model &model, const std::vector<int32_t> &prompt,
    const GenerateOptions &options, int k, SpecStats *stats) {
  SpecOptions spec;
  spec.k = k;
  spec.maxNewTokens = options.maxNewTokens;
  spec.prefillChunk = options.prefillChunk;
  spec.stopAtEos = !options.ignoreEos;
  spec.stopIds = options.stopIds;
  if (spec.stopIds.empty())
    spec.stopIds =
        model.tokenizer() ? model.tokenizer()->stopIds() : model.info().eosIds;
  KILN_ASSIGN_OR_RETURN(int32_t seq, model.openSequence());
  bool stopped = false;
  auto onToken = [&](int32_t id) {
    if (!stopped && options.onToken && !options.onToken(id))
      stopped = true;
  };
  Result<SpecResult> r =
      generateSpeculative(model, seq, prompt, options.sampling, spec, onToken);
  model.closeSequence(seq);
  if (!r.isOk())
    return r.status();
  GenerateResult out;
  out.tokens = std::move(r->ids);
  if (options.keepPromptLogits)
    out.promptLogits = std::move(r->lastPromptLogits);
  GenerateStats &st = out.stats;
  st.promptTokens = int64_t(prompt.size());
  st.generatedTokens = int64_t(out.tokens.size());
  st.ttftS = r->ttftSeconds;
  st.prefillS = r->prefillSeconds;
  st.decodeS = r->decodeSeconds;
  st.prefillTokPerS = st.prefillS > 0 ? double(prompt.size()) / st.prefillS : 0;
  st.decodeTokPerS =
      st.decodeS > 0 ? double(out.tokens.size() - 1) / st.decodeS : 0;
  if (!out.tokens.empty() && spec.stopAtEos &&
      std::find(spec.stopIds.begin(), spec.stopIds.end(), out.tokens.back()) !=
          spec.stopIds.end())
    out.stop = StopReason::StopToken;
  else if (stopped)
    out.stop = StopReason::Callback;
  if (stats)
    *stats = r->stats;
  return out;
}
