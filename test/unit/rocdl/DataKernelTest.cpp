//===- DataKernelTest.cpp - Data and row GPU kernels vs the CPU kernels ---===//
//
// Each kernel of DataKernels.cpp runs through the IR interpreter on random
// inputs of odd sizes (scalar and vector paths), with ties, NaNs, infinities
// and out-of-range indices where the CPU defines them, and is compared with
// the runtime/cpu function (or PlanRunner's copy loop) on the same inputs.
//
// Tolerances: copies, selections (top_k values and indices, group_limit,
// gather, take_rows, embedding), relu, scale, add and mul are exact (bit
// equality). sigmoid, silu, softmax, normalize: |gpu - cpu| <= 2e-6 * |cpu|
// (+ 1e-30 absolute for results near zero; the GPU sums in f32 where the
// CPU sums in double). layer_norm: |gpu - cpu| <= 2e-6 * (|normalized| *
// |gamma| + |beta|) + 1e-6 (the GPU forms mean and variance in f32).
// fp8_gemm: every decoded weight bit-exact after the bf16 rounding (x =
// identity rows); vs cpu::matmul |gpu - cpu| <= 2^-7 * sum |x| |w| (x and W
// are rounded to bf16 before the MFMA, as in the gfx942 MXFP4 recipe);
// with qa = 1 (FP8 activations, FP8 MFMAs) bit equality with
// Fp8Reference.h, which quantizes the activations as the kernel does.
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/KernelInterpreter.h"

#include "test/unit/rocdl/Fp8Reference.h"

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/emit/GpuLaunch.h"

#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Embedding.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Norm.h"
#include "runtime/cpu/RowOps.h"
#include "runtime/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <type_traits>

using namespace kiln;
using namespace kiln::rocdl;
using interp::KernelArg;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// A parameter value of spec(): an integer, or a float for the params
/// KernelParams.def declares float.
struct ParamValue {
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  ParamValue(T v) : i(int64_t(v)) {}
  ParamValue(double v) : f(float(v)) {}
  int64_t i = 0;
  float f = 0.0f;
};

/// The spec the symbol with these params (in declared order) names, as a
/// kernel reached from outside the compiler would be built.
KernelSpec
spec(KernelKind kind,
     std::initializer_list<std::pair<const char *, ParamValue>> values,
     Chip chip = Chip::Gfx950) {
  std::ostringstream symbol;
  symbol << "kiln_" << kernelKindName(kind);
  for (auto [name, v] : values) {
    const ParamDecl *d = findParam(kind, name);
    uint32_t bits;
    std::memcpy(&bits, &v.f, 4);
    symbol << "_" << name;
    if (d && d->isFloat)
      symbol << "X" << std::hex << bits << std::dec;
    else
      symbol << v.i;
  }
  symbol << "_" << chipInfo(chip).name;
  std::optional<KernelSpec> s = KernelSpec::fromSymbol(symbol.str());
  if (!s) {
    ADD_FAILURE() << "not a kernel symbol: " << symbol.str();
    return KernelSpec();
  }
  return *s;
}

std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -4.0f,
                                float hi = 4.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Bit equality (NaN == NaN).
void expectSameBits(const std::vector<float> &gpu,
                    const std::vector<float> &cpu, const char *what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i)
    ASSERT_EQ(bits(gpu[i]), bits(cpu[i]))
        << what << " element " << i << ": gpu " << gpu[i] << " cpu " << cpu[i];
}

/// Relative closeness; NaN must match NaN, infinities must match exactly.
/// Returns the largest relative error seen.
double expectClose(const std::vector<float> &gpu, const std::vector<float> &cpu,
                   double rel, const char *what) {
  EXPECT_EQ(gpu.size(), cpu.size());
  double worst = 0;
  for (size_t i = 0; i < gpu.size() && i < cpu.size(); ++i) {
    if (std::isnan(cpu[i]) || std::isinf(cpu[i])) {
      EXPECT_EQ(bits(gpu[i]), bits(cpu[i]))
          << what << " element " << i << ": gpu " << gpu[i] << " cpu "
          << cpu[i];
      continue;
    }
    double err = std::fabs(double(gpu[i]) - double(cpu[i]));
    double scale = std::fabs(double(cpu[i]));
    EXPECT_LE(err, rel * scale + 1e-30)
        << what << " element " << i << ": gpu " << gpu[i] << " cpu " << cpu[i];
    if (scale > 0)
      worst = std::max(worst, err / scale);
  }
  return worst;
}

std::string sci(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

void run(const KernelSpec &s, int64_t grid, std::vector<KernelArg> args) {
  ASSERT_EQ(s.validate(), "") << s.symbol();
  std::string error = interp::runKernel(s, {grid, 1, 1}, args);
  ASSERT_EQ(error, "") << s.symbol();
}

int64_t flatGrid(int64_t total, int64_t w) {
  return (total + kRowBlock * w - 1) / (kRowBlock * w);
}

uint16_t toBf16(float f) { return uint16_t(bits(f) >> 16); }

/// Round to nearest even; tiny values flush to a signed zero (the test only
/// needs the GPU and the CPU to decode the same bits).
uint16_t toF16(float f) {
  uint32_t x = bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exponent = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffff;
  if (exponent <= 0)
    return uint16_t(sign);
  uint32_t h = sign | uint32_t(exponent) << 10 | mantissa >> 13;
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return uint16_t(h);
}

//===----------------------------------------------------------------------===//

TEST(DataKernel, EmbeddingBf16F16F32AndOutOfRangeIds) {
  // h 37: scalar path; h 64: 16-byte vectors.
  for (int64_t h : {37, 64})
    for (int dt = 0; dt < 3; ++dt) {
      const int64_t v = 11;
      std::vector<float> values = randomFloats(size_t(v * h), 1 + dt);
      std::vector<uint16_t> half(values.size());
      cpu::WeightView table;
      table.rows = v;
      table.cols = h;
      if (dt == 0) {
        table.format = cpu::WeightFormat::F32;
        table.data = values.data();
      } else {
        for (size_t i = 0; i < values.size(); ++i)
          half[i] = dt == 1 ? toBf16(values[i]) : toF16(values[i]);
        table.format =
            dt == 1 ? cpu::WeightFormat::BF16 : cpu::WeightFormat::F16;
        table.data = half.data();
      }
      std::vector<int32_t> ids = {3, 0, 10, -1, 7, 11, 3};
      std::vector<float> out(ids.size() * size_t(h), 1.0f);
      KernelSpec s =
          spec(KernelKind::Embedding, {{"h", h}, {"v", v}, {"dt", dt}});
      KernelArg tableArg =
          dt == 0 ? KernelArg::of(values) : KernelArg::of(half);
      run(s, int64_t(ids.size()),
          {KernelArg::of(ids), tableArg, KernelArg::of(out)});
      // The CPU rejects ids outside [0, v); the GPU writes zeros there.
      std::vector<float> expect(out.size(), 0.0f);
      for (size_t t = 0; t < ids.size(); ++t)
        if (ids[t] >= 0 && ids[t] < v)
          cpu::embedding(table, &ids[t], 1, expect.data() + t * size_t(h));
      expectSameBits(out, expect, "embedding");
    }
}

TEST(DataKernel, LayerNorm) {
  for (int64_t c : {37, 132}) {
    const int64_t rows = 3;
    std::vector<float> x = randomFloats(size_t(rows * c), 5, -3.0f, 5.0f);
    std::vector<float> gamma = randomFloats(size_t(c), 6);
    std::vector<float> beta = randomFloats(size_t(c), 7);
    std::vector<float> y(x.size()), expect(x.size());
    KernelSpec s = spec(KernelKind::LayerNorm, {{"c", c}, {"eps", 1e-5f}});
    run(s, rows,
        {KernelArg::of(x), KernelArg::of(gamma), KernelArg::of(beta),
         KernelArg::of(y)});
    cpu::layerNorm(x.data(), rows, c, gamma.data(), beta.data(), 1e-5f,
                   expect.data());
    std::vector<float> normalized(x.size());
    cpu::layerNorm(x.data(), rows, c, nullptr, nullptr, 1e-5f,
                   normalized.data());
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      size_t col = i % size_t(c);
      double bound = 2e-6 * (std::fabs(normalized[i] * gamma[col]) +
                             std::fabs(beta[col])) +
                     1e-6;
      double err = std::fabs(double(y[i]) - double(expect[i]));
      worst = std::max(worst, err);
      EXPECT_LE(err, bound) << "layer_norm c " << c << " element " << i;
    }
    RecordProperty("layer_norm_max_abs_err_c" + std::to_string(c), sci(worst));
  }
}

/// Inputs every elementwise test sees: NaN, infinities, signed zeros,
/// large magnitudes.
std::vector<float> elementwiseInputs(size_t n, uint32_t seed) {
  std::vector<float> x = randomFloats(n, seed, -30.0f, 30.0f);
  const float special[] = {kNan,   kInf,    -kInf,  0.0f,  -0.0f,
                           100.0f, -100.0f, -88.0f, 88.0f, 1e-30f};
  for (size_t i = 0; i < std::size(special) && i < n; ++i)
    x[i * 3 % n] = special[i];
  return x;
}

TEST(DataKernel, UnarySigmoidSiluReluScale) {
  for (int64_t c : {37, 40}) {
    const int64_t rows = 3, w = c % 4 == 0 ? 4 : 1;
    std::vector<float> x = elementwiseInputs(size_t(rows * c), 11);
    for (int op = 0; op < 4; ++op) {
      std::vector<float> y(x.size(), 7.0f), expect(x.size());
      KernelSpec s =
          op == 3 ? spec(KernelKind::Unary,
                         {{"op", op}, {"c", c}, {"w", w}, {"s", 0.3f}})
                  : spec(KernelKind::Unary, {{"op", op}, {"c", c}, {"w", w}});
      run(s, flatGrid(rows * c, w),
          {KernelArg::of(x), KernelArg::of(y), KernelArg::i32(int32_t(rows))});
      switch (op) {
      case 0:
        cpu::sigmoid(x.data(), int64_t(x.size()), expect.data());
        RecordProperty("sigmoid_max_rel_err",
                       sci(expectClose(y, expect, 2e-6, "sigmoid")));
        break;
      case 1:
        cpu::silu(x.data(), int64_t(x.size()), expect.data());
        RecordProperty("silu_max_rel_err",
                       sci(expectClose(y, expect, 2e-6, "silu")));
        break;
      case 2:
        cpu::relu(x.data(), int64_t(x.size()), expect.data());
        expectSameBits(y, expect, "relu");
        break;
      case 3:
        cpu::scale(x.data(), int64_t(x.size()), 0.3f, expect.data());
        expectSameBits(y, expect, "scale");
        break;
      }
    }
  }
}

TEST(DataKernel, BinaryBroadcastAndSameShape) {
  struct Case {
    int64_t c, bc;
  };
  for (Case k :
       {Case{40, 8}, Case{35, 5}, Case{40, 0}, Case{33, 0}, Case{36, 36}}) {
    const int64_t rows = 5;
    const int64_t w = k.c % 4 == 0 && k.bc % 4 == 0 ? 4 : 1;
    std::vector<float> a = elementwiseInputs(size_t(rows * k.c), 21);
    std::vector<float> other =
        randomFloats(size_t(k.bc > 0 ? k.bc : rows * k.c), 22);
    for (int op = 0; op < 2; ++op) {
      std::vector<float> y(a.size()), expect(a.size());
      KernelSpec s = spec(KernelKind::Binary,
                          {{"op", op}, {"c", k.c}, {"bc", k.bc}, {"w", w}});
      run(s, flatGrid(rows * k.c, w),
          {KernelArg::of(a), KernelArg::of(other), KernelArg::of(y),
           KernelArg::i32(int32_t(rows))});
      int64_t cols = k.bc > 0 ? k.bc : k.c;
      int64_t n = rows * k.c / cols;
      if (op == 0)
        cpu::add(a.data(), other.data(), n, cols, expect.data(), k.bc > 0);
      else
        cpu::mul(a.data(), other.data(), n, cols, expect.data(), k.bc > 0);
      expectSameBits(y, expect, op == 0 ? "add" : "mul");
    }
  }
}

TEST(DataKernel, BinaryWrongBroadcastDiffers) {
  // A kernel built for 4-value broadcast on data meant for 8 values must not
  // match: the check above is sensitive to the broadcast pattern.
  const int64_t rows = 2, c = 16;
  std::vector<float> a = randomFloats(size_t(rows * c), 31);
  std::vector<float> vec = randomFloats(8, 32);
  std::vector<float> y(a.size()), expect(a.size());
  KernelSpec s =
      spec(KernelKind::Binary, {{"op", 0}, {"c", c}, {"bc", 4}, {"w", 4}});
  run(s, flatGrid(rows * c, 4),
      {KernelArg::of(a), KernelArg::of(vec), KernelArg::of(y),
       KernelArg::i32(int32_t(rows))});
  cpu::add(a.data(), vec.data(), rows * c / 8, 8, expect.data(), true);
  EXPECT_NE(std::memcmp(y.data(), expect.data(), y.size() * 4), 0);
}

TEST(DataKernel, Softmax) {
  for (int64_t c : {37, 1000}) {
    const int64_t rows = 4;
    std::vector<float> x = randomFloats(size_t(rows * c), 41, -20.0f, 20.0f);
    x[size_t(c) + 3] = kNan; // row 1: all NaN, as on the CPU
    for (int64_t i = 0; i < c; ++i)
      x[size_t(2 * c + i)] = i % 2 ? 1.5f : -kInf; // row 2: ties and -inf
    std::vector<float> y(x.size()), expect(x.size());
    run(spec(KernelKind::Softmax, {{"c", c}}), rows,
        {KernelArg::of(x), KernelArg::of(y)});
    cpu::softmax(x.data(), rows, c, expect.data());
    RecordProperty("softmax_max_rel_err_c" + std::to_string(c),
                   sci(expectClose(y, expect, 2e-6, "softmax")));
  }
}

TEST(DataKernel, Normalize) {
  for (int64_t c : {37, 256}) {
    const int64_t rows = 3;
    std::vector<float> x = randomFloats(size_t(rows * c), 51, 0.0f, 1.0f);
    std::vector<float> y(x.size()), expect(x.size());
    KernelSpec s = spec(KernelKind::Normalize, {{"c", c}, {"eps", 1e-20f}});
    run(s, rows, {KernelArg::of(x), KernelArg::of(y)});
    cpu::normalize(x.data(), rows, c, 1e-20f, expect.data());
    RecordProperty("normalize_max_rel_err_c" + std::to_string(c),
                   sci(expectClose(y, expect, 2e-6, "normalize")));
  }
}

/// Scores with many exact ties and a NaN, so the order rules decide.
std::vector<float> tiedScores(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (float &v : x)
    v = float(int(rng() % 7)) * 0.25f - 0.5f;
  x[n / 3] = kNan;
  x[n / 2] = -0.0f;
  return x;
}

TEST(DataKernel, GroupLimitTiesAndNaN) {
  struct Case {
    int64_t c, g, k;
  };
  for (Case k : {Case{48, 6, 2}, Case{30, 5, 3}, Case{7, 7, 3}, Case{256, 8, 4},
                 Case{24, 1, 1}}) {
    const int64_t rows = 3;
    std::vector<float> x = tiedScores(size_t(rows * k.c), uint32_t(k.c));
    std::vector<float> y(x.size()), expect(x.size());
    run(spec(KernelKind::GroupLimit, {{"c", k.c}, {"g", k.g}, {"k", k.k}}),
        rows, {KernelArg::of(x), KernelArg::of(y)});
    cpu::groupLimit(x.data(), rows, k.c, k.g, k.k, expect.data());
    expectSameBits(y, expect, "group_limit");
  }
}

TEST(DataKernel, TopKOrderTiesAndNaN) {
  struct Case {
    int64_t c, k;
  };
  for (Case k : {Case{37, 5}, Case{256, 8}, Case{1003, 1}, Case{9, 9}}) {
    const int64_t rows = 3;
    std::vector<float> x = tiedScores(size_t(rows * k.c), uint32_t(k.c) + 1);
    std::vector<float> values(size_t(rows * k.k)), expectV(values.size());
    std::vector<int32_t> idx(values.size()), expectI(values.size());
    run(spec(KernelKind::TopK, {{"c", k.c}, {"k", k.k}}), rows,
        {KernelArg::of(x), KernelArg::of(values), KernelArg::of(idx)});
    cpu::topK(x.data(), rows, k.c, k.k, expectV.data(), expectI.data());
    expectSameBits(values, expectV, "top_k values");
    EXPECT_EQ(idx, expectI) << "top_k c " << k.c << " k " << k.k;
  }
}

TEST(DataKernel, TopKWrongKDiffers) {
  const int64_t c = 64, rows = 2;
  std::vector<float> x = randomFloats(size_t(rows * c), 61);
  std::vector<float> values(size_t(rows * 4));
  std::vector<int32_t> idx(values.size()), expectI(values.size());
  std::vector<float> expectV(values.size());
  // Built for k = 4 but compared with the CPU's k = 4 on reversed data.
  run(spec(KernelKind::TopK, {{"c", c}, {"k", 4}}), rows,
      {KernelArg::of(x), KernelArg::of(values), KernelArg::of(idx)});
  std::vector<float> negated(x);
  for (float &v : negated)
    v = -v;
  cpu::topK(negated.data(), rows, c, 4, expectV.data(), expectI.data());
  EXPECT_NE(idx, expectI);
}

TEST(DataKernel, GatherWithOutOfRangeIndices) {
  const int64_t rows = 3, c = 13, k = 4, groups = 2, n = groups * k;
  std::vector<float> x = randomFloats(size_t(rows * groups * c), 71);
  std::vector<int32_t> idx(size_t(rows * n));
  std::mt19937 rng(72);
  for (int32_t &i : idx)
    i = int32_t(rng() % c);
  idx[3] = -1;
  idx[10] = int32_t(c);
  idx[17] = 1 << 30;
  std::vector<float> y(idx.size(), 9.0f);
  run(spec(KernelKind::Gather, {{"c", c}, {"k", k}, {"n", n}}),
      flatGrid(rows * n, 1),
      {KernelArg::of(x), KernelArg::of(idx), KernelArg::of(y),
       KernelArg::i32(int32_t(rows))});
  // The CPU reads out of bounds for a bad index; the GPU writes 0 there.
  std::vector<int32_t> safe(idx);
  for (int32_t &i : safe)
    if (i < 0 || i >= c)
      i = 0;
  std::vector<float> expect(y.size());
  cpu::gather(x.data(), rows * groups, c, safe.data(), k, expect.data());
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] < 0 || idx[i] >= c)
      expect[i] = 0.0f;
  expectSameBits(y, expect, "gather");
}

/// PlanRunner's Split/Concat loop, and the GPU as one copy_blocks launch
/// per piece (what GpuLowerData emits).
void splitConcat(bool split, int64_t rows, int64_t outer,
                 const std::vector<int64_t> &chunks) {
  int64_t stride = 0;
  for (int64_t c : chunks)
    stride += c;
  std::vector<std::vector<int32_t>> pieces;
  std::mt19937 rng(uint32_t(stride * 7 + outer));
  std::vector<int32_t> whole(size_t(rows * outer * stride));
  for (int32_t &v : whole)
    v = int32_t(rng());
  for (int64_t c : chunks) {
    pieces.emplace_back(size_t(rows * outer * c));
    for (int32_t &v : pieces.back())
      v = int32_t(rng());
  }
  // Reference.
  std::vector<int32_t> refWhole(whole);
  std::vector<std::vector<int32_t>> refPieces(pieces);
  int64_t offset = 0;
  for (size_t p = 0; p < chunks.size(); ++p) {
    for (int64_t b = 0; b < rows * outer; ++b)
      for (int64_t j = 0; j < chunks[p]; ++j) {
        int32_t &wv = refWhole[size_t(b * stride + offset + j)];
        int32_t &pv = refPieces[p][size_t(b * chunks[p] + j)];
        if (split)
          pv = wv;
        else
          wv = pv;
      }
    offset += chunks[p];
  }
  offset = 0;
  for (size_t p = 0; p < chunks.size(); ++p) {
    int64_t chunk = chunks[p];
    int64_t w = chunk % 4 == 0 && stride % 4 == 0 && offset % 4 == 0 ? 4 : 1;
    KernelSpec s =
        spec(KernelKind::CopyBlocks, {{"outer", outer},
                                      {"chunk", chunk},
                                      {"sstride", split ? stride : chunk},
                                      {"soff", split ? offset : 0},
                                      {"dstride", split ? chunk : stride},
                                      {"doff", split ? 0 : offset},
                                      {"w", w}});
    std::vector<int32_t> &src = split ? whole : pieces[p];
    std::vector<int32_t> &dst = split ? pieces[p] : whole;
    run(s, flatGrid(rows * outer * chunk, w),
        {KernelArg::of(src), KernelArg::of(dst),
         KernelArg::i32(int32_t(rows))});
    offset += chunk;
  }
  EXPECT_EQ(whole, refWhole);
  for (size_t p = 0; p < chunks.size(); ++p)
    EXPECT_EQ(pieces[p], refPieces[p]) << "piece " << p;
}

TEST(DataKernel, SplitAndConcat) {
  splitConcat(true, 3, 1, {8, 4, 12}); // vector copies
  splitConcat(true, 3, 5, {3, 2, 7});  // scalar, several blocks per row
  splitConcat(false, 2, 4, {16, 8});   // concat, vectors
  splitConcat(false, 5, 3, {5, 1, 3}); // concat, scalar
  splitConcat(true, 300, 2, {4, 4});   // several workgroups
}

TEST(DataKernel, CopyBlocksWrongOffsetDiffers) {
  const int64_t rows = 2, outer = 2, stride = 8, chunk = 4;
  std::vector<int32_t> whole(size_t(rows * outer * stride));
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = int32_t(i);
  std::vector<int32_t> piece(size_t(rows * outer * chunk));
  // Second piece (offset 4) requested, first piece's offset 0 built.
  run(spec(KernelKind::CopyBlocks, {{"outer", outer},
                                    {"chunk", chunk},
                                    {"sstride", stride},
                                    {"soff", 0},
                                    {"dstride", chunk},
                                    {"doff", 0},
                                    {"w", 4}}),
      1, {KernelArg::of(whole), KernelArg::of(piece), KernelArg::i32(rows)});
  EXPECT_NE(piece[0], 4);
}

TEST(DataKernel, TakeRowsWithOutOfRangeRows) {
  for (int64_t c : {7, 64}) {
    const int64_t xRows = 5;
    std::vector<int32_t> x(size_t(xRows * c));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = int32_t(i * 2654435761u);
    std::vector<int32_t> rowsIdx = {4, 0, 9, -1, 2, 4};
    std::vector<int32_t> out(rowsIdx.size() * size_t(c), 77);
    run(spec(KernelKind::TakeRows, {{"c", c}}), int64_t(rowsIdx.size()),
        {KernelArg::of(x), KernelArg::of(rowsIdx), KernelArg::of(out),
         KernelArg::i32(int32_t(xRows))});
    std::vector<int32_t> expect(out.size(), 0);
    for (size_t r = 0; r < rowsIdx.size(); ++r)
      if (rowsIdx[r] >= 0 && rowsIdx[r] < xRows)
        std::memcpy(&expect[r * size_t(c)], &x[size_t(rowsIdx[r] * c)],
                    size_t(c) * 4);
    EXPECT_EQ(out, expect) << "take_rows c " << c;
  }
}

// rank_sum is the GPU half of the all-reduce: the gathered parts added left
// to right in rank order, bit for bit comm::sumInRankOrder (the CPU ranks'
// sum), for 1 to 5 ranks, both widths, a count that leaves a partial
// workgroup, and values whose sum depends on the order. Summing the ranks in
// reverse must differ somewhere.
TEST(DataKernel, RankSumIsTheRankOrderSum) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mag(-20.0f, 20.0f);
  for (int64_t w : {1, 4}) {
    for (int ranks : {1, 2, 3, 5}) {
      const int64_t count = 1028; // 4 x 257: 5 workgroups of 256 at w 1
      std::vector<float> gathered(size_t(ranks * count));
      for (float &v : gathered)
        v = std::ldexp(mag(rng), int(rng() % 40) - 20);
      std::vector<float> out(size_t(count), NAN);
      std::vector<float> expect(size_t(count), 0.0f);
      run(spec(KernelKind::RankSum, {{"w", w}}), flatGrid(count, w),
          {KernelArg::of(gathered), KernelArg::of(out),
           KernelArg::i32(int32_t(count)), KernelArg::i32(ranks)});
      comm::sumInRankOrder(gathered.data(), expect.data(), size_t(count), ranks,
                           comm::DataType::F32);
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(bits(out[size_t(i)]), bits(expect[size_t(i)]))
            << "w " << w << " ranks " << ranks << " element " << i;
      if (ranks >= 3) {
        std::vector<float> reversed(size_t(count), 0.0f);
        for (int r = ranks - 1; r >= 0; --r)
          for (int64_t i = 0; i < count; ++i)
            reversed[size_t(i)] += gathered[size_t(r * count + i)];
        EXPECT_NE(reversed, out) << "the order must matter for this data";
      }
    }
  }
}

float roundBf16(float f) {
  uint32_t b = bits(f);
  b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000u;
  float out;
  std::memcpy(&out, &b, 4);
  return out;
}

struct Fp8Weight {
  int64_t n, k;
  std::vector<uint8_t> q;
  std::vector<float> scales;
  cpu::WeightView view() const {
    cpu::WeightView w;
    w.format = cpu::WeightFormat::FP8;
    w.data = q.data();
    w.scales = scales.data();
    w.rows = n;
    w.cols = k;
    return w;
  }
  /// Row r of W = q * s, from the CPU's decoder.
  std::vector<float> row(int64_t r) const {
    std::vector<float> out(static_cast<size_t>(k));
    cpu::dequantizeRow(view(), r, out.data());
    return out;
  }
};

Fp8Weight randomFp8(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp8Weight w{n, k, std::vector<uint8_t>(size_t(n * k)), {}};
  for (uint8_t &b : w.q) {
    do
      b = uint8_t(rng());
    while ((b & 0x7f) == 0x7f); // no NaN codes
  }
  w.scales.resize(size_t(((n + 127) / 128) * ((k + 127) / 128)));
  std::uniform_real_distribution<float> dist(1e-3f, 4e-3f);
  for (float &s : w.scales)
    s = dist(rng);
  return w;
}

KernelSpec fp8Spec(int64_t n, int64_t k, int64_t mt, int64_t nt) {
  return spec(
      KernelKind::Fp8Gemm,
      {{"n", n}, {"k", k}, {"mt", mt}, {"nt", nt}, {"wg", 64}, {"waves", 4}});
}

std::vector<float> runFp8(const KernelSpec &s, const Fp8Weight &w,
                          std::vector<float> &x, int64_t m) {
  std::vector<float> y(size_t(m * w.n), 5.0f);
  std::vector<uint8_t> q(w.q);
  std::vector<float> scales(w.scales);
  Fp8GemmParams p = params<Fp8GemmParams>(s);
  int64_t mt = p.mt, nt = p.nt;
  std::string error = interp::runKernel(
      s, {(w.n + 16 * nt - 1) / (16 * nt), (m + 16 * mt - 1) / (16 * mt), 1},
      {KernelArg::of(x), KernelArg::of(q), KernelArg::of(scales),
       KernelArg::of(y), KernelArg::i32(int32_t(m))});
  EXPECT_EQ(error, "") << s.symbol();
  return y;
}

TEST(DataKernel, Fp8GemmDecodesEveryCodeExactly) {
  // x = identity rows: y[m, n] = bf16(W[n, m]), so every decoded weight
  // (subnormals, signs, both K blocks) is checked bit for bit.
  const int64_t n = 40, k = 160;
  Fp8Weight w = randomFp8(n, k, 81);
  for (int64_t i = 0; i < 256 && i < n * k; ++i)
    if ((i & 0x7f) != 0x7f)
      w.q[size_t(i)] = uint8_t(i);
  std::vector<float> x(size_t(k * k), 0.0f);
  for (int64_t i = 0; i < k; ++i)
    x[size_t(i * k + i)] = 1.0f;
  ASSERT_EQ(fp8Spec(n, k, 1, 3).validate(), "");
  std::vector<float> y = runFp8(fp8Spec(n, k, 1, 3), w, x, k);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<float> row = w.row(r);
    for (int64_t c = 0; c < k; ++c) {
      // -0 (code 0x80) sums with the +0 products of the other columns to +0.
      float want = roundBf16(row[size_t(c)]);
      float got = y[size_t(c * n + r)];
      ASSERT_EQ(want == 0.0f ? bits(std::fabs(got)) : bits(got),
                want == 0.0f ? 0u : bits(want))
          << "W[" << r << ", " << c << "] code " << int(w.q[size_t(r * k + c)]);
    }
  }
}

TEST(DataKernel, Fp8GemmMatchesCpuMatmul) {
  // Both operands are rounded to bf16 before the MFMA (as the gfx942 MXFP4
  // path does): |gpu - cpu| <= 2^-7 * sum_k |x_k| |w_k|.
  struct Case {
    int64_t m, n, k, mt, nt;
  };
  cpu::ThreadPool pool(1);
  for (Case t : {Case{5, 150, 288, 1, 4}, Case{37, 40, 160, 2, 3},
                 Case{1, 16, 32, 1, 1}}) {
    Fp8Weight w = randomFp8(t.n, t.k, uint32_t(t.n + t.k));
    std::vector<float> x = randomFloats(size_t(t.m * t.k), 82);
    KernelSpec s = fp8Spec(t.n, t.k, t.mt, t.nt);
    ASSERT_EQ(s.validate(), "");
    std::vector<float> y = runFp8(s, w, x, t.m);
    std::vector<float> expect(y.size());
    cpu::matmul(pool, x.data(), t.m, w.view(), expect.data());
    double worst = 0;
    for (int64_t r = 0; r < t.n; ++r) {
      std::vector<float> row = w.row(r);
      for (int64_t i = 0; i < t.m; ++i) {
        double mag = 0;
        for (int64_t c = 0; c < t.k; ++c)
          mag += std::fabs(double(x[size_t(i * t.k + c)]) * row[size_t(c)]);
        double err = std::fabs(double(y[size_t(i * t.n + r)]) -
                               double(expect[size_t(i * t.n + r)]));
        EXPECT_LE(err, mag / 128) << "y[" << i << ", " << r << "]";
        worst = std::max(worst, err / mag);
      }
    }
    RecordProperty("fp8_gemm_max_err_over_abs_dot_m" + std::to_string(t.m),
                   sci(worst));
  }
}

TEST(DataKernel, Fp8GemmNativeMatchesReference) {
  // qa = 1 (Fp8Tiles.h): bit for bit the reference that quantizes the
  // activations per 1 x 128 block as the kernel does (Fp8Reference.h), on
  // both chips: partial M and N tiles, K a multiple of 32 but not of 128
  // (288, 160, 32), N over three scale rows, an all-zero row (scale 0) and
  // a row with an outlier. The errors of both paths against cpu::matmul (f32
  // activations) are recorded as relative L2 norms.
  struct Case {
    int64_t m, n, k, mt, nt;
  };
  cpu::ThreadPool pool(1);
  for (Chip chip : {Chip::Gfx950, Chip::Gfx942})
    for (Case t : {Case{5, 150, 288, 1, 4}, Case{37, 40, 160, 2, 3},
                   Case{1, 16, 32, 1, 1}, Case{3, 300, 384, 1, 4}}) {
      Fp8Weight w = randomFp8(t.n, t.k, uint32_t(t.n + t.k));
      std::vector<float> x = randomFloats(size_t(t.m * t.k), 83);
      if (t.m >= 3) {
        std::fill_n(x.begin() + t.k, t.k, 0.0f);
        x[size_t(2 * t.k + 5)] = 300.0f;
      }
      KernelSpec s = spec(KernelKind::Fp8Gemm,
                          {{"n", t.n},
                           {"k", t.k},
                           {"mt", t.mt},
                           {"nt", t.nt},
                           {"wg", 64},
                           {"waves", 4},
                           {"qa", 1}},
                          chip);
      ASSERT_EQ(s.validate(), "");
      std::vector<float> y = runFp8(s, w, x, t.m);
      std::vector<float> want =
          fp8ref::gemm(x.data(), t.m, w.q.data(), w.scales.data(), t.n, t.k,
                       chip == Chip::Gfx950);
      expectSameBits(y, want, s.symbol().c_str());
      std::vector<float> f32(y.size());
      cpu::matmul(pool, x.data(), t.m, w.view(), f32.data());
      std::vector<float> bf16 =
          runFp8(fp8Spec(t.n, t.k, t.mt, t.nt), w, x, t.m);
      auto relL2 = [&](const std::vector<float> &a) {
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          num += (double(a[i]) - f32[i]) * (double(a[i]) - f32[i]);
          den += double(f32[i]) * f32[i];
        }
        return std::sqrt(num / den);
      };
      std::string tag = std::string(chipInfo(chip).name) + "_m" +
                        std::to_string(t.m) + "_k" + std::to_string(t.k);
      RecordProperty("fp8_native_rel_l2_" + tag, sci(relL2(y)));
      RecordProperty("fp8_bf16_rel_l2_" + tag, sci(relL2(bf16)));
    }
}

//===----------------------------------------------------------------------===//
// GpuLowerData: dispatches lowered to launches, run as the HIP runner would
// (grids evaluated on the rows, arguments bound by GpuArgRef), vs the CPU
// semantics of PlanRunner.
//===----------------------------------------------------------------------===//

/// A plan with the given buffers and one dispatch over them.
struct LoweringCase {
  emit::PlanSpec plan;
  emit::ProgramSpec program;
  std::vector<emit::StoredForm> weights;
  emit::DispatchSpec dispatch;

  uint32_t buffer(kiln::abi::RowsKind rows, std::vector<int64_t> shape,
                  bool i32 = false) {
    plan.buffers.push_back({"b" + std::to_string(plan.buffers.size()), rows,
                            i32, std::move(shape)});
    return uint32_t(plan.buffers.size() - 1);
  }
  uint32_t vectorWeight(int64_t n) {
    emit::WeightSpec w;
    w.name = "w" + std::to_string(program.weights.size());
    w.shape = {n};
    w.dtype = emit::ElemType::F32;
    program.weights.push_back(w);
    weights.emplace_back();
    return uint32_t(program.weights.size() - 1);
  }
  std::optional<emit::GpuDispatchLowering> lower() {
    return emit::lowerDataDispatch({plan, dispatch, program, weights});
  }
};

/// What a dispatch argument is bound to: its memory and its row count.
struct Bound {
  void *data;
  size_t bytes;
  int64_t rows;
  template <class T> static Bound of(std::vector<T> &v, int64_t rows) {
    return {v.data(), v.size() * sizeof(T), rows};
  }
};

void runLowering(const emit::GpuDispatchLowering &lowering,
                 std::vector<Bound> args, int64_t rows) {
  ASSERT_TRUE(lowering.scratch.empty());
  for (const emit::GpuLaunchSpec &l : lowering.launches) {
    ASSERT_EQ(l.spec.validate(), "") << l.spec.symbol();
    std::array<int64_t, 3> grid;
    for (int a = 0; a < 3; ++a) {
      const emit::GpuGridAxis &g = l.grid[size_t(a)];
      grid[size_t(a)] =
          g.evaluate(g.rowsOf >= 0 ? args[size_t(g.rowsOf)].rows : rows);
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
      continue;
    std::vector<KernelArg> kernelArgs;
    for (const emit::GpuArgRef &r : l.args) {
      switch (r.part) {
      case emit::GpuArgRef::Part::Data:
        kernelArgs.push_back(
            KernelArg::ptr(args[r.index].data, args[r.index].bytes));
        break;
      case emit::GpuArgRef::Part::Rows:
        kernelArgs.push_back(KernelArg::i32(int32_t(rows)));
        break;
      case emit::GpuArgRef::Part::RowsOf:
        kernelArgs.push_back(KernelArg::i32(int32_t(args[r.index].rows)));
        break;
      default:
        FAIL() << "unexpected argument part " << int(r.part);
      }
    }
    std::string error = interp::runKernel(l.spec, grid, kernelArgs);
    ASSERT_EQ(error, "") << l.spec.symbol();
  }
}

constexpr kiln::abi::RowsKind kTokens = kiln::abi::RowsKind::Tokens;
constexpr kiln::abi::RowsKind kSelected = kiln::abi::RowsKind::Selected;
constexpr kiln::abi::RowsKind kOne = kiln::abi::RowsKind::One;

emit::ArgSpec bufArg(uint32_t i) { return {emit::ArgKind::Buffer, i}; }

TEST(DataLowering, SwappedBroadcastAddOfOneRowBuffer) {
  // add(lhs = one-row [1, 8], rhs = [T, 24]): the dispatch's rows are the
  // lhs's (1), the launch must count the full operand's rows (T).
  LoweringCase c;
  uint32_t vec = c.buffer(kOne, {8}), full = c.buffer(kTokens, {24}),
           out = c.buffer(kTokens, {24});
  c.dispatch = {
      kiln::abi::Kernel::Add, {bufArg(vec), bufArg(full), bufArg(out)}, {}, ""};
  std::optional<emit::GpuDispatchLowering> l = c.lower();
  ASSERT_TRUE(l.has_value());
  const int64_t t = 300; // several workgroups
  std::vector<float> v = randomFloats(8, 91), x = randomFloats(t * 24, 92);
  std::vector<float> y(x.size()), expect(x.size());
  runLowering(*l, {Bound::of(v, 1), Bound::of(x, t), Bound::of(y, t)}, 1);
  cpu::add(x.data(), v.data(), t * 3, 8, expect.data(), true);
  expectSameBits(y, expect, "swapped broadcast add");
}

TEST(DataLowering, SameShapeAddIsTheBinaryKernel) {
  // A residual add: two [T, 999] buffers (scalar accesses, 999 % 4 != 0).
  LoweringCase c;
  uint32_t a = c.buffer(kTokens, {999}), b = c.buffer(kTokens, {999}),
           out = c.buffer(kTokens, {999});
  c.dispatch = {
      kiln::abi::Kernel::Add, {bufArg(a), bufArg(b), bufArg(out)}, {}, ""};
  std::optional<emit::GpuDispatchLowering> l = c.lower();
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->launches.size(), 1u);
  EXPECT_EQ(l->launches[0].spec.kind, KernelKind::Binary);
  const int64_t t = 5;
  std::vector<float> x = randomFloats(t * 999, 95),
                     z = randomFloats(t * 999, 96);
  std::vector<float> y(x.size()), expect(x.size());
  runLowering(*l, {Bound::of(x, t), Bound::of(z, t), Bound::of(y, t)}, t);
  cpu::add(x.data(), z.data(), t, 999, expect.data());
  expectSameBits(y, expect, "same-shape add");
}

TEST(DataLowering, MulByVectorWeight) {
  LoweringCase c;
  uint32_t x = c.buffer(kTokens, {3, 5}), out = c.buffer(kTokens, {3, 5});
  uint32_t w = c.vectorWeight(5);
  c.dispatch = {kiln::abi::Kernel::Mul,
                {bufArg(x), {emit::ArgKind::Weight, w}, bufArg(out)},
                {},
                ""};
  std::optional<emit::GpuDispatchLowering> l = c.lower();
  ASSERT_TRUE(l.has_value());
  const int64_t t = 7;
  std::vector<float> xs = randomFloats(t * 15, 93), ws = randomFloats(5, 94);
  std::vector<float> y(xs.size()), expect(xs.size());
  runLowering(*l, {Bound::of(xs, t), Bound::of(ws, 1), Bound::of(y, t)}, t);
  cpu::mul(xs.data(), ws.data(), t * 3, 5, expect.data(), true);
  expectSameBits(y, expect, "mul by weight");
}

TEST(DataLowering, SplitThenConcatRoundTrips) {
  // [T, 3 heads, 7 + 2 + 4] split along the last axis (3 blocks per row).
  LoweringCase s;
  uint32_t whole = s.buffer(kTokens, {3, 13});
  uint32_t a = s.buffer(kTokens, {3, 7}), b = s.buffer(kTokens, {3, 2}),
           c = s.buffer(kTokens, {3, 4});
  s.dispatch = {kiln::abi::Kernel::Split,
                {bufArg(whole), bufArg(a), bufArg(b), bufArg(c)},
                kiln::abi::SplitParams{2, 3},
                ""};
  std::optional<emit::GpuDispatchLowering> split = s.lower();
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->launches.size(), 3u);
  const int64_t t = 5;
  std::vector<float> x = randomFloats(t * 39, 95);
  std::vector<float> pa(t * 21), pb(t * 6), pc(t * 12);
  runLowering(
      *split,
      {Bound::of(x, t), Bound::of(pa, t), Bound::of(pb, t), Bound::of(pc, t)},
      t);
  for (int64_t blk = 0; blk < t * 3; ++blk)
    for (int64_t j = 0; j < 13; ++j) {
      float v = x[size_t(blk * 13 + j)];
      float got = j < 7   ? pa[size_t(blk * 7 + j)]
                  : j < 9 ? pb[size_t(blk * 2 + j - 7)]
                          : pc[size_t(blk * 4 + j - 9)];
      ASSERT_EQ(bits(got), bits(v)) << "block " << blk << " col " << j;
    }
  LoweringCase k;
  uint32_t ka = k.buffer(kTokens, {3, 7}), kb = k.buffer(kTokens, {3, 2}),
           kc = k.buffer(kTokens, {3, 4}), kw = k.buffer(kTokens, {3, 13});
  k.dispatch = {kiln::abi::Kernel::Concat,
                {bufArg(ka), bufArg(kb), bufArg(kc), bufArg(kw)},
                kiln::abi::ConcatParams{2, 3},
                ""};
  std::optional<emit::GpuDispatchLowering> concat = k.lower();
  ASSERT_TRUE(concat.has_value());
  std::vector<float> back(x.size(), 0.0f);
  runLowering(*concat,
              {Bound::of(pa, t), Bound::of(pb, t), Bound::of(pc, t),
               Bound::of(back, t)},
              t);
  expectSameBits(back, x, "concat(split(x))");
}

TEST(DataLowering, TopKGatherSoftmaxOnGroupedRows) {
  // x [T, 2, 10]: top_k 3 per group, softmax and gather per group of 10.
  const int64_t t = 4;
  std::vector<float> x = tiedScores(size_t(t * 20), 96);
  LoweringCase c;
  uint32_t xb = c.buffer(kTokens, {2, 10}), vb = c.buffer(kTokens, {2, 3}),
           ib = c.buffer(kTokens, {2, 3}, true);
  c.dispatch = {kiln::abi::Kernel::TopK,
                {bufArg(xb), bufArg(vb), bufArg(ib)},
                kiln::abi::TopKParams{3},
                ""};
  std::optional<emit::GpuDispatchLowering> topk = c.lower();
  ASSERT_TRUE(topk.has_value());
  std::vector<float> values(t * 6), expectV(t * 6);
  std::vector<int32_t> idx(t * 6), expectI(t * 6);
  runLowering(*topk, {Bound::of(x, t), Bound::of(values, t), Bound::of(idx, t)},
              t);
  cpu::topK(x.data(), t * 2, 10, 3, expectV.data(), expectI.data());
  expectSameBits(values, expectV, "top_k");
  EXPECT_EQ(idx, expectI);

  LoweringCase g;
  uint32_t gx = g.buffer(kTokens, {2, 10}),
           gi = g.buffer(kTokens, {2, 3}, true), go = g.buffer(kTokens, {2, 3});
  g.dispatch = {
      kiln::abi::Kernel::Gather, {bufArg(gx), bufArg(gi), bufArg(go)}, {}, ""};
  std::optional<emit::GpuDispatchLowering> gather = g.lower();
  ASSERT_TRUE(gather.has_value());
  std::vector<float> picked(t * 6), expectG(t * 6);
  runLowering(*gather,
              {Bound::of(x, t), Bound::of(expectI, t), Bound::of(picked, t)},
              t);
  cpu::gather(x.data(), t * 2, 10, expectI.data(), 3, expectG.data());
  expectSameBits(picked, expectG, "gather");

  LoweringCase m;
  uint32_t mx = m.buffer(kTokens, {2, 10}), my = m.buffer(kTokens, {2, 10});
  m.dispatch = {kiln::abi::Kernel::Softmax, {bufArg(mx), bufArg(my)}, {}, ""};
  std::optional<emit::GpuDispatchLowering> softmax = m.lower();
  ASSERT_TRUE(softmax.has_value());
  std::vector<float> sx = randomFloats(t * 20, 97), sy(t * 20), se(t * 20);
  runLowering(*softmax, {Bound::of(sx, t), Bound::of(sy, t)}, t);
  cpu::softmax(sx.data(), t * 2, 10, se.data());
  expectClose(sy, se, 2e-6, "softmax");
}

TEST(DataLowering, TakeRowsCountsTheIndexRows) {
  LoweringCase c;
  uint32_t x = c.buffer(kTokens, {6}), r = c.buffer(kSelected, {1}, true),
           out = c.buffer(kSelected, {6});
  c.dispatch = {
      kiln::abi::Kernel::TakeRows, {bufArg(x), bufArg(r), bufArg(out)}, {}, ""};
  std::optional<emit::GpuDispatchLowering> l = c.lower();
  ASSERT_TRUE(l.has_value());
  const int64_t t = 9;
  std::vector<float> xs = randomFloats(t * 6, 98);
  std::vector<int32_t> rows = {8, 0, 3};
  std::vector<float> y(rows.size() * 6);
  runLowering(*l, {Bound::of(xs, t), Bound::of(rows, 3), Bound::of(y, 3)}, t);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < 6; ++j)
      ASSERT_EQ(bits(y[i * 6 + j]), bits(xs[size_t(rows[i]) * 6 + j]));
}

TEST(DataLowering, LeavesUncoveredShapesToTheCpu) {
  // A broadcast operand with Tokens rows is not a broadcast (the CPU
  // validator rejects it too): no lowering.
  LoweringCase c;
  uint32_t a = c.buffer(kTokens, {8}), b = c.buffer(kTokens, {4}),
           out = c.buffer(kTokens, {8});
  c.dispatch = {
      kiln::abi::Kernel::Add, {bufArg(a), bufArg(b), bufArg(out)}, {}, ""};
  EXPECT_FALSE(c.lower().has_value());
}

TEST(DataKernel, SpecsRejectBadParams) {
  EXPECT_NE(spec(KernelKind::TopK, {{"c", 4}, {"k", 5}}).validate(), "");
  EXPECT_NE(
      spec(KernelKind::GroupLimit, {{"c", 10}, {"g", 3}, {"k", 1}}).validate(),
      "");
  EXPECT_NE(
      spec(KernelKind::Binary, {{"op", 0}, {"c", 10}, {"bc", 4}, {"w", 1}})
          .validate(),
      "");
  EXPECT_NE(
      spec(KernelKind::Unary, {{"op", 0}, {"c", 10}, {"w", 4}}).validate(), "");
  // softmax does not declare wg: its workgroup is kRowBlock.
  EXPECT_FALSE(KernelSpec::fromSymbol("kiln_softmax_c10_wg128_gfx950"));
  EXPECT_EQ(spec(KernelKind::Softmax, {{"c", 10}}).validate(), "");
  // Symbols round-trip.
  KernelSpec s = spec(KernelKind::CopyBlocks, {{"outer", 2},
                                               {"chunk", 4},
                                               {"sstride", 8},
                                               {"soff", 4},
                                               {"dstride", 4},
                                               {"doff", 0},
                                               {"w", 4}});
  std::optional<KernelSpec> back = KernelSpec::fromSymbol(s.symbol());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->symbol(), s.symbol());
}

} // namespace
