//===- GenerateOne.h - One request through the serving engine ---*- C++ -*-===//
//
// generate() / generateSpeculative()'s contract (a fresh sequence, stop ids,
// streaming callback, prompt logits, round statistics) served by an Engine
// of its own: kiln-run's CPU path and kiln-bench --spec, so that both measure
// what kiln-serve runs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_GENERATEONE_H
#define KILN_RUNTIME_SERVE_GENERATEONE_H

#include "runtime/engine/Generator.h"
#include "runtime/engine/SpecDecoder.h"
#include "runtime/serve/Engine.h"

#include <vector>

namespace kiln::serve {

/// Generates after `prompt` with `k` drafts per round (0: none). With
/// `options.kvMemoryBytes` 0 the pool holds exactly this request's pages.
/// `spec` (when given and k > 0) gets the round statistics, `metrics` the
/// engine's counters at the end.
Result<engine::GenerateResult>
generateOne(engine::Model &model, const std::vector<int32_t> &prompt,
            const engine::GenerateOptions &g, int k, EngineOptions options,
            engine::SpecStats *spec, EngineMetrics *metrics = nullptr);

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_GENERATEONE_H
