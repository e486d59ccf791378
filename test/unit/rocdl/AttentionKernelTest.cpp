//===- AttentionKernelTest.cpp - Attention kernels against the CPU --------===//
//
// Each test builds a kernel from its KernelSpec, runs it in the kernel
// interpreter and compares with the runtime's CPU function on the same
// random data: tokens of two cache slots at different positions (several
// prefill-like rows of one sequence, single rows of the other, contexts
// crossing a 256-key tile), f32 and BF16 caches. The CPU caches are paged
// (cpu::PagedKvCache, sequence id = slot); the device caches are pages of
// 16 rows in the kernels' paged layout, the pages of both slots shuffled
// through the page table (so every context crosses page boundaries between
// pages that are not neighbours), holding the same rows, every unwritten
// position NaN so that a read past a token's position shows.
//
// Tolerances: attention outputs |gpu - cpu| <= 1e-4 (1 + |cpu|) (f32 math
// in both, different summation orders and exp through exp2); kv_append
// bit-exact; indexer index lists identical (the data also holds exactly
// tied scores, which both break towards the lower position).
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"
#include "tools/gpu-interp/KernelInterpreter.h"

#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/attention/Attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;
using namespace kiln::rocdl;
using interp::KernelArg;

namespace {

constexpr int64_t kCapacity = 320;
constexpr int64_t kSlots = 2;
constexpr int64_t kPageRows = 16;

/// (slot, position) of each token: prefill-like rows of slot 0, a first
/// row, a decode row past one tile and a row at a tile boundary of slot 1.
const std::vector<int32_t> kSeq = {0, 0, 0, 1, 1, 1};
const std::vector<int32_t> kPos = {17, 18, 39, 0, 299, 256};
/// Rows held per slot.
const int64_t kLength[kSlots] = {40, 300};

std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo = -1.0f,
                                float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

constexpr int64_t kPagesPerSlot = kCapacity / kPageRows;

/// The device's page table [slots, kPagesPerSlot]: the slots' pages
/// interleaved and reversed, so no two pages of a slot are neighbours.
const std::vector<int32_t> &pageTable() {
  static const std::vector<int32_t> table = [] {
    std::vector<int32_t> t(size_t(kSlots * kPagesPerSlot));
    for (int64_t s = 0; s < kSlots; ++s)
      for (int64_t j = 0; j < kPagesPerSlot; ++j)
        t[size_t(s * kPagesPerSlot + j)] =
            int32_t(kSlots * (kPagesPerSlot - 1 - j) + s);
    return t;
  }();
  return table;
}

/// The device row holding position `p` of slot `s`.
int64_t deviceRow(int32_t s, int32_t p) {
  return int64_t(pageTable()[size_t(s * kPagesPerSlot + p / kPageRows)]) *
             kPageRows +
         p % kPageRows;
}

/// The paged addressing every cache kernel ends with: capacity, page
/// table, page rows.
void appendPaging(std::vector<KernelArg> &args) {
  static std::vector<int32_t> table = pageTable();
  args.push_back(KernelArg::i32(kCapacity));
  args.push_back(KernelArg::of(table));
  args.push_back(KernelArg::i32(kPageRows));
}
std::vector<KernelArg> withPaging(std::vector<KernelArg> args) {
  appendPaging(args);
  return args;
}

/// One cache, on the CPU (paged) and the device (paged, pageTable()).
struct TestCache {
  TestCache(int64_t width, bool bf16)
      : width(width), bf16(bf16),
        cpu(width, bf16 ? cpu::CacheElem::BF16 : cpu::CacheElem::F32,
            kPageRows),
        device(size_t(kSlots * kCapacity * width * (bf16 ? 2 : 4)), 0xFF) {}

  /// Fills slot rows [0, kLength) with `rows(slot, pos)` (width values).
  void fill(const std::function<std::vector<float>(int32_t, int32_t)> &rows) {
    for (int32_t s = 0; s < kSlots; ++s) {
      EXPECT_TRUE(cpu.ensure(s, kLength[s]).isOk());
      for (int32_t p = 0; p < kLength[s]; ++p) {
        std::vector<float> v = rows(s, p);
        cpu::kvAppend(cpu.view(), &s, &p, 1, v.data());
        std::memcpy(device.data() + deviceRow(s, p) * width * elemBytes(),
                    cpu.view().row(s, p), size_t(width * elemBytes()));
      }
    }
  }
  int64_t elemBytes() const { return bf16 ? 2 : 4; }
  KernelArg arg() { return KernelArg::of(device); }

  int64_t width;
  bool bf16;
  cpu::PagedKvCache cpu;
  std::vector<uint8_t> device;
};

void fillRandom(TestCache &cache, std::mt19937 &rng) {
  cache.fill(
      [&](int32_t, int32_t) { return randomFloats(rng, size_t(cache.width)); });
}

/// max over i of |a - b| / (1 + |b|).
double relativeError(const std::vector<float> &a, const std::vector<float> &b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double e = std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(b[i]));
    if (!(e <= worst))
      worst = e; // NaN sticks
  }
  return worst;
}

std::vector<int32_t> seqs() { return kSeq; }
std::vector<int32_t> positions() { return kPos; }
int64_t tokens() { return int64_t(kSeq.size()); }

// -- kv_append ---------------------------------------------------------------

class KvAppendTest : public ::testing::TestWithParam<bool> {};

TEST_P(KvAppendTest, MatchesCpuBitForBit) {
  bool bf16 = GetParam();
  const int64_t width = 72;
  std::mt19937 rng(7);
  TestCache cache(width, bf16);
  fillRandom(cache, rng);
  // New rows, one of them NaN and one exactly half way between BF16 values.
  std::vector<int32_t> seq = {0, 1, 1}, pos = {40, 300, 5};
  std::vector<float> values = randomFloats(rng, size_t(3 * width), -100, 100);
  values[3] = std::nanf("");
  uint32_t tie = 0x3f808000u; // 1.00390625: rounds to even
  std::memcpy(&values[4], &tie, 4);
  for (int32_t s = 0; s < kSlots; ++s)
    ASSERT_TRUE(cache.cpu.ensure(s, kLength[s] + 1).isOk());
  cpu::kvAppend(cache.cpu.view(), seq.data(), pos.data(), 3, values.data());

  KvAppendParams kp;
  kp.w = width;
  kp.bf = bf16;
  KernelSpec spec = makeSpec(kp);
  ASSERT_EQ(spec.validate(), "");
  ASSERT_EQ(interp::runKernel(
                spec, {3, 1, 1},
                withPaging({cache.arg(), KernelArg::of(seq), KernelArg::of(pos),
                            KernelArg::of(values)})),
            "");
  for (int32_t s = 0; s < kSlots; ++s)
    for (int32_t p = 0; p <= int32_t(kLength[s]); ++p)
      ASSERT_EQ(std::memcmp(cache.device.data() +
                                deviceRow(s, p) * width * cache.elemBytes(),
                            cache.cpu.view().row(s, p),
                            size_t(width * cache.elemBytes())),
                0)
          << "slot " << s << " position " << p;
}

INSTANTIATE_TEST_SUITE_P(Cache, KvAppendTest, ::testing::Values(false, true));

// -- GQA
// -----------------------------------------------------------------------

struct GqaShape {
  int64_t qh, kvh, d, dv;
  bool bf16;
};

class GqaTest : public ::testing::TestWithParam<GqaShape> {};

/// Runs the GPU kernel; returns out.
std::vector<float> runGqa(const GqaShape &s, float scale, std::vector<float> &q,
                          TestCache &k, TestCache &v) {
  GqaAttentionParams gp;
  gp.qh = s.qh;
  gp.kvh = s.kvh;
  gp.d = s.d;
  gp.dv = s.dv;
  gp.bf = s.bf16;
  gp.scale = scale;
  gp.waves = 4;
  KernelSpec spec = makeSpec(gp);
  EXPECT_EQ(spec.validate(), "");
  std::vector<int32_t> seq = seqs(), pos = positions();
  std::vector<float> out(size_t(tokens() * s.qh * s.dv), -7.0f);
  EXPECT_EQ(
      interp::runKernel(
          spec, {tokens(), s.qh, 1},
          withPaging({KernelArg::of(q), k.arg(), v.arg(), KernelArg::of(seq),
                      KernelArg::of(pos), KernelArg::of(out)})),
      "");
  return out;
}

TEST_P(GqaTest, MatchesCpu) {
  GqaShape s = GetParam();
  std::mt19937 rng(11);
  TestCache k(s.kvh * s.d, s.bf16), v(s.kvh * s.dv, s.bf16);
  fillRandom(k, rng);
  fillRandom(v, rng);
  std::vector<float> q =
      randomFloats(rng, size_t(tokens() * s.qh * s.d), -2, 2);
  float scale = 1.0f / std::sqrt(float(s.d));

  cpu::GqaArgs a;
  std::vector<int32_t> seq = seqs(), pos = positions();
  a.tokens = tokens();
  a.seqIds = seq.data();
  a.positions = pos.data();
  a.qHeads = s.qh;
  a.kvHeads = s.kvh;
  a.headDim = s.d;
  a.valueDim = s.dv;
  a.q = q.data();
  a.keys = k.cpu.view();
  a.values = v.cpu.view();
  a.scale = scale;
  cpu::ThreadPool pool(1);
  cpu::Workspace ws;
  std::vector<float> ref(size_t(tokens() * s.qh * s.dv));
  cpu::gqaAttention(pool, a, ref.data(), ws);

  std::vector<float> out = runGqa(s, scale, q, k, v);
  double err = relativeError(out, ref);
  RecordProperty("max_rel_error", std::to_string(err));
  std::printf("gqa qh%lld kvh%lld d%lld dv%lld bf%d: max error %.3g\n",
              (long long)s.qh, (long long)s.kvh, (long long)s.d,
              (long long)s.dv, int(s.bf16), err);
  EXPECT_LE(err, 1e-4);

  // Negative check: a wrong scale is caught.
  std::vector<float> wrong = runGqa(s, scale * 1.5f, q, k, v);
  EXPECT_GT(relativeError(wrong, ref), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GqaTest,
                         ::testing::Values(GqaShape{6, 2, 32, 24, false},
                                           GqaShape{6, 2, 32, 24, true},
                                           GqaShape{4, 1, 128, 128, true},
                                           GqaShape{2, 2, 18, 300, false}));

// -- MLA
// -----------------------------------------------------------------------

struct MlaShape {
  int64_t h, n, r, v, l;
  int wf; // 0 f32, 1 bf16, 2 mxfp4, 3 fp8 block-128
  bool bf16Cache, topk;
  int64_t tt;
  int64_t sp = 0;  // key splits of the attention (decode plans), merged by
                   // the combine stage
  bool mf = false; // stage 1 on MFMAs, 16 heads a workgroup
};

class MlaTest : public ::testing::TestWithParam<MlaShape> {};

TEST_P(MlaTest, MatchesCpu) {
  MlaShape s = GetParam();
  std::mt19937 rng(23);
  const int64_t rows = s.h * (s.n + s.v);
  TestCache latent(s.l + s.r, s.bf16Cache);
  fillRandom(latent, rng);
  std::vector<float> qNope =
      randomFloats(rng, size_t(tokens() * s.h * s.n), -0.5f, 0.5f);
  std::vector<float> qPe = randomFloats(rng, size_t(tokens() * s.h * s.r));

  // kv_b in the requested format.
  std::vector<float> wF32;
  std::vector<uint16_t> wBf16;
  std::vector<uint8_t> wMx, wScales, wFp8;
  std::vector<float> wFp8Scales;
  cpu::WeightView kvB;
  kvB.rows = rows;
  kvB.cols = s.l;
  if (s.wf == 3) {
    wFp8.resize(size_t(rows * s.l));
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t &x : wFp8) {
      x = uint8_t(byte(rng));
      if ((x & 0x7f) == 0x7f) // NaN
        x = uint8_t(x - 1);
    }
    wFp8Scales = randomFloats(
        rng, size_t(((rows + 127) / 128) * ((s.l + 127) / 128)), 1e-3f, 1e-2f);
    kvB.format = cpu::WeightFormat::FP8;
    kvB.data = wFp8.data();
    kvB.scales = wFp8Scales.data();
  } else if (s.wf == 2) {
    wMx.resize(size_t(rows * s.l / 2));
    wScales.resize(size_t(rows * s.l / 32));
    std::uniform_int_distribution<int> byte(0, 255), scale(117, 123);
    for (uint8_t &x : wMx)
      x = uint8_t(byte(rng));
    for (uint8_t &x : wScales)
      x = uint8_t(scale(rng));
    kvB.format = cpu::WeightFormat::MXFP4;
    kvB.data = wMx.data();
    kvB.scales = wScales.data();
  } else {
    wF32 = randomFloats(rng, size_t(rows * s.l), -0.2f, 0.2f);
    if (s.wf == 1) {
      for (float x : wF32)
        wBf16.push_back(cpu::floatToBf16(x));
      kvB.format = cpu::WeightFormat::BF16;
      kvB.data = wBf16.data();
    } else {
      kvB.format = cpu::WeightFormat::F32;
      kvB.data = wF32.data();
    }
  }

  // DSA lists: some positions of each token (<= its own), -1 padded, in
  // no particular order.
  const int64_t k = 24;
  std::vector<int32_t> topk(size_t(tokens() * k), -1);
  for (int64_t t = 0; t < tokens(); ++t) {
    std::uniform_int_distribution<int32_t> any(0, kPos[t]);
    int64_t used = std::min<int64_t>(k - 3, kPos[t] + 1);
    for (int64_t i = 0; i < used; ++i)
      topk[t * k + (i * 7) % k] = any(rng);
  }

  std::vector<int32_t> seq = seqs(), pos = positions();
  cpu::MlaArgs a;
  a.dims = {s.h, s.n, s.r, s.v, s.l};
  a.tokens = tokens();
  a.seqIds = seq.data();
  a.positions = pos.data();
  a.qNope = qNope.data();
  a.qPe = qPe.data();
  a.kvB = kvB;
  a.latent = latent.cpu.view();
  if (s.topk) {
    a.topk = topk.data();
    a.topkWidth = k;
  }
  a.scale = 1.0f / std::sqrt(float(s.n + s.r));
  cpu::ThreadPool pool(1);
  cpu::Workspace ws;
  std::vector<float> ref(size_t(tokens() * s.h * s.v));
  cpu::mlaAttention(pool, a, ref.data(), ws);

  // The three launches of the lowering (GpuLowerAttention.cpp).
  MlaAttentionParams shape;
  shape.h = s.h;
  shape.n = s.n;
  shape.r = s.r;
  shape.v = s.v;
  shape.l = s.l;
  MlaAttentionParams absorbParams = shape, attendParams = shape,
                     expandParams = shape;
  absorbParams.s = 0;
  absorbParams.wf = s.wf;
  absorbParams.tt = s.tt;
  attendParams.s = 1;
  attendParams.bf = s.bf16Cache;
  attendParams.k = s.topk ? k : 0;
  attendParams.scale = a.scale;
  attendParams.waves = 4;
  expandParams.s = 2;
  expandParams.wf = s.wf;
  expandParams.tt = s.tt;
  KernelSpec absorb = makeSpec(absorbParams), attend = makeSpec(attendParams),
             expand = makeSpec(expandParams);
  for (const KernelSpec *spec : {&absorb, &attend, &expand})
    ASSERT_EQ(spec->validate(), "");

  std::vector<KernelArg> weights;
  if (s.wf == 3)
    weights = {KernelArg::of(wFp8), KernelArg::of(wFp8Scales)};
  else if (s.wf == 2)
    weights = {KernelArg::of(wMx), KernelArg::of(wScales)};
  else if (s.wf == 1)
    weights = {KernelArg::of(wBf16)};
  else
    weights = {KernelArg::of(wF32)};
  std::vector<float> qLat(size_t(tokens() * s.h * (s.l + s.r)), NAN);
  std::vector<float> oLat(size_t(tokens() * s.h * s.l), NAN);
  std::vector<float> out(size_t(tokens() * s.h * s.v), NAN);
  int64_t tiles = (tokens() + s.tt - 1) / s.tt;

  std::vector<KernelArg> args = {KernelArg::of(qNope), KernelArg::of(qPe)};
  args.insert(args.end(), weights.begin(), weights.end());
  args.push_back(KernelArg::of(qLat));
  args.push_back(KernelArg::i32(int32_t(tokens())));
  ASSERT_EQ(interp::runKernel(absorb, {tiles, s.h, 1}, args), "");

  args = {KernelArg::of(qLat), latent.arg(), KernelArg::of(seq),
          KernelArg::of(pos)};
  if (s.topk)
    args.push_back(KernelArg::of(topk));
  args.push_back(KernelArg::of(oLat));
  appendPaging(args);
  ASSERT_EQ(interp::runKernel(attend, {tokens(), s.h, 1}, args), "");
  std::vector<float> oLatRight = oLat;
  if (s.mf) {
    // 16 heads a workgroup on f32 MFMAs (decode), alone or with key splits
    // merged by the combine stage; close to the one-pass vector kernel.
    MlaAttentionParams mfParams = attendParams, combineParams = shape;
    mfParams.mf = 1;
    mfParams.sp = s.sp;
    combineParams.s = 3;
    combineParams.sp = s.sp;
    KernelSpec mfSpec = makeSpec(mfParams);
    ASSERT_EQ(mfSpec.validate(), "");
    const int64_t groups = (s.h + 15) / 16;
    std::vector<float> mfOut(
        s.sp > 1 ? size_t(tokens() * s.h * s.sp * (s.l + 2)) : oLat.size(),
        NAN);
    std::vector<KernelArg> mfArgs(args.begin(), args.end());
    mfArgs[s.topk ? 5 : 4] = KernelArg::of(mfOut);
    ASSERT_EQ(interp::runKernel(mfSpec,
                                {tokens(), groups, std::max<int64_t>(1, s.sp)},
                                mfArgs),
              "");
    std::vector<float> merged = mfOut;
    if (s.sp > 1) {
      KernelSpec combine = makeSpec(combineParams);
      merged.assign(oLat.size(), NAN);
      ASSERT_EQ(
          interp::runKernel(combine, {tokens(), s.h, 1},
                            {KernelArg::of(mfOut), KernelArg::of(merged)}),
          "");
    }
    double mfErr = relativeError(merged, oLatRight);
    std::printf("mla mfma sp%lld: o_lat within %.3g of the vector kernel\n",
                (long long)s.sp, mfErr);
    EXPECT_LE(mfErr, 1e-5);
    oLatRight = merged;
    oLat = merged;
  } else if (s.sp > 1) {
    // Flash decoding: each (token, head)'s keys over sp workgroups (some
    // empty for the short rows, one straddling the 256-key tile for the
    // long ones), then the combine; close to the one-pass result.
    MlaAttentionParams splitParams = attendParams, combineParams = shape;
    splitParams.sp = s.sp;
    combineParams.s = 3;
    combineParams.sp = s.sp;
    KernelSpec split = makeSpec(splitParams), combine = makeSpec(combineParams);
    ASSERT_EQ(split.validate(), "");
    ASSERT_EQ(combine.validate(), "");
    std::vector<float> parts(size_t(tokens() * s.h * s.sp * (s.l + 2)), NAN);
    std::vector<KernelArg> splitArgs(args.begin(), args.end());
    splitArgs[s.topk ? 5 : 4] = KernelArg::of(parts);
    ASSERT_EQ(interp::runKernel(split, {tokens(), s.h, s.sp}, splitArgs), "");
    std::vector<float> merged(oLat.size(), NAN);
    ASSERT_EQ(interp::runKernel(combine, {tokens(), s.h, 1},
                                {KernelArg::of(parts), KernelArg::of(merged)}),
              "");
    double splitErr = relativeError(merged, oLatRight);
    std::printf("mla sp%lld: o_lat within %.3g of one pass\n", (long long)s.sp,
                splitErr);
    EXPECT_LE(splitErr, 1e-5);
    oLatRight = merged; // the rest of the stages run on the merged result
    oLat = merged;
  }
  // Negative check: a wrong scale in the attention is caught.
  MlaAttentionParams wrongParams = attendParams;
  wrongParams.scale = a.scale * 1.5f;
  KernelSpec wrong = makeSpec(wrongParams);
  ASSERT_EQ(interp::runKernel(wrong, {tokens(), s.h, 1}, args), "");
  std::vector<float> oLatWrong = oLat;
  oLat = oLatRight;

  args = {KernelArg::of(oLat)};
  args.insert(args.end(), weights.begin(), weights.end());
  args.push_back(KernelArg::of(out));
  args.push_back(KernelArg::i32(int32_t(tokens())));
  ASSERT_EQ(interp::runKernel(expand, {tiles, s.h, 1}, args), "");

  std::vector<float> outRight = out;
  oLat = oLatWrong;
  ASSERT_EQ(interp::runKernel(expand, {tiles, s.h, 1}, args), "");
  EXPECT_GT(relativeError(out, ref), 1e-3);
  out = outRight;

  double err = relativeError(out, ref);
  std::printf("mla h%lld l%lld wf%d bf%d topk%d tt%lld: max error %.3g\n",
              (long long)s.h, (long long)s.l, s.wf, int(s.bf16Cache),
              int(s.topk), (long long)s.tt, err);
  EXPECT_LE(err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlaTest,
    ::testing::Values(MlaShape{3, 16, 8, 12, 64, 1, false, false, 4},
                      MlaShape{3, 16, 8, 12, 64, 1, true, true, 1},
                      MlaShape{2, 16, 8, 12, 64, 2, true, false, 4},
                      MlaShape{2, 16, 8, 12, 64, 2, false, true, 8},
                      MlaShape{2, 12, 16, 20, 320, 0, true, true, 2},
                      // GLM-5 head dims (two heads).
                      MlaShape{2, 192, 64, 256, 512, 2, true, true, 8},
                      MlaShape{2, 192, 64, 256, 512, 1, false, false, 1},
                      MlaShape{3, 16, 8, 12, 200, 3, true, true, 4},
                      MlaShape{2, 192, 64, 256, 512, 3, false, true, 8},
                      // Key splits: the fixture's decode (2), GLM-5.2's (8),
                      // more splits than some rows have keys (16).
                      MlaShape{3, 16, 8, 12, 64, 1, true, true, 1, 2},
                      MlaShape{2, 192, 64, 256, 512, 2, true, true, 1, 8},
                      MlaShape{3, 16, 8, 12, 200, 0, false, false, 1, 16},
                      // MFMA over 16 heads: the fixture's shape (8 heads,
                      // 64 + 16) with its 2 splits, GLM-5's with 8, 20
                      // heads (a full and a partial group) without splits.
                      MlaShape{8, 32, 16, 32, 64, 1, true, true, 1, 2, true},
                      MlaShape{2, 192, 64, 256, 512, 2, true, true, 1, 8, true},
                      MlaShape{20, 16, 16, 12, 128, 0, false, false, 1, 0,
                               true}));

// -- Indexer
// -------------------------------------------------------------------

struct IndexerShape {
  int64_t h, d, k;
  bool bf16;
  bool allEqual = false; // every key the same: all scores tie
  bool mf = false;       // scores on f32 MFMAs, 16 keys x 16 heads a tile
};

class IndexerTest : public ::testing::TestWithParam<IndexerShape> {};

TEST_P(IndexerTest, MatchesCpu) {
  IndexerShape s = GetParam();
  std::mt19937 rng(31);
  TestCache keys(s.d, s.bf16);
  // Every 9th row repeats an earlier one: exactly tied scores.
  std::vector<std::vector<float>> rows[kSlots];
  keys.fill([&](int32_t slot, int32_t p) {
    std::vector<float> r = s.allEqual && p > 0 ? rows[slot][0]
                           : p >= 9 && p % 9 == 0
                               ? rows[slot][size_t(p - 9)]
                               : randomFloats(rng, size_t(s.d));
    rows[slot].push_back(r);
    return r;
  });
  std::vector<float> q = randomFloats(rng, size_t(tokens() * s.h * s.d));
  std::vector<float> w = randomFloats(rng, size_t(tokens() * s.h), -0.3f, 1.0f);
  float scale = 1.0f / std::sqrt(float(s.d));

  std::vector<int32_t> seq = seqs(), pos = positions();
  cpu::IndexerArgs a;
  a.tokens = tokens();
  a.seqIds = seq.data();
  a.positions = pos.data();
  a.heads = s.h;
  a.dim = s.d;
  a.q = q.data();
  a.weights = w.data();
  a.keys = keys.cpu.view();
  a.scale = scale;
  a.k = s.k;
  cpu::ThreadPool pool(1);
  cpu::Workspace ws;
  std::vector<int32_t> ref(size_t(tokens() * s.k));
  cpu::indexerTopK(pool, a, ref.data(), ws);

  const int64_t sp = 2;
  IndexerTopKParams scoreParams, selectParams;
  scoreParams.s = 0;
  scoreParams.h = s.h;
  scoreParams.d = s.d;
  scoreParams.bf = s.bf16;
  scoreParams.sp = sp;
  scoreParams.scale = scale;
  scoreParams.waves = 4;
  if (s.mf)
    scoreParams.mf = 1;
  selectParams.s = 1;
  selectParams.k = s.k;
  KernelSpec score = makeSpec(scoreParams), select = makeSpec(selectParams);
  ASSERT_EQ(score.validate(), "");
  ASSERT_EQ(select.validate(), "");
  std::vector<float> scores(size_t(tokens() * kCapacity), NAN);
  std::vector<int32_t> out(size_t(tokens() * s.k), -7);
  // Both stages, scores then selection; "" when both ran.
  auto runIndexer = [&] {
    std::string error = interp::runKernel(
        score, {tokens(), sp, 1},
        withPaging({KernelArg::of(q), KernelArg::of(w), keys.arg(),
                    KernelArg::of(seq), KernelArg::of(pos),
                    KernelArg::of(scores)}));
    if (error.empty())
      error =
          interp::runKernel(select, {tokens(), 1, 1},
                            {KernelArg::of(scores), KernelArg::of(pos),
                             KernelArg::of(out), KernelArg::i32(kCapacity)});
    return error;
  };
  ASSERT_EQ(runIndexer(), "");
  for (int64_t t = 0; t < tokens(); ++t)
    for (int64_t i = 0; i < s.k; ++i)
      ASSERT_EQ(out[t * s.k + i], ref[t * s.k + i])
          << "token " << t << " (position " << kPos[t] << ") slot " << i;
  // The scores themselves, where the CPU's order needs them to be right:
  // every causal position written, none past it.
  for (int64_t t = 0; t < tokens(); ++t)
    for (int64_t p = 0; p < kCapacity; ++p)
      ASSERT_EQ(std::isnan(scores[t * kCapacity + p]), p > kPos[t])
          << "token " << t << " position " << p;
  if (s.allEqual) // ties go to the lowest positions
    EXPECT_EQ(out[4 * s.k + s.k - 1], int32_t(s.k - 1));

  // Negative check: negated head weights select other positions.
  for (float &x : w)
    x = -x;
  ASSERT_EQ(runIndexer(), "");
  if (!s.allEqual)
    EXPECT_NE(out, ref);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IndexerTest,
    ::testing::Values(
        IndexerShape{4, 32, 16, false}, IndexerShape{4, 32, 19, true},
        IndexerShape{3, 30, 64, false}, IndexerShape{2, 16, 257, true},
        IndexerShape{20, 8, 33, false}, IndexerShape{32, 128, 64, true},
        IndexerShape{4, 32, 16, true, true},
        // MFMA scores: a partial head
        // tile (4, 20), two tiles (32),
        // 257 > the 256-key tile.
        IndexerShape{4, 32, 16, false, false, true},
        IndexerShape{20, 16, 33, false, false, true},
        IndexerShape{2, 16, 257, true, false, true},
        IndexerShape{32, 128, 64, true, false, true},
        IndexerShape{4, 32, 16, true, true, true}));

} // namespace
