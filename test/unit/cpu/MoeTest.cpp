//===- MoeTest.cpp - Fused MoE vs the unfused graph and a double reference ===//
//
// For each configuration: fused == unfused within rel L2 1e-5, both within
// rel L2 1e-5 of a double evaluation of GLM.md §3.2 step 7 on the same
// routing; the fused path gives the same bits on 1 and 2 threads, on the
// scalar and AVX-512 paths, and for a token alone or in a batch.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Moe.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

struct MoeFixture {
  int64_t H, I, Is;
  TestWeight router, gate, up, down, sharedGate, sharedUp, sharedDown;
  std::vector<float> bias;
  MoeWeights weights;

  MoeFixture(std::mt19937 &rng, WeightFormat format, const MoeParams &p,
             int64_t H, int64_t I, int64_t Is)
      : H(H), I(I), Is(Is) {
    const int64_t e = p.numExperts;
    router = randomWeight(rng, WeightFormat::BF16, e, H);
    bias = randomFloats(rng, e, -0.1f, 0.1f);
    gate = randomWeight(rng, format, I, H, e);
    up = randomWeight(rng, format, I, H, e);
    down = randomWeight(rng, format, H, I, e);
    weights.router = router.view;
    weights.bias = bias.data();
    weights.gate = gate.view;
    weights.up = up.view;
    weights.down = down.view;
    if (Is) {
      sharedGate = randomWeight(rng, format, Is, H);
      sharedUp = randomWeight(rng, format, Is, H);
      sharedDown = randomWeight(rng, format, H, Is);
      weights.sharedGate = sharedGate.view;
      weights.sharedUp = sharedUp.view;
      weights.sharedDown = sharedDown.view;
    }
  }
};

/// Σ_j w_j · down(silu(gate x) ⊙ up x) + shared(x) in double, weights
/// decoded by dequantizeRow().
std::vector<double> moeRef(const MoeFixture &f, const std::vector<float> &x,
                           int64_t T, const std::vector<int32_t> &ids,
                           const std::vector<float> &rw, int64_t topK) {
  auto mlp = [&](const std::vector<float> &g, const std::vector<float> &u,
                 const std::vector<float> &d, int64_t inner, const float *xt,
                 double scale, double *out) {
    std::vector<double> h(static_cast<size_t>(inner));
    for (int64_t i = 0; i < inner; ++i) {
      double a = 0, b = 0;
      for (int64_t k = 0; k < f.H; ++k) {
        a += double(g[i * f.H + k]) * xt[k];
        b += double(u[i * f.H + k]) * xt[k];
      }
      h[i] = a / (1 + std::exp(-a)) * b;
    }
    for (int64_t n = 0; n < f.H; ++n) {
      double s = 0;
      for (int64_t i = 0; i < inner; ++i)
        s += double(d[n * inner + i]) * h[i];
      out[n] += scale * s;
    }
  };
  std::vector<double> y(size_t(T * f.H), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < topK; ++j) {
      const int32_t e = ids[t * topK + j];
      mlp(f.gate.dequantized(e), f.up.dequantized(e), f.down.dequantized(e),
          f.I, &x[t * f.H], rw[t * topK + j], &y[t * f.H]);
    }
    if (f.Is)
      mlp(f.sharedGate.dequantized(), f.sharedUp.dequantized(),
          f.sharedDown.dequantized(), f.Is, &x[t * f.H], 1.0, &y[t * f.H]);
  }
  return y;
}

std::vector<float> fused(int threads, const MoeFixture &f,
                         const std::vector<float> &x, int64_t T,
                         const MoeParams &p) {
  ThreadPool pool(threads);
  Arena arena;
  std::vector<float> y(size_t(T * f.H), -1.0f);
  moeForward(pool, x.data(), T, f.weights, p, arena, y.data());
  return y;
}

/// `refTol`: relative L2 against the double reference (the int8 activations
/// of Mxfp4Activations::Int8 round the inputs; everything else is exact).
void checkMoe(WeightFormat format, const MoeParams &p, int64_t T, int64_t H,
              int64_t I, int64_t Is, uint32_t seed, double refTol = 1e-5) {
  std::mt19937 rng(seed);
  MoeFixture f(rng, format, p, H, I, Is);
  std::vector<float> x = randomFloats(rng, T * H);
  const std::string what =
      std::string(formatName(format)) + " E=" + std::to_string(p.numExperts) +
      " groups=" + std::to_string(p.nGroup) +
      " topK=" + std::to_string(p.topK) + " T=" + std::to_string(T) +
      " shared=" + std::to_string(Is);

  std::vector<float> y = fused(1, f, x, T, p);
  ThreadPool pool(2);
  Arena arena;
  std::vector<float> unfused(y.size());
  moeForwardUnfused(pool, x.data(), T, f.weights, p, arena, unfused.data());
  EXPECT_LE(relL2(y, unfused), 1e-5) << what;

  std::vector<int32_t> ids(static_cast<size_t>(T * p.topK));
  std::vector<float> rw(static_cast<size_t>(T * p.topK));
  route(pool, x.data(), T, f.weights.router, f.weights.bias, p, arena,
        ids.data(), rw.data());
  std::vector<double> ref = moeRef(f, x, T, ids, rw, p.topK);
  EXPECT_LE(relL2(y.data(), ref.data(), T * H), refTol) << what;
  EXPECT_LE(relL2(unfused.data(), ref.data(), T * H), refTol) << what;

  EXPECT_TRUE(sameBits(y, fused(2, f, x, T, p))) << what << " threads";
  {
    ScalarScope scalar;
    EXPECT_TRUE(sameBits(y, fused(2, f, x, T, p))) << what << " scalar";
  }
  std::vector<float> last(x.end() - H, x.end());
  EXPECT_TRUE(sameBits(std::vector<float>(y.end() - H, y.end()),
                       fused(2, f, last, 1, p)))
      << what << " batch";
}

MoeParams params(int64_t e, int64_t topK, int64_t nGroup, int64_t topkGroup) {
  MoeParams p;
  p.numExperts = e;
  p.topK = topK;
  p.nGroup = nGroup;
  p.topkGroup = topkGroup;
  p.routedScalingFactor = 2.5f;
  p.blockSize = 4;
  return p;
}

class MoeFormat : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(MoeFormat, GroupedTopK1To8) {
  for (int64_t k = 1; k <= 8; ++k)
    for (int64_t T : {1, 3, 37})
      for (int64_t Is : {0, 64})
        checkMoe(GetParam(), params(16, k, 4, 2), T, 64, 32, Is,
                 uint32_t(100 * k + T));
}

TEST_P(MoeFormat, OneGroup) {
  for (int64_t k : {1, 8})
    for (int64_t T : {2, 20})
      for (int64_t Is : {0, 32})
        checkMoe(GetParam(), params(8, k, 1, 1), T, 96, 64, Is,
                 uint32_t(7 * k + T));
}

TEST_P(MoeFormat, WideLayer) {
  // K above the 512-column tile of the GEMM path, in both GEMMs.
  checkMoe(GetParam(), params(8, 2, 1, 1), 24, 576, 544, 64, 5);
}

INSTANTIATE_TEST_SUITE_P(Formats, MoeFormat,
                         ::testing::Values(WeightFormat::BF16,
                                           WeightFormat::MXFP4,
                                           WeightFormat::FP8),
                         [](const auto &info) {
                           return std::string(formatName(info.param));
                         });

TEST(Moe, Int8ActivationsKeepTheBitsAcrossThreadsPathsAndBatches) {
  Int8ActivationsScope int8;
  for (int64_t T : {1, 5, 37})
    checkMoe(WeightFormat::MXFP4, params(16, 4, 4, 2), T, 96, 64, 32,
             uint32_t(50 + T), /*refTol=*/2e-2);
}

TEST(Moe, ExpertsWithoutTokens) {
  std::mt19937 rng(9);
  MoeParams p = params(16, 2, 4, 2);
  MoeFixture f(rng, WeightFormat::BF16, p, 64, 32, 0);
  // Token 0 and 1 both go to experts 3 and 5; every other expert is idle.
  const int32_t ids[] = {3, 5, 5, 3};
  const float rw[] = {0.7f, 0.3f, 1.0f, 2.0f};
  const int64_t T = 2;
  std::vector<float> x = randomFloats(rng, T * 64), y(T * 64);
  ThreadPool pool(2);
  Arena arena;
  moeExperts(pool, x.data(), T, ids, rw, f.weights, p, arena, y.data());
  std::vector<double> ref = moeRef(f, x, T, std::vector<int32_t>(ids, ids + 4),
                                   std::vector<float>(rw, rw + 4), 2);
  EXPECT_LE(relL2(y.data(), ref.data(), T * 64), 1e-5);
  MoeBlocks b = alignBlocks(ids, T, p, arena);
  EXPECT_EQ(b.numBlocks, 2);
  EXPECT_EQ(b.expertCount[0], 0);
}

/// Experts [first, first + count) of a stack.
WeightView experts(const WeightView &stack, int64_t first, int64_t count) {
  WeightView v = stack.expert(first);
  v.count = count;
  return v;
}

// Expert parallelism: each of R ranks holds E / R experts (the shared expert
// on rank 0 only); the ranks' results, added in rank order, are the whole
// layer's within float rounding, whatever the format.
TEST_P(MoeFormat, ExpertParallelSharesAddUpToTheWhole) {
  std::mt19937 rng(11);
  MoeParams p = params(16, 4, 4, 2);
  MoeFixture f(rng, GetParam(), p, 64, 32, 32);
  const int64_t T = 7;
  std::vector<float> x = randomFloats(rng, T * 64);
  std::vector<float> whole = fused(2, f, x, T, p);
  for (int64_t ranks : {2, 4}) {
    std::vector<float> sum(T * 64, 0.0f);
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t local = 16 / ranks;
      MoeFixture share = f;
      share.weights.gate = experts(f.weights.gate, r * local, local);
      share.weights.up = experts(f.weights.up, r * local, local);
      share.weights.down = experts(f.weights.down, r * local, local);
      if (r != 0)
        share.weights.sharedGate = share.weights.sharedUp =
            share.weights.sharedDown = WeightView();
      MoeParams q = p;
      q.expertOffset = r * local;
      q.localExperts = local;
      std::vector<float> part = fused(1, share, x, T, q);
      EXPECT_EQ(part, fused(2, share, x, T, q)) << "threads change the bits";
      for (int64_t i = 0; i < T * 64; ++i)
        sum[i] = r == 0 ? part[i] : sum[i] + part[i];
    }
    EXPECT_LE(relL2(sum, whole), 1e-6) << ranks << " ranks";
  }
}

// sharedRows = k (an all-to-all exchange's own rows first): rows before k
// are the whole layer's bits, rows from k on those of the layer without its
// shared expert; the unfused reference agrees.
TEST_P(MoeFormat, SharedExpertOnTheFirstRowsOnly) {
  std::mt19937 rng(12);
  MoeParams p = params(16, 4, 4, 2);
  MoeFixture f(rng, GetParam(), p, 64, 32, 32);
  const int64_t T = 9, H = 64;
  std::vector<float> x = randomFloats(rng, T * H);
  std::vector<float> whole = fused(2, f, x, T, p);
  MoeFixture routedOnly = f;
  routedOnly.weights.sharedGate = routedOnly.weights.sharedUp =
      routedOnly.weights.sharedDown = WeightView();
  std::vector<float> routed = fused(2, routedOnly, x, T, p);
  for (int64_t k : {int64_t(0), int64_t(1), int64_t(5), T}) {
    MoeParams q = p;
    q.sharedRows = k;
    std::vector<float> y = fused(1, f, x, T, q);
    EXPECT_TRUE(sameBits(y, fused(2, f, x, T, q))) << k << " threads";
    std::vector<float> want(whole.begin(), whole.begin() + k * H);
    want.insert(want.end(), routed.begin() + k * H, routed.end());
    EXPECT_TRUE(sameBits(y, want)) << "sharedRows " << k;
    ThreadPool pool(2);
    Arena arena;
    std::vector<float> unfused(y.size());
    moeForwardUnfused(pool, x.data(), T, f.weights, q, arena, unfused.data());
    EXPECT_LE(relL2(y, unfused), 1e-5) << "unfused, sharedRows " << k;
  }
}

TEST(Moe, NoAllocationAfterWarmup) {
  std::mt19937 rng(10);
  MoeParams p = params(16, 4, 4, 2);
  MoeFixture f(rng, WeightFormat::MXFP4, p, 64, 32, 32);
  std::vector<float> x = randomFloats(rng, 9 * 64), y(9 * 64);
  ThreadPool pool(2);
  Arena arena;
  moeForward(pool, x.data(), 9, f.weights, p, arena, y.data());
  arena.reset();
  const int64_t before = arena.systemAllocations();
  for (int64_t T : {9, 1, 5})
    moeForward(pool, x.data(), T, f.weights, p, arena, y.data());
  EXPECT_EQ(arena.systemAllocations(), before);
}

} // namespace
