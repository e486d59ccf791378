//===- EngineDecode.h - Batched decode through the serving engine -*- C++
//-*-===//
//
// kiln-bench's decode rows: `batch` requests with random prompts run through
// serve::Engine (continuous batching over the page pool) until each has
// generated `decodeTokens + 1` tokens; the steps after every request has its
// first token are timed, so a row is aggregate decode throughput.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_BENCH_ENGINEDECODE_H
#define KILN_TOOLS_KILN_BENCH_ENGINEDECODE_H

#include "runtime/engine/Model.h"
#include "support/Status.h"

#include <cstdint>

namespace kiln::bench {

struct EngineDecodeResult {
  int64_t steps = 0;         // timed decode steps
  int64_t tokens = 0;        // tokens generated in them
  double seconds = 0;        // their wall time
  double bestStepS = 0;      // fastest of them
  int64_t kvPages = 0;       // pool size
  int64_t bytesPerToken = 0; // KV bytes per token
};

Result<EngineDecodeResult> engineDecode(engine::Model &model, int64_t batch,
                                        int64_t promptTokens,
                                        int64_t decodeTokens, uint32_t seed);

} // namespace kiln::bench

#endif // KILN_TOOLS_KILN_BENCH_ENGINEDECODE_H
