//===- Attend.h - Softmax attention over paged keys, shared core -*- C++
//-*-===//
//
// Internal to KilnCpuAttention. One token's query heads attend to keys read
// from a paged cache with an online (blockwise, max-rescaled) FP32 softmax,
// so no buffer grows with the context. GQA uses it per KV head; MLA uses it
// in the latent space (query [q_abs | q_pe], key row [c_kv | k_pe], value =
// c_kv, one "KV head" shared by all query heads).
//
// Work is split over (token, KV head, group of query heads); query heads in a
// group share each converted key block. Every head's arithmetic is the same
// whatever the grouping, so results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_ATTEND_H
#define KILN_RUNTIME_CPU_ATTENTION_ATTEND_H

#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu::detail {

struct AttendProblem {
  KvView keys;
  int64_t keyCol = 0;        // first key column of KV head 0
  int64_t keyHeadStride = 0; // columns between KV heads' keys
  int64_t keyDim = 0;
  KvView values;
  int64_t valueCol = 0;
  int64_t valueHeadStride = 0;
  int64_t valueDim = 0;
  /// Values are columns of the key rows (MLA): `values` is ignored and the
  /// converted key row is reused.
  bool valuesInKeyRows = false;
  float scale = 1.0f;
  /// Scores and value sums as BF16 products (bf16Activations() is BF16):
  /// queries, keys, values and the softmax weights rounded to BF16, scores
  /// in MatmulBf16.h's row order, value sums in its pair form, a block of
  /// keys at a time. The softmax itself stays FP32.
  bool bf16 = false;

  int64_t tokens = 0;
  const int32_t *seqIds = nullptr;
  const int32_t *positions = nullptr;
  /// Null: keys 0..positions[t]. Else [tokens, keyListWidth] key positions,
  /// negative entries skipped.
  const int32_t *keyLists = nullptr;
  int64_t keyListWidth = 0;

  const float *q = nullptr; // [tokens, qHeads, keyDim]
  int64_t qHeads = 0;
  int64_t kvHeads = 1;  // query head h reads KV head h / (qHeads / kvHeads)
  float *out = nullptr; // [tokens, qHeads, valueDim]
};

size_t attendWorkspaceBytes(const AttendProblem &p, int threads);
/// `workspace` holds attendWorkspaceBytes(p, pool.size()) bytes.
void attend(ThreadPool &pool, const AttendProblem &p, uint8_t *workspace);

} // namespace kiln::cpu::detail

#endif // KILN_RUNTIME_CPU_ATTENTION_ATTEND_H
