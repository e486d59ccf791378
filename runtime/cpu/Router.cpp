//===- Router.cpp - Routing from the plain row kernels --------------------===//

#include "runtime/cpu/Router.h"
#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/RowOps.h"

using namespace kiln::cpu;

void kiln::cpu::routeFromLogits(const float *logits, int64_t T,
                                const float *bias, const MoeParams &params,
                                float *work, int32_t *ids, float *weights) {
  const int64_t e = params.numExperts, k = params.topK;
  float *scores = work, *select = work + e;
  for (int64_t t = 0; t < T; ++t) {
    int32_t *tid = ids + t * k;
    float *tw = weights + t * k;
    sigmoid(logits + t * e, e, scores);
    add(scores, bias, 1, e, select);
    if (params.nGroup > 1)
      groupLimit(select, 1, e, params.nGroup, params.topkGroup, select);
    topK(select, 1, e, k, /*values=*/tw, tid);
    gather(scores, 1, e, tid, k, tw);
    if (params.normTopkProb)
      normalize(tw, 1, k, 1e-20f, tw);
    scale(tw, k, params.routedScalingFactor, tw);
  }
}

void kiln::cpu::route(ThreadPool &pool, const float *x, int64_t T,
                      const WeightView &router, const float *bias,
                      const MoeParams &params, Arena &arena, int32_t *ids,
                      float *weights) {
  Arena::Scope scope(arena);
  float *logits = arena.alloc<float>(T * params.numExperts);
  matmul(pool, x, T, router, logits);
  float *work = arena.alloc<float>(2 * params.numExperts);
  routeFromLogits(logits, T, bias, params, work, ids, weights);
}
