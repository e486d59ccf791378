//===- Router.h - GLM noaux_tc MoE routing ----------------------*- C++ -*-===//
//
// GLM.md §3.2, all in FP32: s = sigmoid(x · W_gateᵀ); experts are chosen on
// s + bias after the group filter; the weights are the unbiased s of the
// chosen experts, normalized if normTopkProb, times routedScalingFactor.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ROUTER_H
#define KILN_RUNTIME_CPU_ROUTER_H

#include "runtime/cpu/Arena.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"

namespace kiln::cpu {

/// Shapes and settings of one MoE layer (config.json names in comments).
struct MoeParams {
  int64_t numExperts = 0;           // n_routed_experts (E)
  int64_t topK = 0;                 // num_experts_per_tok
  int64_t nGroup = 1;               // n_group
  int64_t topkGroup = 1;            // topk_group
  bool normTopkProb = true;         // norm_topk_prob
  float routedScalingFactor = 1.0f; // routed_scaling_factor
  int64_t blockSize = 64;           // token rows per expert block (Moe.h)
  /// The weight stacks hold experts [expertOffset, expertOffset +
  /// localExperts) of the numExperts the router chooses from (one rank's
  /// share under expert parallelism); pairs routed to others add nothing.
  /// localExperts 0: all of them.
  int64_t expertOffset = 0;
  int64_t localExperts = 0;
  /// The shared expert runs on rows [0, sharedRows) of x only (a rank's own
  /// tokens, first among the rows an all-to-all exchange brought it); -1:
  /// on every row.
  int64_t sharedRows = -1;
};

/// Steps 1-6 of §3.2 from router logits [T, E]: expert ids [T, topK] in
/// descending order of s + bias (ties to the lower id) and their weights
/// [T, topK]. `work` holds 2 * E floats.
void routeFromLogits(const float *logits, int64_t T, const float *bias,
                     const MoeParams &params, float *work, int32_t *ids,
                     float *weights);

/// Logits = x [T, H] · routerᵀ (router [E, H], any format), then
/// routeFromLogits().
void route(ThreadPool &pool, const float *x, int64_t T,
           const WeightView &router, const float *bias, const MoeParams &params,
           Arena &arena, int32_t *ids, float *weights);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ROUTER_H
