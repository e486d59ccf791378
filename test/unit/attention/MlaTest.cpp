//===- MlaTest.cpp - Absorbed MLA vs the unabsorbed reference -------------===//
//
// Tolerances: absorbed vs reference on the same cache and weights, rel L2
// <= 1e-5 (FP32 sums in a different order vs double). A BF16 cache vs an F32
// cache of the same rows, rel L2 <= 1e-2 (BF16 keeps 8 significant bits).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "runtime/cpu/Dequant.h"

#include <algorithm>
#include <cstring>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

/// A kv_b_proj stored in some format, with the floats it decodes to.
struct StoredWeight {
  std::vector<uint8_t> data, scales;
  std::vector<float> decoded;
  WeightView view;
};

StoredWeight storeF32(const std::vector<float> &w, int64_t rows, int64_t cols) {
  StoredWeight s;
  s.data.resize(w.size() * 4);
  std::memcpy(s.data.data(), w.data(), s.data.size());
  s.decoded = w;
  s.view = {WeightFormat::F32, s.data.data(), nullptr, rows, cols};
  return s;
}

StoredWeight storeBf16(const std::vector<float> &w, int64_t rows,
                       int64_t cols) {
  StoredWeight s;
  s.data.resize(w.size() * 2);
  auto *d = reinterpret_cast<uint16_t *>(s.data.data());
  for (size_t i = 0; i < w.size(); ++i) {
    d[i] = floatToBf16(w[i]);
    s.decoded.push_back(bf16ToFloat(d[i]));
  }
  s.view = {WeightFormat::BF16, s.data.data(), nullptr, rows, cols};
  return s;
}

/// Random E2M1 codes packed two per byte (even element in the low nibble)
/// and E8M0 scales 2^-5..2^-2 per 32 columns; `decoded` spells out the
/// OCP MX value table independently of Dequant.cpp.
StoredWeight storeMxfp4(std::mt19937 &rng, int64_t rows, int64_t cols) {
  static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  StoredWeight s;
  s.data.resize(rows * cols / 2);
  s.scales.resize(rows * cols / 32);
  s.decoded.resize(rows * cols);
  std::uniform_int_distribution<int> code(0, 15), exp(122, 125);
  for (auto &e : s.scales)
    e = uint8_t(exp(rng));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2) {
      const uint8_t lo = uint8_t(code(rng)), hi = uint8_t(code(rng));
      s.data[(r * cols + c) / 2] = uint8_t(lo | (hi << 4));
      const float scale =
          std::ldexp(1.0f, int(s.scales[(r * cols + c) / 32]) - 127);
      for (int k = 0; k < 2; ++k) {
        const uint8_t v = k ? hi : lo;
        s.decoded[r * cols + c + k] =
            (v & 8 ? -1.0f : 1.0f) * kE2M1[v & 7] * scale;
      }
    }
  s.view = {WeightFormat::MXFP4, s.data.data(), s.scales.data(), rows, cols};
  return s;
}

struct MlaCase {
  MlaDims dims{4, 24, 8, 16, 64};
  std::vector<int64_t> lengths{45, 12, 70};
  Tokens tok;
  std::vector<float> qNope, qPe, kvB;
  FilledCache cache;
  std::vector<int32_t> topk;
  int64_t topkWidth = 0;

  MlaCase(CacheElem elem, int64_t tokens = 9, uint32_t seed = 3) {
    std::mt19937 rng(seed);
    const int32_t fixed[9][2] = {{0, 44}, {1, 3}, {2, 69}, {0, 10}, {1, 11},
                                 {2, 0},  {0, 0}, {2, 33}, {1, 7}};
    for (int64_t t = 0; t < tokens; ++t) {
      if (t < 9) {
        tok.add(fixed[t][0], fixed[t][1]);
        continue;
      }
      const int32_t s = int32_t(rng() % 3);
      tok.add(s, int32_t(rng() % lengths[s]));
    }
    const int64_t T = tok.size(), H = dims.heads;
    qNope = randomVector(rng, T * H * dims.nopeDim);
    qPe = randomVector(rng, T * H * dims.ropeDim);
    kvB = randomVector(rng, H * (dims.nopeDim + dims.valueDim) * dims.latentDim,
                       1.0f / std::sqrt(float(dims.latentDim)));
    std::mt19937 cacheRng(seed + 100); // same rows for F32 and BF16 caches
    cache =
        fillCache(cacheRng, dims.latentDim + dims.ropeDim, elem, 16, lengths);
  }

  /// Random subsets of each token's causal keys, in random order, with -1
  /// slots scattered among them.
  void randomTopk(int64_t width, uint32_t seed) {
    std::mt19937 rng(seed);
    topkWidth = width;
    topk.assign(tok.size() * width, -1);
    for (int64_t t = 0; t < tok.size(); ++t) {
      std::vector<int32_t> keys(tok.pos[t] + 1);
      for (size_t i = 0; i < keys.size(); ++i)
        keys[i] = int32_t(i);
      std::shuffle(keys.begin(), keys.end(), rng);
      keys.resize(std::min<size_t>(keys.size(), width - width / 4));
      keys.resize(width, -1);
      std::shuffle(keys.begin(), keys.end(), rng);
      std::copy(keys.begin(), keys.end(), topk.begin() + t * width);
    }
  }

  MlaArgs args(const WeightView &w) const {
    MlaArgs a;
    a.dims = dims;
    a.tokens = tok.size();
    a.seqIds = tok.seq.data();
    a.positions = tok.pos.data();
    a.qNope = qNope.data();
    a.qPe = qPe.data();
    a.kvB = w;
    a.latent = cache.cache->view();
    a.topk = topk.empty() ? nullptr : topk.data();
    a.topkWidth = topkWidth;
    a.scale = 1.0f / std::sqrt(float(dims.nopeDim + dims.ropeDim));
    return a;
  }
  int64_t outSize() const { return tok.size() * dims.heads * dims.valueDim; }
};

std::vector<float> absorbed(const MlaArgs &a, int threads) {
  ThreadPool pool(threads);
  Workspace ws;
  std::vector<float> out(a.tokens * a.dims.heads * a.dims.valueDim, NAN);
  mlaAttention(pool, a, out.data(), ws);
  return out;
}

std::vector<float> reference(const MlaArgs &a) {
  std::vector<float> out(a.tokens * a.dims.heads * a.dims.valueDim, NAN);
  mlaAttentionReference(a, out.data());
  return out;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const int64_t kRows = 4 * (24 + 16);

TEST(Mla, DenseMatchesUnabsorbedReference) {
  MlaCase c(CacheElem::F32);
  StoredWeight w = storeF32(c.kvB, kRows, 64);
  EXPECT_LE(relL2(absorbed(c.args(w.view), 2), reference(c.args(w.view))),
            1e-5);
}

TEST(Mla, TopkMatchesUnabsorbedReference) {
  MlaCase c(CacheElem::F32);
  c.randomTopk(16, 5);
  StoredWeight w = storeF32(c.kvB, kRows, 64);
  EXPECT_LE(relL2(absorbed(c.args(w.view), 2), reference(c.args(w.view))),
            1e-5);
}

TEST(Mla, Bf16CacheMatchesReferenceAndF32Cache) {
  MlaCase c16(CacheElem::BF16), c32(CacheElem::F32);
  StoredWeight w = storeF32(c16.kvB, kRows, 64);
  const std::vector<float> got = absorbed(c16.args(w.view), 2);
  EXPECT_LE(relL2(got, reference(c16.args(w.view))), 1e-5);
  const double vsF32 = relL2(got, absorbed(c32.args(w.view), 2));
  EXPECT_LE(vsF32, 1e-2);
  EXPECT_GT(vsF32, 0.0); // the BF16 rows really were rounded
  c16.randomTopk(16, 9);
  EXPECT_LE(relL2(absorbed(c16.args(w.view), 2), reference(c16.args(w.view))),
            1e-5);
}

TEST(Mla, Bf16WeightsMatchReference) {
  MlaCase c(CacheElem::BF16);
  c.randomTopk(12, 4);
  StoredWeight w = storeBf16(c.kvB, kRows, 64);
  const std::vector<float> got = absorbed(c.args(w.view), 2);
  EXPECT_LE(relL2(got, reference(c.args(w.view))), 1e-5);
  StoredWeight decoded = storeF32(w.decoded, kRows, 64);
  EXPECT_TRUE(sameBits(got, absorbed(c.args(decoded.view), 2)));
}

TEST(Mla, Mxfp4WeightsMatchReference) {
  MlaCase c(CacheElem::F32);
  std::mt19937 rng(11);
  StoredWeight w = storeMxfp4(rng, kRows, 64);
  // The hand-packed codes decode to the hand-computed values.
  std::vector<float> row(64);
  for (int64_t r = 0; r < kRows; r += 37) {
    dequantizeRow(w.view, r, row.data());
    for (int64_t i = 0; i < 64; ++i)
      ASSERT_EQ(row[i], w.decoded[r * 64 + i]) << r << "," << i;
  }
  const std::vector<float> got = absorbed(c.args(w.view), 2);
  EXPECT_LE(relL2(got, reference(c.args(w.view))), 1e-5);
  StoredWeight decoded = storeF32(w.decoded, kRows, 64);
  EXPECT_TRUE(sameBits(got, absorbed(c.args(decoded.view), 2)));
  c.randomTopk(16, 6);
  EXPECT_LE(relL2(absorbed(c.args(w.view), 2), reference(c.args(w.view))),
            1e-5);
}

TEST(Mla, TopkCoveringAllKeysEqualsDense) {
  MlaCase c(CacheElem::BF16);
  StoredWeight w = storeBf16(c.kvB, kRows, 64);
  const std::vector<float> dense = absorbed(c.args(w.view), 2);
  // Ascending, -1 padded (the indexer's output order): same blocks, same
  // bits.
  c.topkWidth = 80;
  c.topk.assign(c.tok.size() * c.topkWidth, -1);
  for (int64_t t = 0; t < c.tok.size(); ++t)
    for (int32_t s = 0; s <= c.tok.pos[t]; ++s)
      c.topk[t * c.topkWidth + s] = s;
  EXPECT_TRUE(sameBits(absorbed(c.args(w.view), 2), dense));
  // Shuffled, with holes: the same up to summation order.
  std::mt19937 rng(2);
  for (int64_t t = 0; t < c.tok.size(); ++t)
    std::shuffle(c.topk.begin() + t * c.topkWidth,
                 c.topk.begin() + (t + 1) * c.topkWidth, rng);
  EXPECT_LE(relL2(absorbed(c.args(w.view), 2), dense), 1e-6);
}

TEST(Mla, ThreadCountDoesNotChangeBits) {
  MlaCase c(CacheElem::BF16, /*tokens=*/70);
  StoredWeight w = storeBf16(c.kvB, kRows, 64);
  const std::vector<float> one = absorbed(c.args(w.view), 1);
  EXPECT_TRUE(sameBits(one, absorbed(c.args(w.view), 2)));
  EXPECT_TRUE(sameBits(one, absorbed(c.args(w.view), 3)));
  c.randomTopk(16, 8);
  const std::vector<float> sparse = absorbed(c.args(w.view), 1);
  EXPECT_TRUE(sameBits(sparse, absorbed(c.args(w.view), 2)));
}

TEST(Mla, DecodeHeadGroupingDoesNotChangeBits) {
  // Few tokens: the thread count decides how query heads are grouped (4, 2
  // or 1 per work item), which must not change any head's arithmetic.
  for (int64_t tokens : {1, 2}) {
    MlaCase c(CacheElem::BF16, tokens);
    c.dims.heads = 8;
    c.qNope.resize(tokens * 8 * 24, 0.5f);
    c.qPe.resize(tokens * 8 * 8, -0.25f);
    std::mt19937 rng(13);
    c.kvB = randomVector(rng, 8 * 40 * 64, 0.125f);
    StoredWeight w = storeBf16(c.kvB, 8 * 40, 64);
    const std::vector<float> one = absorbed(c.args(w.view), 1);
    for (int threads : {2, 3, 4, 8})
      EXPECT_TRUE(sameBits(one, absorbed(c.args(w.view), threads)))
          << tokens << " tokens, " << threads << " threads";
    EXPECT_LE(relL2(one, reference(c.args(w.view))), 1e-5);
  }
}

/// Token t of `a` alone, as a decode step would run it.
MlaArgs tokenOf(const MlaArgs &a, int64_t t) {
  MlaArgs one = a;
  one.tokens = 1;
  one.seqIds += t;
  one.positions += t;
  one.qNope += t * a.dims.heads * a.dims.nopeDim;
  one.qPe += t * a.dims.heads * a.dims.ropeDim;
  if (one.topk)
    one.topk += t * a.topkWidth;
  return one;
}

TEST(Mla, Bf16ProductsKeepTheirBitsAcrossThreadsPathsAndBatches) {
  // Under Bf16Activations::BF16 (MatmulBf16.h): steps 1 and 3 and the
  // latent attention multiply in BF16. The result moves from the exact one
  // by BF16 rounding only, and its bits do not depend on the thread count,
  // on the kernel path (scalar reference against AVX-512 BF16 where it
  // runs) or on the other tokens of the call.
  for (CacheElem elem : {CacheElem::F32, CacheElem::BF16})
    for (int64_t topk : {0, 16}) {
      MlaCase c(elem, /*tokens=*/40, /*seed=*/31);
      if (topk)
        c.randomTopk(topk, 17);
      StoredWeight w = storeBf16(c.kvB, kRows, 64);
      const MlaArgs a = c.args(w.view);
      const std::vector<float> exact = absorbed(a, 2);
      std::vector<float> one, scalar;
      {
        Bf16ActivationsScope bf16;
        one = absorbed(a, 1);
        for (int threads : {2, 3})
          EXPECT_TRUE(sameBits(one, absorbed(a, threads))) << threads;
        const int64_t n = a.dims.heads * a.dims.valueDim;
        for (int64_t t = 0; t < a.tokens; ++t) {
          const std::vector<float> alone = absorbed(tokenOf(a, t), 2);
          EXPECT_EQ(std::memcmp(alone.data(), one.data() + t * n, n * 4), 0)
              << "token " << t;
        }
      }
      {
        Bf16ActivationsScope bf16;
        ScalarScope scalarPath;
        scalar = absorbed(a, 2);
      }
      EXPECT_TRUE(sameBits(one, scalar));
      const double err = relL2(one, exact);
      EXPECT_LE(err, 2e-2) << int(elem) << " topk " << topk;
      EXPECT_GT(err, 0.0); // the mode took effect
    }
}

TEST(Mla, ReservedWorkspaceIsEnough) {
  MlaCase c(CacheElem::F32, /*tokens=*/40);
  StoredWeight w = storeF32(c.kvB, kRows, 64);
  ThreadPool pool(2);
  Workspace ws;
  ASSERT_TRUE(ws.reserve(mlaWorkspaceBytes(c.dims, 40, 2)).isOk());
  const size_t reserved = ws.size();
  std::vector<float> out(c.outSize());
  mlaAttention(pool, c.args(w.view), out.data(), ws);
  EXPECT_EQ(ws.size(), reserved);
}

TEST(Mla, ManyTokensSpanChunks) {
  MlaCase c(CacheElem::F32, /*tokens=*/70, /*seed=*/12);
  StoredWeight w = storeBf16(c.kvB, kRows, 64);
  EXPECT_LE(relL2(absorbed(c.args(w.view), 2), reference(c.args(w.view))),
            1e-5);
}

TEST(Mla, SingleKeyGivesItsValue) {
  // One key: softmax weight 1, so out_h = W_UV_h c_kv_0.
  MlaCase c(CacheElem::F32, /*tokens=*/7);
  StoredWeight w = storeF32(c.kvB, kRows, 64);
  const int64_t t = 6; // token (seq 0, pos 0)
  ASSERT_EQ(c.tok.pos[t], 0);
  const std::vector<float> out = absorbed(c.args(w.view), 2);
  const std::vector<float> &ckv = c.cache.rows[0];
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t v = 0; v < 16; ++v) {
      double want = 0;
      for (int64_t l = 0; l < 64; ++l)
        want += double(c.kvB[(h * 40 + 24 + v) * 64 + l]) * ckv[l];
      EXPECT_NEAR(out[(t * 4 + h) * 16 + v], want, 1e-5);
    }
}

TEST(Mla, RollbackThenReappendMatchesFreshCache) {
  // A speculative round appends 5 rows, 2 are rejected: truncate, then the
  // next round appends new rows over them (crossing a page boundary).
  const int64_t width = 64 + 8, pageRows = 4;
  std::mt19937 rng(21);
  const std::vector<float> prefix = randomVector(rng, 18 * width);
  const std::vector<float> rejected = randomVector(rng, 5 * width);
  const std::vector<float> accepted = randomVector(rng, 6 * width);
  auto append = [&](PagedKvCache &cache, int32_t from, int64_t n,
                    const std::vector<float> &rows) {
    ASSERT_TRUE(cache.ensure(0, from + n).isOk());
    std::vector<int32_t> seq(n, 0), pos(n);
    for (int64_t i = 0; i < n; ++i)
      pos[i] = from + int32_t(i);
    kvAppend(cache.view(), seq.data(), pos.data(), n, rows.data());
  };
  PagedKvCache spec(width, CacheElem::BF16, pageRows);
  append(spec, 0, 18, prefix);
  append(spec, 18, 5, rejected);
  spec.truncate(0, 18);
  EXPECT_EQ(spec.rows(0), 18);
  append(spec, 18, 6, accepted);
  PagedKvCache fresh(width, CacheElem::BF16, pageRows);
  append(fresh, 0, 18, prefix);
  append(fresh, 18, 6, accepted);

  MlaCase c(CacheElem::F32, /*tokens=*/1);
  StoredWeight w = storeF32(c.kvB, kRows, 64);
  Tokens tok;
  for (int32_t p = 18; p < 24; ++p)
    tok.add(0, p);
  c.tok = tok;
  c.qNope = randomVector(rng, 6 * 4 * 24);
  c.qPe = randomVector(rng, 6 * 4 * 8);
  MlaArgs a = c.args(w.view);
  a.latent = spec.view();
  const std::vector<float> afterRollback = absorbed(a, 2);
  a.latent = fresh.view();
  EXPECT_TRUE(sameBits(afterRollback, absorbed(a, 2)));
}

} // namespace
