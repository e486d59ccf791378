//===- MatmulBf16Test.cpp - BF16 weights with BF16 activations ------------===//
//
// The contract of MatmulBf16.h, checked four ways: the rounding of the
// activations against hand-worked bits; the outputs against a double sum
// over the same BF16 values (so only the float accumulation may differ,
// within a bound); the flushes of subnormal products, which only the
// instruction's semantics explain; and bit-identity across the scalar and
// AVX-512 BF16 paths, threads, batch sizes, row ranges and both weight
// layouts. What the rounding costs against the exact path is bounded too.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulBf16.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Matmul.h"
#include "support/FloatFormats.h"
#include "test/unit/cpu/CpuTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;
using namespace kiln::cpu::test;

namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(MatmulBf16, RoundsAsTheContractSays) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3F800000, 0x3F80}, // 1
      {0x3F808000, 0x3F80}, // a tie goes to the even neighbour, down
      {0x3F818000, 0x3F82}, // ... and up
      {0x3F808001, 0x3F81}, // just above a tie
      {0xBF807FFF, 0xBF80}, // just below one, negative
      {0x007FFFFF, 0x0000}, // the largest subnormal is zero, not 2^-126
      {0x80000001, 0x8000}, // a negative subnormal is -0
      {0x00800000, 0x0080}, // the smallest normal stays
      {0x7F7FFFFF, 0x7F80}, // the largest float rounds to infinity
      {0xFF800000, 0xFF80}, // -infinity
      {0x7F800001, 0x7FC0}, // a signalling NaN becomes quiet
      {0xFFC12345, 0xFFC1}, // a quiet NaN keeps its sign and top bits
  };
  std::vector<float> row;
  std::vector<uint16_t> want;
  for (const Case &c : cases) {
    EXPECT_EQ(roundToBf16(fromBits(c.in)), c.out) << std::hex << c.in;
    row.push_back(fromBits(c.in));
    want.push_back(c.out);
  }
  std::mt19937 rng(21);
  for (float f : randomFloats(rng, 33, -1e3f, 1e3f)) { // K = 45: a tail
    row.push_back(f);
    want.push_back(roundToBf16(f));
  }
  const int64_t K = int64_t(row.size());
  want.resize(size_t(bf16RowLength(K)), 0);
  std::vector<uint16_t> got(want.size(), 0xFFFF);
  roundRowBf16Scalar(row.data(), K, got.data());
  EXPECT_EQ(got, want);
  if (!useAvx512Bf16())
    GTEST_SKIP() << "no AVX-512 BF16 here: " << cpuSummary();
  std::fill(got.begin(), got.end(), 0xFFFF);
  roundRowBf16Avx512(row.data(), K, got.data());
  EXPECT_EQ(got, want);
}

TEST(MatmulBf16, RandomBitsRoundAsTheScalar) {
  if (!useAvx512Bf16())
    GTEST_SKIP() << "no AVX-512 BF16 here: " << cpuSummary();
  // Every class of float: random bits, then the exponent forced to zero
  // (subnormals) or all ones (infinities, NaN) in a third each.
  std::mt19937 rng(5);
  const int64_t K = 1 << 20;
  std::vector<float> row(static_cast<size_t>(K));
  for (float &f : row) {
    uint32_t u = uint32_t(rng());
    if (u % 3 == 0)
      u &= 0x807FFFFFu;
    else if (u % 3 == 1)
      u |= 0x7F800000u;
    std::memcpy(&f, &u, 4);
  }
  std::vector<uint16_t> want(static_cast<size_t>(K)), got(want.size());
  roundRowBf16Scalar(row.data(), K, want.data());
  roundRowBf16Avx512(row.data(), K, got.data());
  EXPECT_EQ(got, want);
}

/// y against Σ bf16(x_i) w_i in double: the float accumulation of
/// MatmulBf16.h errs at most (K / 16 + 4) * 2^-24 * Σ |terms| (one rounding
/// per product in a lane, then the tree's four).
void expectNearBf16Reference(const std::vector<float> &y,
                             const std::vector<float> &x, int64_t T,
                             const TestWeight &w, const std::string &what) {
  const int64_t n = w.view.rows, k = w.view.cols;
  const std::vector<float> wd = w.dequantized();
  int failures = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double term =
            double(kiln::bf16ToFloat(roundToBf16(x[t * k + i]))) *
            wd[r * k + i];
        sum += term;
        mag += std::fabs(term);
      }
      const double bound = double(k / 16 + 4) * std::ldexp(1.0, -24) * mag;
      const double err = std::fabs(double(y[t * n + r]) - sum);
      if (!(err <= bound) && failures++ < 5)
        ADD_FAILURE() << what << " t=" << t << " n=" << r << " got "
                      << y[t * n + r] << " want " << sum << " bound " << bound;
    }
  }
}

struct Shape {
  int64_t n, k;
};

TEST(MatmulBf16, EveryPathThreadAndBatchGivesTheSameBits) {
  Bf16ActivationsScope bf16;
  ThreadPool one(1), two(2);
  std::mt19937 rng(22);
  for (Shape s : std::vector<Shape>{
           {4, 32}, {5, 45}, {37, 96}, {68, 544}, {9, 1056}, {12, 70}}) {
    TestWeight rows = randomWeight(rng, WeightFormat::BF16, s.n, s.k);
    const bool panelable = kiln::panelable(s.n, s.k);
    for (int64_t T : {1, 2, 3, 4, 5, 8, 9, 17, 70}) {
      const std::string what = "N=" + std::to_string(s.n) +
                               " K=" + std::to_string(s.k) +
                               " T=" + std::to_string(T);
      std::vector<float> x = randomFloats(rng, T * s.k, -2.0f, 2.0f);
      std::vector<float> y = runMatmul(one, x, T, rows.view);
      expectNearBf16Reference(y, x, T, rows, what);
      expectSameOnThreadsPathsAndBatch(y, x, T, rows.view, what);
      if (panelable) {
        TestWeight panels = inPanels(rows);
        EXPECT_TRUE(sameBits(y, runMatmul(two, x, T, panels.view)))
            << what << " panels";
        ScalarScope scalar;
        EXPECT_TRUE(sameBits(y, runMatmul(one, x, T, panels.view)))
            << what << " panels scalar";
      }
    }
  }
}

TEST(MatmulBf16, SubnormalProductsAndInputsAreFlushed) {
  // Products below FP32's normal range, BF16 subnormal weights and FP32
  // subnormal activations all count as zero, as vdpbf16ps counts them: the
  // exact path gives small non-zero values here, this one exact zeros.
  Bf16ActivationsScope bf16;
  const int64_t N = 4, K = 64, T = 5;
  std::mt19937 rng(23);
  TestWeight w = randomWeight(rng, WeightFormat::BF16, N, K);
  auto *bits = reinterpret_cast<uint16_t *>(w.data.data());
  for (int64_t i = 0; i < N * K; ++i)
    bits[i] = i % 2 ? uint16_t(0x0001 + i % 100) // subnormal
                    : kiln::floatToBf16(1e-20f);
  std::vector<float> x(size_t(T * K));
  for (int64_t i = 0; i < T * K; ++i)
    x[size_t(i)] = i % 2 ? 1e30f : (i % 4 ? 1e-21f : 1e-39f); // 1e-39: FP32
  ThreadPool pool(2);                                         // subnormal
  std::vector<float> y = runMatmul(pool, x, T, w.view);
  for (float v : y)
    EXPECT_EQ(v, 0.0f);
  ScalarScope scalar;
  EXPECT_TRUE(sameBits(y, runMatmul(pool, x, T, w.view)));
}

TEST(MatmulBf16, RandomBitsGiveTheScalarBits) {
  // Weights and activations with random signs and mantissas and exponents
  // from subnormal up to 2^13, so that products underflow, lanes cancel and
  // round in every way; row 0 also holds an infinity and a NaN. The vector
  // path must give the reference's bits, rounding and flushing included.
  if (!useAvx512Bf16())
    GTEST_SKIP() << "no AVX-512 BF16 here: " << cpuSummary();
  Bf16ActivationsScope bf16;
  std::mt19937 rng(24);
  std::uniform_int_distribution<uint32_t> any, exponent(0, 140);
  const int64_t N = 64, K = 256;
  TestWeight w = randomWeight(rng, WeightFormat::BF16, N, K);
  auto *bits = reinterpret_cast<uint16_t *>(w.data.data());
  for (int64_t i = 0; i < N * K; ++i)
    bits[i] = uint16_t((any(rng) & 0x807F) | exponent(rng) << 7);
  bits[3] = 0x7F80;  // +infinity
  bits[40] = 0xFFC1; // NaN
  for (int64_t T : {1, 3, 9}) {
    std::vector<float> x(size_t(T * K));
    for (float &f : x)
      f = fromBits((any(rng) & 0x807FFFFF) | exponent(rng) << 23);
    ThreadPool pool(1);
    std::vector<float> y = runMatmul(pool, x, T, w.view);
    int finite = 0;
    for (float v : y)
      finite += std::isfinite(v);
    EXPECT_GE(finite, int(y.size()) - T) << "T=" << T;
    ScalarScope scalar;
    EXPECT_TRUE(sameBits(y, runMatmul(pool, x, T, w.view))) << "T=" << T;
  }
}

TEST(MatmulBf16, RowRangesInsidePanelsAccumulate) {
  Bf16ActivationsScope bf16;
  std::mt19937 rng(25);
  TestWeight panels = inPanels(randomWeight(rng, WeightFormat::BF16, 68, 256));
  expectRowRangesAccumulate(panels.view, rng);
}

TEST(MatmulBf16, PreroundedRowsGiveTheSameBits) {
  // MatmulRows::xBf16 from roundRowsBf16() against rounding in the call.
  Bf16ActivationsScope bf16;
  std::mt19937 rng(27);
  const int64_t N = 40, K = 200, rows = 9; // K: a partial last chunk
  TestWeight w = randomWeight(rng, WeightFormat::BF16, N, K);
  std::vector<float> x = randomFloats(rng, rows * K);
  ThreadPool pool(2);
  std::vector<uint16_t> r(size_t(rows * bf16RowLength(K)));
  roundRowsBf16(pool, x.data(), K, rows, K, r.data());
  expectPreparedRowsGiveTheSameBits(
      w.view, x, [&](MatmulRows &io) { io.xBf16 = r.data(); });
}

TEST(MatmulBf16, Bf16RoundingCostsLittleAgainstTheExactPath) {
  // Recorded in docs/cpu.md.
  const double err =
      modeErrorAgainstExact<Bf16ActivationsScope>(WeightFormat::BF16, 26);
  EXPECT_GT(err, 0.0) << "the BF16 path must actually run";
  EXPECT_LT(err, 1e-2);
}

/// The pair form (MatmulBf16.h) of y [rows, n] from y0, with `count`
/// terms: coefficients a [rows, lda] and rows x [count, n], both BF16 bits.
std::vector<float> pairForm(std::vector<float> y, int64_t rows, int64_t n,
                            const std::vector<uint16_t> &a, int64_t lda,
                            const std::vector<uint16_t> &x, int64_t count,
                            bool vector) {
  std::vector<const uint16_t *> xr;
  for (int64_t j = 0; j < count; ++j)
    xr.push_back(x.data() + j * n);
  std::vector<uint16_t> packed(size_t(bf16Pairs(count) * 2 * n), 0xFFFF);
  std::vector<float *> yr;
  for (int64_t r = 0; r < rows; ++r)
    yr.push_back(y.data() + r * n);
  if (vector) {
    packPairsBf16Avx512(xr.data(), count, n, packed.data());
    axpyPairsBf16Avx512Bf16(yr.data(), rows, a.data(), lda, packed.data(),
                            bf16Pairs(count), n);
  } else {
    packPairsBf16Scalar(xr.data(), count, n, packed.data());
    axpyPairsBf16Scalar(yr.data(), rows, a.data(), lda, packed.data(),
                        bf16Pairs(count), n);
  }
  return y;
}

TEST(MatmulBf16, PairFormSumsInOrderAndEveryPathAgrees) {
  // Normal values: the sum is within (count + 1) roundings of the double sum
  // of the same BF16 products; odd counts and column tails included.
  std::mt19937 rng(41);
  struct Case {
    int64_t rows, n, count;
  };
  for (Case c : std::vector<Case>{
           {1, 16, 2}, {4, 64, 16}, {7, 200, 15}, {9, 50, 1}, {5, 512, 33}}) {
    const int64_t lda = c.count + 1; // the zero past an odd count
    std::vector<uint16_t> a(size_t(c.rows * lda), 0), x(size_t(c.count * c.n));
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.count; ++j)
        a[size_t(r * lda + j)] = roundToBf16(randomFloats(rng, 1, 0, 1)[0]);
    for (uint16_t &v : x)
      v = roundToBf16(randomFloats(rng, 1, -2, 2)[0]);
    const std::vector<float> y0 = randomFloats(rng, c.rows * c.n, -1, 1);
    const std::vector<float> y =
        pairForm(y0, c.rows, c.n, a, lda, x, c.count, false);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t l = 0; l < c.n; ++l) {
        double sum = y0[size_t(r * c.n + l)], mag = std::fabs(sum);
        for (int64_t j = 0; j < c.count; ++j) {
          const double term =
              double(kiln::bf16ToFloat(a[size_t(r * lda + j)])) *
              kiln::bf16ToFloat(x[size_t(j * c.n + l)]);
          sum += term;
          mag += std::fabs(term);
        }
        EXPECT_LE(std::fabs(y[size_t(r * c.n + l)] - sum),
                  double(c.count + 1) * std::ldexp(1.0, -24) * mag)
            << r << "," << l;
      }
    if (useAvx512Bf16())
      EXPECT_TRUE(
          sameBits(y, pairForm(y0, c.rows, c.n, a, lda, x, c.count, true)))
          << c.rows << " x " << c.n << ", " << c.count << " terms";
  }
}

TEST(MatmulBf16, PairFormRandomBitsGiveTheScalarBits) {
  // Random signs, mantissas and exponents from subnormal up, in the
  // coefficients, the rows and the starting y: underflowing products,
  // flushed inputs and a flushed start, as vdpbf16ps has them.
  if (!useAvx512Bf16())
    GTEST_SKIP() << "no AVX-512 BF16 here: " << cpuSummary();
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> any, exponent(0, 140);
  const int64_t rows = 6, n = 90, count = 21, lda = 22;
  std::vector<uint16_t> a(size_t(rows * lda)), x(size_t(count * n));
  for (uint16_t &v : a)
    v = uint16_t((any(rng) & 0x807F) | exponent(rng) << 7);
  for (uint16_t &v : x)
    v = uint16_t((any(rng) & 0x807F) | exponent(rng) << 7);
  std::vector<float> y0(size_t(rows * n));
  for (float &f : y0)
    f = fromBits((any(rng) & 0x807FFFFF) | exponent(rng) << 23);
  // Row 0, column 0: a subnormal start (2^-127) is flushed before the first
  // product (1 x 2^-126) is added, so the sum is 2^-126, not 1.5 x 2^-126.
  std::fill(a.begin(), a.begin() + lda, uint16_t(0));
  a[1] = 0x3F80; // 1
  x[n] = 0x0080; // 2^-126, row 1
  y0[0] = fromBits(0x00400000);
  const std::vector<float> scalar =
      pairForm(y0, rows, n, a, lda, x, count, false);
  EXPECT_EQ(scalar[0], std::ldexp(1.0f, -126));
  EXPECT_TRUE(sameBits(scalar, pairForm(y0, rows, n, a, lda, x, count, true)));
}

TEST(MatmulBf16, ModeIsNamedAndChecked) {
  std::string error;
  EXPECT_FALSE(setBf16Activations("fp8", &error));
  EXPECT_NE(error.find("'fp8'"), std::string::npos) << error;
  EXPECT_NE(error.find("f32 or bf16"), std::string::npos) << error;
  EXPECT_EQ(bf16Activations(), Bf16Activations::F32);
  {
    Bf16ActivationsScope bf16;
    EXPECT_EQ(bf16Activations(), Bf16Activations::BF16);
    EXPECT_NE(cpuSummary().find("bf16 activations: bf16"), std::string::npos)
        << cpuSummary();
  }
  EXPECT_NE(cpuSummary().find("bf16 activations: f32"), std::string::npos);
}

} // namespace
