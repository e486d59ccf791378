//===- BatchFile.h - kiln-run's offline batch mode --------------*- C++ -*-===//
//
//   kiln-run model.kiln --batch-file requests.jsonl [-o results.jsonl]
//
// One JSON object per input line: `prompt` (text) or `prompt_ids`, and
// optionally `id`, `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`,
// `stop` (a string or a list of strings), `stop_token_ids`, `ignore_eos`.
// All requests run concurrently through the serving engine; the results are
// written one JSON line per input line, in input order: `id`, `prompt_ids`,
// `ids`, `text`, `finish_reason`, `cached_tokens`, `ttft_s` (or `error` for a
// line that was malformed or refused, which the others do not wait for).
// A progress line goes to stderr about once a second.
//
// Under mpirun with a data-parallel-attention artifact (kiln-compile --ep N
// --dp-attention [--tp T]) rank 0 reads the file, data-parallel group g
// (ranks g T .. g T + T - 1) runs the requests g, g + N, g + 2N, ... of it
// on its own engines, and rank 0 writes every result.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_BATCHFILE_H
#define KILN_TOOLS_KILN_RUN_BATCHFILE_H

#include "runtime/engine/Model.h"
#include "runtime/serve/Engine.h"

#include <string>

namespace kiln::tools {

struct BatchFileOptions {
  std::string input;  // requests, JSON lines
  std::string output; // results; empty: stdout
  serve::EngineOptions engine;
  /// Defaults for what a line does not say.
  serve::RequestParams defaults;
  int64_t maxPromptTokens = 32768;
};

/// Runs the file; returns the process exit code (0 when every line ran,
/// 1 when some line was malformed or refused). Errors that stop the whole
/// run (unreadable input, engine set-up) come back as a Status.
Result<int> runBatchFile(engine::Model &model, const BatchFileOptions &options);

} // namespace kiln::tools

#endif // KILN_TOOLS_KILN_RUN_BATCHFILE_H
