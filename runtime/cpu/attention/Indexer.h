//===- Indexer.h - DSA lightning indexer top-k (GLM-5.x) --------*- C++ -*-===//
//
// GLM.md section 3.5. For token t and each causal key s <= positions[t]:
//   I[t, s] = sum_h weights[t, h] * ReLU(scale * q[t, h] . key[s])
// (ReLU per head, before the weighted sum), then the k largest I[t, s].
// IndexShare layers reuse a full layer's output instead of calling this.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_INDEXER_H
#define KILN_RUNTIME_CPU_ATTENTION_INDEXER_H

#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"
#include "runtime/cpu/attention/Workspace.h"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

struct IndexerArgs {
  int64_t tokens = 0;                 // T
  const int32_t *seqIds = nullptr;    // [T]
  const int32_t *positions = nullptr; // [T]
  int64_t heads = 0;                  // Hi (GLM-5: 32)
  int64_t dim = 0;                    // Di (128)
  const float *q = nullptr;           // [T, Hi, Di], RoPE applied
  /// [T, Hi], already multiplied by Hi^-0.5 by the graph.
  const float *weights = nullptr;
  KvView keys;        // indexer key cache, width Di
  float scale = 1.0f; // Di^-0.5
  int64_t k = 0;      // index_topk (GLM-5: 2048)
  /// Scores held at once; tokens are processed in chunks that fit (a token
  /// with more keys gets a chunk of its own). 0: the default, 2^21.
  int64_t maxScores = 0;
};

/// Workspace indexerTopK needs for these tokens (it depends on their
/// positions) on `threads` threads.
size_t indexerWorkspaceBytes(const IndexerArgs &args, int threads);

/// out [T, k]: the selected key positions of each token in ascending
/// position order, then -1 in the slots left when a token has fewer than k
/// causal keys. Ties in I go to the lower position; a NaN score ranks
/// lowest. Results do not depend on pool.size().
void indexerTopK(ThreadPool &pool, const IndexerArgs &args, int32_t *out,
                 Workspace &workspace);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_INDEXER_H
