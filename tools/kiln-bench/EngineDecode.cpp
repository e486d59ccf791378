//===- EngineDecode.cpp ---------------------------------------------------===//

#include "tools/kiln-bench/EngineDecode.h"
#include "runtime/serve/Engine.h"

#include <algorithm>
#include <chrono>
#include <random>

using namespace kiln;

Result<bench::EngineDecodeResult>
bench::engineDecode(engine::Model &model, int64_t batch, int64_t promptTokens,
                    int64_t decodeTokens, uint32_t seed) {
  serve::EngineOptions options;
  // Room for every sequence at once, plus a page each of slack.
  options.kvMemoryBytes = serve::kvBytesFor(
      model, batch, promptTokens + decodeTokens + 1 + options.pageRows,
      options.pageRows);
  options.maxRunning = std::max<int64_t>(batch, 1);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<serve::Engine> engine,
                        serve::Engine::create(model, options));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(
      0, int32_t(model.info().vocabSize - 1));
  for (int64_t b = 0; b < batch; ++b) {
    serve::RequestParams p;
    p.prompt.resize(size_t(promptTokens));
    for (int32_t &t : p.prompt)
      t = token(rng);
    p.maxTokens = decodeTokens + 1;
    p.ignoreEos = true;
    KILN_RETURN_IF_ERROR(engine->submit(std::move(p)).status());
  }
  // Prefill until every request has its first token.
  while (engine->hasWork() && engine->metrics().generatedTokens < batch)
    engine->step();
  // The profile (kiln-bench --profile) covers the decode steps only.
  model.profile().reset();
  EngineDecodeResult r;
  r.bestStepS = 1e30;
  while (engine->hasWork()) {
    int64_t before = engine->metrics().generatedTokens;
    auto t0 = std::chrono::steady_clock::now();
    engine->step();
    double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    r.seconds += dt;
    r.bestStepS = std::min(r.bestStepS, dt);
    r.tokens += engine->metrics().generatedTokens - before;
    ++r.steps;
  }
  for (serve::RequestOutput &out : engine->takeFinished())
    if (out.finish == serve::FinishReason::Error)
      return makeError(StatusCode::Internal,
                       "benchmark request failed: ", out.error);
  r.kvPages = engine->layout().pages;
  r.bytesPerToken = engine->layout().bytesPerToken;
  return r;
}
