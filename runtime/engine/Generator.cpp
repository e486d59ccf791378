//===- Generator.cpp - Prefill, decode loop and perplexity ----------------===//

#include "runtime/engine/Generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

} // namespace

Status prefill(Model &model, int32_t seq, const int32_t *tokens, int64_t n,
               int64_t start, int64_t chunk, PrefillLogits which,
               const LogitsRowFn &onRow) {
  if (chunk < 1)
    return makeError(StatusCode::InvalidArgument, "prefill chunk ", chunk,
                     ", expected >= 1");
  if (n < 1)
    return makeError(StatusCode::InvalidArgument, "nothing to prefill");
  std::vector<int32_t> seqs, positions, rows;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    int64_t len = std::min(chunk, n - begin);
    bool last = begin + len == n;
    seqs.assign(size_t(len), seq);
    positions.resize(size_t(len));
    std::iota(positions.begin(), positions.end(), int32_t(start + begin));
    rows.clear();
    if (which == PrefillLogits::All) {
      rows.resize(size_t(len));
      std::iota(rows.begin(), rows.end(), 0);
    } else if (which == PrefillLogits::Last && last) {
      rows.push_back(int32_t(len - 1));
    }
    PlanInputs in;
    in.tokenIds = tokens + begin;
    in.seqIds = seqs.data();
    in.positions = positions.data();
    in.tokens = len;
    in.logitRows = rows.data();
    in.logitCount = int64_t(rows.size());
    KILN_ASSIGN_OR_RETURN(PlanOutputs out, model.run(kPrefillPlan, in));
    for (size_t r = 0; r < rows.size(); ++r)
      onRow(begin + rows[r], out.logits + int64_t(r) * out.vocab);
  }
  return Status::ok();
}

Result<const float *> decodeStep(Model &model, int32_t seq, int32_t token,
                                 int64_t position) {
  const char *plan = model.hasPlan(kDecodePlan) ? kDecodePlan : kPrefillPlan;
  int32_t pos = int32_t(position), row = 0;
  PlanInputs in;
  in.tokenIds = &token;
  in.seqIds = &seq;
  in.positions = &pos;
  in.tokens = 1;
  in.logitRows = &row;
  in.logitCount = 1;
  KILN_ASSIGN_OR_RETURN(PlanOutputs out, model.run(plan, in));
  return out.logits;
}

Result<GenerateResult> generate(Model &model,
                                const std::vector<int32_t> &prompt,
                                const GenerateOptions &options) {
  KILN_RETURN_IF_ERROR(options.sampling.check());
  if (prompt.empty())
    return makeError(StatusCode::InvalidArgument, "the prompt is empty");
  if (options.maxNewTokens < 0)
    return makeError(StatusCode::InvalidArgument, "max new tokens ",
                     options.maxNewTokens, ", expected >= 0");
  const int64_t maxPos = model.info().maxPositions;
  if (maxPos > 0 && int64_t(prompt.size()) + options.maxNewTokens > maxPos)
    return makeError(StatusCode::OutOfRange, "prompt of ", prompt.size(),
                     " tokens + ", options.maxNewTokens,
                     " new tokens exceeds the model's ", maxPos,
                     " positions (max_position_embeddings)");
  std::vector<int32_t> stops = options.stopIds;
  if (stops.empty())
    stops =
        model.tokenizer() ? model.tokenizer()->stopIds() : model.info().eosIds;
  auto isStop = [&](int32_t id) {
    return std::find(stops.begin(), stops.end(), id) != stops.end();
  };

  KILN_ASSIGN_OR_RETURN(Session session, Session::open(model));
  Sampler sampler(options.sampling);
  GenerateResult result;
  GenerateStats &st = result.stats;
  st.promptTokens = int64_t(prompt.size());

  const Clock::time_point t0 = Clock::now();
  int32_t next = -1;
  KILN_RETURN_IF_ERROR(
      prefill(model, session.id(), prompt.data(), int64_t(prompt.size()), 0,
              options.prefillChunk, PrefillLogits::Last,
              [&](int64_t, const float *logits) {
                int64_t vocab = model.plan(kPrefillPlan)->vocab();
                if (options.keepPromptLogits)
                  result.promptLogits.assign(logits, logits + vocab);
                if (options.maxNewTokens > 0)
                  next = sampler.sample(logits, vocab);
              }));
  const Clock::time_point t1 = Clock::now();
  st.prefillS = seconds(t0, t1);
  st.ttftS = st.prefillS;
  st.prefillTokPerS = st.prefillS > 0 ? double(prompt.size()) / st.prefillS : 0;
  if (options.maxNewTokens == 0)
    return result;

  int64_t position = int64_t(prompt.size());
  int64_t steps = 0;
  const int64_t vocab = model.plan(kPrefillPlan)->vocab();
  while (true) {
    result.tokens.push_back(next);
    if (options.onToken && !options.onToken(next)) {
      result.stop = StopReason::Callback;
      break;
    }
    if (!options.ignoreEos && isStop(next)) {
      result.stop = StopReason::StopToken;
      break;
    }
    if (int64_t(result.tokens.size()) >= options.maxNewTokens) {
      result.stop = StopReason::Length;
      break;
    }
    KILN_ASSIGN_OR_RETURN(const float *logits,
                          decodeStep(model, session.id(), next, position));
    ++position;
    ++steps;
    next = sampler.sample(logits, vocab);
  }
  const Clock::time_point t2 = Clock::now();
  st.decodeS = seconds(t1, t2);
  st.generatedTokens = int64_t(result.tokens.size());
  st.decodeTokPerS = st.decodeS > 0 ? double(steps) / st.decodeS : 0;
  return result;
}

double tokenNll(const float *logits, int64_t vocab, int32_t target) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    m = std::max(m, double(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - m);
  return -(double(logits[target]) - m - std::log(sum));
}

Result<PerplexityResult> perplexityOver(const std::vector<int32_t> &tokens,
                                        int64_t ctx, int64_t vocab,
                                        const WindowScorer &score) {
  if (ctx < 2)
    return makeError(StatusCode::InvalidArgument, "context ", ctx,
                     ", expected at least 2 tokens per window");
  const int64_t n = int64_t(tokens.size());
  if (n < 2)
    return makeError(StatusCode::InvalidArgument,
                     "perplexity needs at least 2 tokens, the text has ", n);
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return makeError(StatusCode::OutOfRange, "token ", i, " is ", tokens[i],
                       ", expected 0 to ", vocab - 1);
  const int64_t windows = n >= ctx ? n / ctx : 1;
  const int64_t width = n >= ctx ? ctx : n;
  double sum = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    const int32_t *window = tokens.data() + w * width;
    Status s = score(window, width, [&](int64_t row, const float *logits) {
      if (row + 1 < width) {
        sum += tokenNll(logits, vocab, window[row + 1]);
        ++count;
      }
    });
    KILN_RETURN_IF_ERROR(
        s.withContext("perplexity window " + std::to_string(w)));
  }
  if (count != windows * (width - 1))
    return makeError(StatusCode::Internal, "perplexity: scored ", count,
                     " tokens, expected ", windows * (width - 1));
  PerplexityResult r;
  r.tokens = count;
  r.windows = windows;
  r.meanNll = sum / double(count);
  r.ppl = std::exp(r.meanNll);
  return r;
}

Result<PerplexityResult> perplexity(Model &model,
                                    const std::vector<int32_t> &tokens,
                                    int64_t ctx, int64_t chunk) {
  const ValidatedPlan *plan = model.plan(kPrefillPlan);
  if (!plan)
    return makeError(StatusCode::NotFound, "perplexity needs a '", kPrefillPlan,
                     "' plan");
  const int64_t maxPos = model.info().maxPositions;
  if (maxPos > 0 && ctx > maxPos)
    return makeError(StatusCode::OutOfRange, "context ", ctx,
                     " exceeds the model's ", maxPos, " positions");
  return perplexityOver(tokens, ctx, plan->vocab(),
                        [&](const int32_t *window, int64_t n,
                            const LogitsRowFn &onRow) -> Status {
                          KILN_ASSIGN_OR_RETURN(Session session,
                                                Session::open(model));
                          return prefill(model, session.id(), window, n, 0,
                                         chunk, PrefillLogits::All, onRow);
                        });
}

} // namespace kiln::engine
