//===- MoeUnfused.cpp - MoE from the plain kernels, one expert at a time --===//

#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Moe.h"

#include <algorithm>

#include <cstring>

using namespace kiln::cpu;

void kiln::cpu::moeForwardUnfused(ThreadPool &pool, const float *x, int64_t T,
                                  const MoeWeights &weights,
                                  const MoeParams &params, Arena &arena,
                                  float *y) {
  Arena::Scope scope(arena);
  const int64_t H = weights.down.rows, I = weights.gate.rows;
  const int64_t k = params.topK, pairs = T * k;
  auto *ids = arena.alloc<int32_t>(pairs);
  auto *routeWeights = arena.alloc<float>(pairs);
  route(pool, x, T, weights.router, weights.bias, params, arena, ids,
        routeWeights);

  auto *rows = arena.alloc<int32_t>(pairs);
  float *xe = arena.alloc<float>(pairs * H);
  float *g = arena.alloc<float>(pairs * I);
  float *u = arena.alloc<float>(pairs * I);
  float *out = arena.alloc<float>(pairs * H);
  std::memset(y, 0, size_t(T * H) * sizeof(float));
  for (int64_t e = 0; e < params.numExperts; ++e) {
    int64_t n = 0;
    for (int64_t p = 0; p < pairs; ++p)
      if (ids[p] == e)
        rows[n++] = int32_t(p);
    if (n == 0)
      continue;
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(xe + i * H, x + (rows[i] / k) * H, size_t(H) * sizeof(float));
    matmul(pool, xe, n, weights.gate.expert(e), g);
    matmul(pool, xe, n, weights.up.expert(e), u);
    swiglu(g, u, n * I, g);
    matmul(pool, g, n, weights.down.expert(e), out);
    for (int64_t i = 0; i < n; ++i) {
      float *yt = y + (rows[i] / k) * H;
      scale(out + i * H, H, routeWeights[rows[i]], out + i * H);
      add(yt, out + i * H, 1, H, yt);
    }
  }

  const int64_t Ts = params.sharedRows < 0 ? T : std::min(params.sharedRows, T);
  if (weights.hasShared() && Ts > 0) {
    const int64_t Is = weights.sharedGate.rows;
    float *sg = arena.alloc<float>(Ts * Is);
    float *su = arena.alloc<float>(Ts * Is);
    matmul(pool, x, Ts, weights.sharedGate, sg);
    matmul(pool, x, Ts, weights.sharedUp, su);
    swiglu(sg, su, Ts * Is, sg);
    float *so = arena.alloc<float>(Ts * H);
    matmul(pool, sg, Ts, weights.sharedDown, so);
    add(y, so, Ts, H, y);
  }
}
