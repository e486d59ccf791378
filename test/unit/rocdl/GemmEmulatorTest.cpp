//===- GemmEmulatorTest.cpp - The GPU GEMM programs against references ---===//
//
// Each test runs a kernel's workgroup program in the emulator (the exact
// index math of the generated kernel, MFMA instructions modelled) and
// compares with references:
//  * exact: double GEMM over the operands as the kernel sees them (MXFP4
//    activations quantized per 32 with the "even" rule, or bf16-rounded
//    activations, times the exactly decoded weights). Bound per output:
//    |y - ref| <= 1e-5 * sum_k |a_k w_k| + 1e-30 (f32 accumulation only).
//  * model: the CPU runtime's f32 GEMM (runtime/cpu/Matmul.h) with the
//    same weights, which keeps activations in f32. The difference is the
//    activation rounding: normalized error ||y - ref|| / ||ref|| below 0.2
//    for MXFP4 activations (E2M1 keeps ~2 significant bits; these shapes
//    measure 0.09-0.14) and below 1e-2 for bf16 activations (~2e-3).
//
//===----------------------------------------------------------------------===//

#include "test/unit/rocdl/GemmEmulator.h"

#include "passes/emit/Mxfp4Quantize.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Matmul.h"
#include "test/unit/rocdl/MxTestWeights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;
using namespace kiln::rocdl;
using kiln::rocdl::test::gemmSpec;
using kiln::rocdl::test::makeActivations;
using kiln::rocdl::test::makeMxWeights;
using kiln::rocdl::test::mxView;
using kiln::rocdl::test::MxWeights;
using kiln::rocdl::test::mxWeightValue;

namespace {

/// Exact reference over given activation values: checks the bound above.
void expectExact(const std::vector<float> &y, const std::vector<double> &aEff,
                 const MxWeights *mx, const std::vector<double> &wDense,
                 int64_t rows, int64_t n, int64_t k) {
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        double wv = mx ? mxWeightValue(*mx, c, i) : wDense[size_t(c * k + i)];
        double t = aEff[size_t(r * k + i)] * wv;
        sum += t;
        mag += std::fabs(t);
      }
      double got = y[size_t(r * n + c)];
      if (!(std::fabs(got - sum) <= 1e-5 * mag + 1e-30) && ++bad <= 5)
        ADD_FAILURE() << "y[" << r << "][" << c << "] = " << got
                      << ", reference " << sum << " (sum |terms| " << mag
                      << ")";
    }
  EXPECT_EQ(bad, 0);
}

/// Normalized error against the runtime's f32 GEMM.
double errorVsRuntime(const std::vector<float> &y, const std::vector<float> &x,
                      const cpu::WeightView &w, int64_t rows) {
  cpu::ThreadPool pool(1);
  std::vector<float> ref(size_t(rows * w.rows));
  cpu::matmul(pool, x.data(), rows, w, ref.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

/// The activations as the gfx950 kernel quantizes them, decoded.
std::vector<double> mxActivationValues(const std::vector<float> &x,
                                       int64_t rows, int64_t k) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k / 32; ++b) {
      emu::LaneBytes packed;
      uint8_t e = emu::quantizeLaneBlock(&x[size_t(r * k + b * 32)], packed);
      for (int i = 0; i < 32; ++i) {
        uint8_t byte = packed[size_t(i / 2)];
        uint8_t code = (i % 2) ? byte >> 4 : byte & 0xF;
        out[size_t(r * k + b * 32 + i)] =
            double(cpu::e2m1ToFloat(code)) * std::ldexp(1.0, int(e) - 127);
      }
    }
  return out;
}

std::vector<double> bf16Values(const std::vector<float> &x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = cpu::bf16ToFloat(cpu::floatToBf16(x[i]));
  return out;
}

struct Shape {
  int64_t rows, n, k;
};
// Decode, odd sizes (K tail inside a step, N past the last tile, M past
// the last tile), two M tiles with a partial scale word, and a long K.
const Shape kShapes[] = {
    {1, 64, 128}, {5, 40, 96}, {33, 80, 640}, {16, 32, 2048}};

class MxGemm : public ::testing::TestWithParam<Chip> {};

TEST_P(MxGemm, MatchesReferences) {
  Chip chip = GetParam();
  uint32_t seed = 1;
  for (const Shape &s : kShapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " N " +
                 std::to_string(s.n) + " K " + std::to_string(s.k));
    MxWeights w = makeMxWeights(s.n, s.k, seed++);
    std::vector<float> x = makeActivations(s.rows, s.k, seed++);
    KernelSpec spec = gemmSpec(KernelKind::MxGemm, chip, s.rows, s.n, s.k);
    std::vector<float> y(size_t(s.rows * s.n), std::nanf(""));
    emu::runMxGemm(spec, x.data(), s.rows, w.shuffled, y.data());

    bool fp4 = chip == Chip::Gfx950;
    std::vector<double> a =
        fp4 ? mxActivationValues(x, s.rows, s.k) : bf16Values(x);
    expectExact(y, a, &w, {}, s.rows, s.n, s.k);
    double err = errorVsRuntime(y, x, mxView(w), s.rows);
    RecordProperty("error_vs_runtime_k" + std::to_string(s.k),
                   std::to_string(err));
    EXPECT_LT(err, fp4 ? 0.2 : 1e-2);
  }
}

TEST_P(MxGemm, CheckpointLayoutIsRejectedByTheNumbers) {
  // Negative control: the same program fed the checkpoint bytes instead of
  // the shuffled ones computes garbage, so the comparison above has teeth.
  Chip chip = GetParam();
  MxWeights w = makeMxWeights(64, 512, 7);
  std::vector<float> x = makeActivations(16, 512, 8);
  KernelSpec spec = gemmSpec(KernelKind::MxGemm, chip, 16, 64, 512);
  ShuffledMxWeight wrong = w.shuffled;
  std::copy(w.packed.begin(), w.packed.end(), wrong.data.begin());
  std::vector<float> y(size_t(16 * 64));
  emu::runMxGemm(spec, x.data(), 16, wrong, y.data());
  EXPECT_GT(errorVsRuntime(y, x, mxView(w), 16), 0.5);
}

INSTANTIATE_TEST_SUITE_P(Chips, MxGemm,
                         ::testing::Values(Chip::Gfx950, Chip::Gfx942),
                         [](const auto &info) {
                           return std::string(chipInfo(info.param).name);
                         });

class Bf16Gemm : public ::testing::TestWithParam<Chip> {};

TEST_P(Bf16Gemm, MatchesReferences) {
  Chip chip = GetParam();
  const Shape shapes[] = {{1, 48, 64}, {20, 72, 160}, {40, 64, 1024}};
  uint32_t seed = 100;
  for (const Shape &s : shapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " N " +
                 std::to_string(s.n) + " K " + std::to_string(s.k));
    std::mt19937 rng(seed++);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint16_t> w(size_t(s.n * s.k));
    std::vector<double> wv(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = cpu::floatToBf16(dist(rng));
      wv[i] = cpu::bf16ToFloat(w[i]);
    }
    std::vector<float> x = makeActivations(s.rows, s.k, seed++);
    KernelSpec spec = gemmSpec(KernelKind::Bf16Gemm, chip, s.rows, s.n, s.k);
    std::vector<float> y(size_t(s.rows * s.n), std::nanf(""));
    emu::runBf16Gemm(spec, x.data(), s.rows, w.data(), y.data());
    expectExact(y, bf16Values(x), nullptr, wv, s.rows, s.n, s.k);
    cpu::WeightView view;
    view.format = cpu::WeightFormat::BF16;
    view.data = w.data();
    view.rows = s.n;
    view.cols = s.k;
    double err = errorVsRuntime(y, x, view, s.rows);
    RecordProperty("error_vs_runtime_k" + std::to_string(s.k),
                   std::to_string(err));
    EXPECT_LT(err, 1e-2);
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, Bf16Gemm,
                         ::testing::Values(Chip::Gfx950, Chip::Gfx942),
                         [](const auto &info) {
                           return std::string(chipInfo(info.param).name);
                         });

//===----------------------------------------------------------------------===//
// The kernels' conversions
//===----------------------------------------------------------------------===//

TEST(KernelConversions, ActivationQuantizationIsQuarkEven) {
  // The in-kernel quantizer (amax, "even" exponent, RNE converter) gives
  // the bytes of the compiler's Quark-matching quantizer, block by block.
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-30, 30);
  for (int trial = 0; trial < 2000; ++trial) {
    float block[32];
    float s = std::ldexp(1.0f, binade(rng));
    for (float &v : block)
      v = dist(rng) * s;
    if (trial % 7 == 0) // exact ties and the saturation edge
      for (int i = 0; i < 32; ++i)
        block[i] = s * float((i % 13) - 6) * 0.25f;
    emu::LaneBytes packed;
    uint8_t e = emu::quantizeLaneBlock(block, packed);
    uint8_t refPacked[16], refScale;
    quantizeMxfp4Row(block, 32, Mxfp4ScaleRule::Even, refPacked, &refScale);
    ASSERT_EQ(e, refScale) << "trial " << trial;
    for (int i = 0; i < 32; ++i) {
      uint8_t got =
          (i % 2) ? packed[size_t(i / 2)] >> 4 : packed[size_t(i / 2)] & 0xF;
      uint8_t want = (i % 2) ? refPacked[i / 2] >> 4 : refPacked[i / 2] & 0xF;
      // The converter keeps the sign of a zero; the checkpoint has +0.
      ASSERT_EQ(cpu::e2m1ToFloat(got), cpu::e2m1ToFloat(want))
          << "trial " << trial << " element " << i << " value " << block[i];
    }
  }
}

TEST(KernelConversions, Fp4DequantBitTrickIsExact) {
  // AMDGPU.md section 7: all 16 codes x 255 finite scales, bit for bit.
  for (int e = 0; e < 255; ++e)
    for (int code = 0; code < 16; ++code) {
      float want =
          cpu::e2m1ToFloat(uint8_t(code)) * cpu::e8m0ToFloat(uint8_t(e));
      uint16_t got = emu::dequantizeFp4ToBf16(uint8_t(code), uint8_t(e));
      ASSERT_EQ(cpu::bf16ToFloat(got), want) << "code " << code << " e " << e;
    }
}

TEST(KernelConversions, ScaledMfmaModelFollowsTheLaneTable) {
  // One nonzero element per operand pins the model to the section 3 table:
  // A[3][77] (lane 3 + 16 * 2, nibble 13, scale byte 1 of that lane) times
  // B[77][9] (lane 9 + 32, nibble 13) lands in C[3][9]: lane 9, register 3.
  emu::LaneBytes a[kWaveSize]{}, b[kWaveSize]{};
  uint32_t sa[kWaveSize], sb[kWaveSize];
  for (int l = 0; l < kWaveSize; ++l)
    sa[l] = sb[l] = 0x7F7F7F7Fu;
  a[35][6] = 0x20;      // nibble 13 = code 2 (1.0)
  b[41][6] = 0x50;      // code 5 (3.0)
  sa[35] = 0x7F7F817Fu; // byte 1: 2^2
  sb[41] = 0x7E7F7F7Fu; // byte 3: 2^-1
  emu::WaveAcc c{};
  emu::mfmaScale16x16x128Fp4(a, b, sa, 1, sb, 3, c);
  for (int l = 0; l < kWaveSize; ++l)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(c[size_t(l)][size_t(r)], (l == 9 && r == 3) ? 6.0f : 0.0f)
          << "lane " << l << " register " << r;
}

} // namespace
