//===- Moe.cpp - Fused MoE: grouped expert GEMMs with SwiGLU --------------===//

#include "runtime/cpu/Moe.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/MatmulQ8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kiln::cpu;

namespace {

/// Rows per unit of phase-1 work.
constexpr int64_t kRowUnit = 32;

/// One expert's run of pairs, in the compact order (pairs sorted by expert,
/// padding dropped): rows [begin, begin + count) of the phase buffers.
struct ExpertRun {
  int32_t expert;
  int32_t begin;
  int32_t count;
};

/// out[c, i] = silu(gate[c, i]) * up[c, i] * scale[c] for the rows of a
/// run and columns [i0, i1).
void swigluRows(float *gate, const float *up, int64_t ld, const float *scale,
                int64_t rows, int64_t i0, int64_t i1) {
  for (int64_t c = 0; c < rows; ++c) {
    float *g = gate + c * ld;
    const float *u = up + c * ld;
    const float s = scale ? scale[c] : 1.0f;
    for (int64_t i = i0; i < i1; ++i)
      g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i] * s;
  }
}

} // namespace

void kiln::cpu::moeForward(ThreadPool &pool, const float *x, int64_t T,
                           const MoeWeights &weights, const MoeParams &params,
                           Arena &arena, float *y) {
  Arena::Scope scope(arena);
  auto *ids = arena.alloc<int32_t>(T * params.topK);
  auto *routeWeights = arena.alloc<float>(T * params.topK);
  route(pool, x, T, weights.router, weights.bias, params, arena, ids,
        routeWeights);
  if (params.localExperts == 0 || params.localExperts == params.numExperts) {
    moeExperts(pool, x, T, ids, routeWeights, weights, params, arena, y);
    return;
  }
  // One rank's share: ids as indices into the local stacks, -1 (skipped by
  // alignBlocks) for experts another rank holds.
  const int64_t pairs = T * params.topK;
  for (int64_t p = 0; p < pairs; ++p) {
    int64_t local = ids[p] - params.expertOffset;
    ids[p] = local >= 0 && local < params.localExperts ? int32_t(local) : -1;
  }
  MoeParams localParams = params;
  localParams.numExperts = params.localExperts;
  moeExperts(pool, x, T, ids, routeWeights, weights, localParams, arena, y);
}

namespace {

/// The state of one moeExperts() call and its two phases.
struct FusedMoe {
  FusedMoe(const float *x, int64_t T, const MoeWeights &w, int64_t sharedRows)
      : x(x), T(T), Ts(sharedRows < 0 ? T : std::min(sharedRows, T)),
        H(w.down.rows), I(w.gate.rows),
        Is(w.hasShared() ? w.sharedGate.rows : 0), w(w) {}

  const float *x;
  int64_t T, Ts, H, I, Is; // Ts: rows [0, Ts) take the shared expert
  const MoeWeights &w;
  ExpertRun *runs = nullptr;
  int64_t numRuns = 0;
  int64_t pairs = 0;          // routed (token, expert) rows
  int32_t *tokenOf = nullptr; // compact row -> token
  float *scaleOf = nullptr;   // compact row -> routing weight
  float *act = nullptr;       // [pairs, I]: gate, then SwiGLU · weight
  // Under int8 activations (usesInt8), x and act quantized once for every
  // expert's matmuls (MatmulRows::xQ8); null otherwise.
  const Q8Block *xQ8 = nullptr, *actQ8 = nullptr;
  // Under BF16 activations (usesBf16Dot), x, act and sharedAct rounded once
  // (MatmulRows::xBf16); null otherwise.
  const uint16_t *xBf16 = nullptr, *actBf16 = nullptr, *sharedActBf16 = nullptr;
  float *upOut = nullptr;                          // [pairs, I]
  float *sharedAct = nullptr, *sharedUp = nullptr; // [T, Is]

  /// Lists each expert's pairs in sortedIds order, padding dropped, and
  /// carves the phase buffers.
  void plan(const MoeBlocks &blocks, const float *routeWeights,
            const MoeParams &params, Arena &arena) {
    runs = arena.alloc<ExpertRun>(params.numExperts);
    tokenOf = arena.alloc<int32_t>(blocks.numPairs);
    scaleOf = arena.alloc<float>(blocks.numPairs);
    int32_t c = 0;
    for (int64_t blk = 0; blk < blocks.numBlocks; ++blk) {
      const int32_t e = blocks.blockExpert[blk];
      if (numRuns == 0 || runs[numRuns - 1].expert != e)
        runs[numRuns++] = {e, c, 0};
      const int32_t *ids = blocks.sortedIds + blk * params.blockSize;
      for (int64_t i = 0; i < params.blockSize && ids[i] != blocks.numPairs;
           ++i, ++c) {
        tokenOf[c] = ids[i] / int32_t(params.topK);
        scaleOf[c] = routeWeights[ids[i]];
        ++runs[numRuns - 1].count;
      }
    }
    pairs = c;
    act = arena.alloc<float>(blocks.numPairs * I);
    upOut = arena.alloc<float>(blocks.numPairs * I);
    if (Is) {
      sharedAct = arena.alloc<float>(T * Is);
      sharedUp = arena.alloc<float>(T * Is);
    }
  }

  /// Phase 1 for routed rows [r0, r1) of every expert and shared rows
  /// [s0, s1): gate, up, then SwiGLU (times the routing weight) in place.
  void gateUp(int64_t r0, int64_t r1, int64_t s0, int64_t s1) const {
    for (int64_t r = 0; r < numRuns; ++r) {
      const ExpertRun &run = runs[r];
      MatmulRows io;
      io.x = x;
      io.xStride = H;
      io.xIndex = tokenOf + run.begin;
      io.yStride = I;
      io.tokens = run.count;
      io.xQ8 = xQ8;
      io.xBf16 = xBf16;
      io.y = act + run.begin * I;
      matmulRows(io, w.gate.expert(run.expert), r0, r1);
      io.y = upOut + run.begin * I;
      matmulRows(io, w.up.expert(run.expert), r0, r1);
      swigluRows(act + run.begin * I, upOut + run.begin * I, I,
                 scaleOf + run.begin, run.count, r0, r1);
    }
    if (s0 < s1) {
      MatmulRows io;
      io.x = x;
      io.xStride = H;
      io.yStride = Is;
      io.tokens = Ts;
      io.xQ8 = xQ8;
      io.xBf16 = xBf16;
      io.y = sharedAct;
      matmulRows(io, w.sharedGate, s0, s1);
      io.y = sharedUp;
      matmulRows(io, w.sharedUp, s0, s1);
      swigluRows(sharedAct, sharedUp, Is, nullptr, Ts, s0, s1);
    }
  }

  /// Phase 2 for output columns [n0, n1): y = shared (or 0), then each
  /// routed expert added in ascending expert order.
  void down(float *y, int64_t n0, int64_t n1) const {
    const int64_t shared = Is ? Ts : 0;
    if (shared > 0) {
      MatmulRows io;
      io.x = sharedAct;
      io.xStride = Is;
      io.y = y;
      io.yStride = H;
      io.tokens = shared;
      io.xBf16 = sharedActBf16;
      matmulRows(io, w.sharedDown, n0, n1);
    }
    for (int64_t t = shared; t < T; ++t)
      std::memset(y + t * H + n0, 0, size_t(n1 - n0) * sizeof(float));
    for (int64_t r = 0; r < numRuns; ++r) {
      const ExpertRun &run = runs[r];
      MatmulRows io;
      io.x = act + run.begin * I;
      io.xStride = I;
      io.xQ8 = actQ8 ? actQ8 + run.begin * (I / 32) : nullptr;
      io.xBf16 = actBf16 ? actBf16 + run.begin * bf16RowLength(I) : nullptr;
      io.y = y;
      io.yStride = H;
      io.yIndex = tokenOf + run.begin;
      io.tokens = run.count;
      io.accumulate = true;
      matmulRows(io, w.down.expert(run.expert), n0, n1);
    }
  }
};

/// Rows [0, rows) of x [rows, K] rounded for MatmulRows::xBf16, in the
/// arena.
const uint16_t *roundedRows(ThreadPool &pool, Arena &arena, const float *x,
                            int64_t rows, int64_t K) {
  auto *out = arena.alloc<uint16_t>(rows * bf16RowLength(K));
  roundRowsBf16(pool, x, K, rows, K, out);
  return out;
}

} // namespace

void kiln::cpu::moeExperts(ThreadPool &pool, const float *x, int64_t T,
                           const int32_t *ids, const float *routeWeights,
                           const MoeWeights &weights, const MoeParams &params,
                           Arena &arena, float *y) {
  if (T <= 0)
    return;
  Arena::Scope scope(arena);
  FusedMoe moe(x, T, weights, params.sharedRows);
  moe.plan(alignBlocks(ids, T, params, arena), routeWeights, params, arena);

  if (usesInt8(weights.gate) || usesInt8(weights.up) ||
      (moe.Is &&
       (usesInt8(weights.sharedGate) || usesInt8(weights.sharedUp)))) {
    auto *q = static_cast<Q8Block *>(arena.allocBytes(q8Bytes(T, moe.H)));
    quantizeRowsQ8(pool, x, moe.H, T, moe.H, q);
    moe.xQ8 = q;
  }
  if (usesBf16Dot(weights.gate) || usesBf16Dot(weights.up) ||
      (moe.Is &&
       (usesBf16Dot(weights.sharedGate) || usesBf16Dot(weights.sharedUp)))) {
    moe.xBf16 = roundedRows(pool, arena, x, T, moe.H);
  }

  // Phase 1: a thread takes whole 32-row units of every routed expert and
  // the same fraction of the shared expert's units.
  const int64_t unitsRouted = (moe.I + kRowUnit - 1) / kRowUnit;
  const int64_t unitsShared = (moe.Is + kRowUnit - 1) / kRowUnit;
  // Multiply-adds of a unit: gate and up rows for every routed pair, and
  // the unit's share of the shared expert for every token.
  const int64_t unitCost =
      2 * kRowUnit * moe.H *
      (moe.pairs + moe.Ts * moe.Is / std::max<int64_t>(1, moe.I));
  pool.parallelFor(
      unitsRouted,
      [&](int64_t u0, int64_t u1, int) {
        auto sharedRow = [&](int64_t u) {
          return std::min(moe.Is, u * unitsShared / unitsRouted * kRowUnit);
        };
        moe.gateUp(u0 * kRowUnit, std::min(moe.I, u1 * kRowUnit), sharedRow(u0),
                   sharedRow(u1));
      },
      /*grain=*/1, unitCost);

  if (usesInt8(weights.down) && moe.pairs > 0) {
    auto *q =
        static_cast<Q8Block *>(arena.allocBytes(q8Bytes(moe.pairs, moe.I)));
    quantizeRowsQ8(pool, moe.act, moe.I, moe.pairs, moe.I, q);
    moe.actQ8 = q;
  }
  if (usesBf16Dot(weights.down) && moe.pairs > 0) {
    moe.actBf16 = roundedRows(pool, arena, moe.act, moe.pairs, moe.I);
  }
  if (moe.Is && moe.Ts > 0 && usesBf16Dot(weights.sharedDown)) {
    moe.sharedActBf16 = roundedRows(pool, arena, moe.sharedAct, moe.Ts, moe.Is);
  }

  // Phase 2: a thread owns columns [n0, n1) of y, so the order in which
  // experts are added never depends on timing. A column costs I per pair
  // and Is per token.
  pool.parallelFor(
      moe.H, [&](int64_t n0, int64_t n1, int) { moe.down(y, n0, n1); },
      /*grain=*/32, /*unitCost=*/moe.I * moe.pairs + moe.Is * moe.Ts);
}
