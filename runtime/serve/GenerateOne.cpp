//===- GenerateOne.cpp ----------------------------------------------------===//

#include "runtime/serve/GenerateOne.h"

using namespace kiln;
using namespace kiln::engine;
using namespace kiln::serve;

Result<GenerateResult>
kiln::serve::generateOne(Model &model, const std::vector<int32_t> &prompt,
                         const GenerateOptions &g, int k, EngineOptions options,
                         SpecStats *spec, EngineMetrics *metrics) {
  options.specK = k;
  options.maxBatchedTokens = g.prefillChunk;
  if (options.maxBatchedTokens < k + 1)
    options.maxBatchedTokens = k + 1;
  if (options.kvMemoryBytes == 0) // exactly this sequence's pages
    options.kvMemoryBytes =
        kvBytesFor(model, 1, int64_t(prompt.size()) + g.maxNewTokens + k,
                   options.pageRows);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        Engine::create(model, options));
  RequestParams p;
  p.prompt = prompt;
  p.maxTokens = g.maxNewTokens;
  p.sampling = g.sampling;
  p.ignoreEos = g.ignoreEos;
  p.stopIds = g.stopIds;
  p.returnPromptLogits = g.keepPromptLogits;
  KILN_ASSIGN_OR_RETURN(RequestId id, engine->submit(std::move(p)));
  bool stopped = false;
  engine->setOnToken([&](RequestId, int32_t token, const TokenLogprob *) {
    if (!stopped && g.onToken && !g.onToken(token)) {
      stopped = true;
      engine->cancel(id);
    }
  });
  engine->runToCompletion();
  std::vector<RequestOutput> done = engine->takeFinished();
  if (done.size() != 1)
    return makeError(StatusCode::Internal, "the engine finished ", done.size(),
                     " requests, expected 1");
  RequestOutput &out = done[0];
  if (out.finish == FinishReason::Error)
    return makeError(StatusCode::Internal, out.error);
  GenerateResult r;
  r.tokens = std::move(out.ids);
  r.promptLogits = std::move(out.promptLogits);
  r.stop = out.finish == FinishReason::Stop ? StopReason::StopToken
           : stopped                        ? StopReason::Callback
                                            : StopReason::Length;
  GenerateStats &st = r.stats;
  st.promptTokens = int64_t(prompt.size());
  st.generatedTokens = int64_t(r.tokens.size());
  st.ttftS = st.prefillS = out.ttftS;
  st.decodeS = out.e2eS - out.ttftS;
  st.prefillTokPerS = st.prefillS > 0 ? double(prompt.size()) / st.prefillS : 0;
  st.decodeTokPerS = st.decodeS > 0 && !r.tokens.empty()
                         ? double(r.tokens.size() - 1) / st.decodeS
                         : 0;
  if (metrics)
    *metrics = engine->metrics();
  if (spec && k > 0) {
    *spec = SpecStats();
    spec->reached = out.specReached;
    spec->accepted = out.specAccepted;
    spec->rounds = out.specReached.empty() ? 0 : out.specReached[0];
    spec->draftedTokens = spec->rounds * k;
    for (int64_t a : out.specAccepted)
      spec->acceptedTokens += a;
  }
  return r;
}
