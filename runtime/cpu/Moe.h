//===- Moe.h - Fused mixture-of-experts layer -------------------*- C++ -*-===//
//
// y = Σ_j w_j · Expert_{id_j}(x) + SharedExpert(x) (GLM.md §3.2), each
// expert a SwiGLU MLP down(silu(gate(x)) ⊙ up(x)).
//
// The fused path groups (token, expert) pairs by expert into blocks as
// vLLM/AITER moe_align_block_size does, then runs two parallel phases:
//   1. gate and up GEMMs per expert over that expert's gathered tokens,
//      SwiGLU, times the routing weight (threads split the I rows of every
//      expert, so each weight byte is read once);
//   2. down GEMMs, each thread owning a range of the H output columns and
//      adding the experts into y in ascending expert order, after the
//      shared expert.
// Nothing depends on thread timing: 1 and N threads give the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_MOE_H
#define KILN_RUNTIME_CPU_MOE_H

#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Router.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"

namespace kiln::cpu {

/// The weights of one MoE layer.
struct MoeWeights {
  WeightView router;           // [E, H]
  const float *bias = nullptr; // e_score_correction_bias [E]
  WeightView gate, up;         // stacks of E matrices [I, H]
  WeightView down;             // stack of E matrices [H, I]
  /// Shared expert [Is, H], [Is, H], [H, Is]; data == nullptr when absent.
  WeightView sharedGate, sharedUp, sharedDown;

  bool hasShared() const { return sharedGate.data != nullptr; }
};

/// (token, expert) pairs grouped by expert, padded per expert to whole
/// blocks (vLLM moe_align_block_size). Pair p = t * topK + j is the j-th
/// expert of token t.
struct MoeBlocks {
  int64_t numPairs = 0;  // T * topK; also the padding value in sortedIds
  int64_t numPadded = 0; // entries of sortedIds, a multiple of blockSize
  int64_t numBlocks = 0; // numPadded / blockSize
  /// [numPadded]: experts in ascending order, each expert's pairs in
  /// ascending p, then numPairs up to the end of its last block. Experts
  /// without pairs get no blocks.
  const int32_t *sortedIds = nullptr;
  const int32_t *blockExpert = nullptr; // [numBlocks]: expert of each block
  const int32_t *expertCount = nullptr; // [E]: pairs of each expert
  const int32_t *expertBegin = nullptr; // [E + 1]: first entry of each expert
};

/// Groups the routing `ids` [T, topK]; the arrays live in `arena`.
MoeBlocks alignBlocks(const int32_t *ids, int64_t T, const MoeParams &params,
                      Arena &arena);

/// Routes x [T, H] (route() in Router.h) and runs moeExperts().
void moeForward(ThreadPool &pool, const float *x, int64_t T,
                const MoeWeights &weights, const MoeParams &params,
                Arena &arena, float *y);

/// The experts part of moeForward() for given routing: ids (in [0, E)) and
/// routing weights [T, topK]. Writes y [T, H]. Scratch from `arena` is about
/// 4 * (2 * T * topK * I + 2 * T * Is) bytes, so callers split long prefills
/// into chunks of tokens.
void moeExperts(ThreadPool &pool, const float *x, int64_t T, const int32_t *ids,
                const float *routeWeights, const MoeWeights &weights,
                const MoeParams &params, Arena &arena, float *y);

/// moeForward() built from the plain kernels, one expert at a time (gather,
/// matmul, swiglu, matmul, weighted add); the reference the fused path is
/// tested against.
void moeForwardUnfused(ThreadPool &pool, const float *x, int64_t T,
                       const MoeWeights &weights, const MoeParams &params,
                       Arena &arena, float *y);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_MOE_H
