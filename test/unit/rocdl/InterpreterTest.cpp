//===- InterpreterTest.cpp - The generated kernels, executed, vs the runtime //
//
// Every kernel kind is built with buildKernels (the IR that goes to the
// GPU), executed by the CPU interpreter and compared with the CPU runtime
// on the same random inputs:
//  * GEMMs: (a) against the runtime's f32 GEMM over the activations as the
//    kernel rounds them (MXFP4 "even" blocks on gfx950, bf16 on gfx942 and
//    in bf16_gemm), per output |y - ref| <= 1e-4 * sum_k |a_k w_k|; and
//    (b) against the runtime on the raw f32 activations, normalized error
//    below 0.2 (MXFP4 activations) or 1e-2 (bf16), as GemmEmulatorTest.
//  * row kernels: max relative error against the runtime function.
// Negative controls show that the comparisons and checks can fail.
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/KernelInterpreter.h"

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/codegen/rocdl/MxWeightShuffle.h"
#include "passes/codegen/rocdl/RocdlCodegen.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Norm.h"
#include "runtime/cpu/RowOps.h"
#include "runtime/cpu/Types.h"
#include "runtime/cpu/attention/Rope.h"
#include "test/unit/rocdl/MxTestWeights.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

using namespace kiln;
using namespace kiln::rocdl;
using interp::KernelArg;
using interp::runKernel;
using kiln::rocdl::test::gemmSpec;
using kiln::rocdl::test::makeActivations;
using kiln::rocdl::test::makeMxWeights;
using kiln::rocdl::test::mxView;
using kiln::rocdl::test::MxWeights;
using kiln::rocdl::test::mxWeightValue;

namespace {

void report(const std::string &what, double value) {
  ::testing::Test::RecordProperty(what, std::to_string(value));
  std::cout << "[ metric   ] " << what << " = " << value << "\n";
}

std::vector<float> randomVec(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// Activations as the gfx950 kernel quantizes them (Quark "even" MXFP4).
std::vector<float> mxfp4Activations(const std::vector<float> &x, int64_t rows,
                                    int64_t k) {
  std::vector<float> out(x.size());
  std::vector<uint8_t> packed(size_t(k / 2)), scales(size_t(k / 32));
  for (int64_t r = 0; r < rows; ++r) {
    quantizeMxfp4Row(&x[size_t(r * k)], k, Mxfp4ScaleRule::Even, packed.data(),
                     scales.data());
    for (int64_t i = 0; i < k; ++i) {
      uint8_t byte = packed[size_t(i / 2)];
      uint8_t code = (i % 2) ? byte >> 4 : byte & 0xF;
      out[size_t(r * k + i)] =
          cpu::e2m1ToFloat(code) * cpu::e8m0ToFloat(scales[size_t(i / 32)]);
    }
  }
  return out;
}

std::vector<float> bf16Activations(const std::vector<float> &x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = cpu::bf16ToFloat(cpu::floatToBf16(x[i]));
  return out;
}

std::vector<float> runtimeGemm(const std::vector<float> &x, int64_t rows,
                               const cpu::WeightView &w) {
  cpu::ThreadPool pool(1);
  std::vector<float> y(size_t(rows * w.rows));
  cpu::matmul(pool, x.data(), rows, w, y.data());
  return y;
}

double normalizedError(const std::vector<float> &y,
                       const std::vector<float> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

/// Max over outputs of |y - ref| / sum_k |a_k w_k|; `weight(c, i)` is W.
template <class W>
double maxScaledError(const std::vector<float> &y,
                      const std::vector<float> &ref,
                      const std::vector<float> &a, int64_t rows, int64_t n,
                      int64_t k, W weight) {
  std::vector<double> wv(size_t(n * k));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i)
      wv[size_t(c * k + i)] = std::fabs(weight(c, i));
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double mag = 1e-30;
      for (int64_t i = 0; i < k; ++i)
        mag += std::fabs(double(a[size_t(r * k + i)])) * wv[size_t(c * k + i)];
      double got = y[size_t(r * n + c)], want = ref[size_t(r * n + c)];
      double e = std::isfinite(got) ? std::fabs(got - want) / mag : 1e30;
      worst = std::max(worst, e);
    }
  return worst;
}

std::string runMx(const KernelSpec &spec, std::vector<float> &x, int64_t rows,
                  ShuffledMxWeight &w, std::vector<float> &y) {
  return runKernel(spec, spec.grid(rows),
                   {KernelArg::of(x), KernelArg::of(w.data),
                    KernelArg::of(w.scales), KernelArg::of(y),
                    KernelArg::i32(int32_t(rows))});
}

struct GemmShape {
  int64_t rows, n, k;
};

std::string chipTag(Chip chip) { return std::string(chipInfo(chip).name); }

class InterpMxGemm
    : public ::testing::TestWithParam<std::tuple<Chip, int64_t>> {};

TEST_P(InterpMxGemm, MatchesRuntime) {
  auto [chip, mHint] = GetParam();
  // Odd row counts (partial M tiles), N past the last tile, K with a tail
  // inside the last step and a partial scale word (608 = 4.75 steps), and
  // one whole scale word.
  const GemmShape shapes[] = {{mHint > 16 ? 37 : 5, 80, 608},
                              {mHint > 16 ? 33 : 1, 64, 512}};
  bool fp4 = chip == Chip::Gfx950;
  uint32_t seed = 11;
  for (const GemmShape &s : shapes) {
    std::string tag = chipTag(chip) + "_m" + std::to_string(mHint) + "_rows" +
                      std::to_string(s.rows) + "_n" + std::to_string(s.n) +
                      "_k" + std::to_string(s.k);
    SCOPED_TRACE(tag);
    KernelSpec spec = gemmSpec(KernelKind::MxGemm, chip, mHint, s.n, s.k);
    EXPECT_EQ(spec.tiling.mTiles, mHint > 16 ? 2 : 1);
    EXPECT_EQ(spec.tiling.nTiles, 4);
    MxWeights w = makeMxWeights(s.n, s.k, seed++);
    std::vector<float> x = makeActivations(s.rows, s.k, seed++);
    std::vector<float> y(size_t(s.rows * s.n), std::nanf(""));
    ASSERT_EQ(runMx(spec, x, s.rows, w.shuffled, y), "");
    std::vector<float> a =
        fp4 ? mxfp4Activations(x, s.rows, s.k) : bf16Activations(x);
    std::vector<float> ref = runtimeGemm(a, s.rows, mxView(w));
    double scaled =
        maxScaledError(y, ref, a, s.rows, s.n, s.k, [&](int64_t c, int64_t i) {
          return mxWeightValue(w, c, i);
        });
    report("mx_gemm_" + tag + "_max_err_vs_matched_runtime", scaled);
    EXPECT_LE(scaled, 1e-4);
    double raw = normalizedError(y, runtimeGemm(x, s.rows, mxView(w)));
    report("mx_gemm_" + tag + "_norm_err_vs_f32_runtime", raw);
    EXPECT_LT(raw, fp4 ? 0.2 : 1e-2);
  }
}

TEST_P(InterpMxGemm, CheckpointLayoutWeightsFail) {
  // Negative control: the checkpoint bytes instead of the shuffled ones.
  auto [chip, mHint] = GetParam();
  int64_t rows = mHint > 16 ? 33 : 7;
  KernelSpec spec = gemmSpec(KernelKind::MxGemm, chip, mHint, 64, 512);
  MxWeights w = makeMxWeights(64, 512, 7);
  std::vector<float> x = makeActivations(rows, 512, 8);
  ShuffledMxWeight wrong = w.shuffled;
  std::copy(w.packed.begin(), w.packed.end(), wrong.data.begin());
  std::vector<float> y(size_t(rows * 64));
  ASSERT_EQ(runMx(spec, x, rows, wrong, y), "");
  double err = normalizedError(y, runtimeGemm(x, rows, mxView(w)));
  report("mx_gemm_" + chipTag(chip) + "_m" + std::to_string(mHint) +
             "_unshuffled_norm_err",
         err);
  EXPECT_GT(err, 0.5);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, InterpMxGemm,
    ::testing::Combine(::testing::Values(Chip::Gfx950, Chip::Gfx942),
                       ::testing::Values(int64_t(1), int64_t(64))),
    [](const auto &info) {
      return chipTag(std::get<0>(info.param)) + "_m" +
             std::to_string(std::get<1>(info.param));
    });

class InterpBf16Gemm : public ::testing::TestWithParam<Chip> {};

TEST_P(InterpBf16Gemm, MatchesRuntime) {
  Chip chip = GetParam();
  const GemmShape shapes[] = {{5, 72, 160}, {37, 64, 256}};
  uint32_t seed = 100;
  for (const GemmShape &s : shapes) {
    std::string tag = chipTag(chip) + "_rows" + std::to_string(s.rows) + "_n" +
                      std::to_string(s.n) + "_k" + std::to_string(s.k);
    SCOPED_TRACE(tag);
    KernelSpec spec = gemmSpec(KernelKind::Bf16Gemm, chip, s.rows, s.n, s.k);
    std::vector<float> wf = randomVec(size_t(s.n * s.k), seed++);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = cpu::floatToBf16(wf[i]);
    std::vector<float> x = makeActivations(s.rows, s.k, seed++);
    std::vector<float> y(size_t(s.rows * s.n), std::nanf(""));
    ASSERT_EQ(runKernel(spec, spec.grid(s.rows),
                        {KernelArg::of(x), KernelArg::of(w), KernelArg::of(y),
                         KernelArg::i32(int32_t(s.rows))}),
              "");
    cpu::WeightView view;
    view.format = cpu::WeightFormat::BF16;
    view.data = w.data();
    view.rows = s.n;
    view.cols = s.k;
    std::vector<float> a = bf16Activations(x);
    double scaled =
        maxScaledError(y, runtimeGemm(a, s.rows, view), a, s.rows, s.n, s.k,
                       [&](int64_t c, int64_t i) {
                         return cpu::bf16ToFloat(w[size_t(c * s.k + i)]);
                       });
    report("bf16_gemm_" + tag + "_max_err_vs_matched_runtime", scaled);
    EXPECT_LE(scaled, 1e-4);
    double raw = normalizedError(y, runtimeGemm(x, s.rows, view));
    report("bf16_gemm_" + tag + "_norm_err_vs_f32_runtime", raw);
    EXPECT_LT(raw, 1e-2);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, InterpBf16Gemm,
                         ::testing::Values(Chip::Gfx950, Chip::Gfx942),
                         [](const auto &info) { return chipTag(info.param); });

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

KernelSpec checked(KernelSpec s) {
  EXPECT_EQ(s.validate(), "");
  return s;
}

KernelSpec rmsNormSpec(int64_t cols, float eps) {
  RmsNormParams p;
  p.c = cols;
  p.eps = eps;
  return checked(makeSpec(p));
}

KernelSpec swigluSpec(int64_t cols) {
  SwiGluParams p;
  p.c = cols;
  return checked(makeSpec(p));
}

double maxRelError(const std::vector<float> &y, const std::vector<float> &ref,
                   double floor) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double e = std::fabs(double(y[i]) - ref[i]) /
               std::max(floor, std::fabs(double(ref[i])));
    worst = std::max(worst, std::isnan(e) ? 1e30 : e);
  }
  return worst;
}

TEST(InterpRowKernels, RmsNorm) {
  for (int64_t cols : {1000, 1002}) { // vectors of 4, and scalar accesses
    SCOPED_TRACE(cols);
    int64_t rows = 7;
    const float eps = 1e-5f;
    KernelSpec spec = rmsNormSpec(cols, eps);
    std::vector<float> x = randomVec(size_t(rows * cols), 1, 2.0f);
    std::vector<float> w = randomVec(size_t(cols), 2);
    std::vector<float> y(x.size(), std::nanf("")), ref(x.size());
    ASSERT_EQ(runKernel(spec, spec.grid(rows),
                        {KernelArg::of(x), KernelArg::of(w), KernelArg::of(y)}),
              "");
    cpu::rmsNorm(x.data(), rows, cols, w.data(), eps, ref.data());
    double err = maxRelError(y, ref, 1e-3);
    report("rms_norm_c" + std::to_string(cols) + "_max_rel_err", err);
    EXPECT_LT(err, 1e-5);
  }
}

TEST(InterpRowKernels, SwiGlu) {
  int64_t rows = 5, cols = 1000;
  KernelSpec spec = swigluSpec(cols);
  std::vector<float> g = randomVec(size_t(rows * cols), 3, 4.0f);
  std::vector<float> u = randomVec(size_t(rows * cols), 4);
  g[0] = -60.0f; // exp2 overflow side
  g[1] = 60.0f;
  std::vector<float> y(g.size(), std::nanf("")), ref(g.size());
  ASSERT_EQ(runKernel(spec, spec.grid(rows),
                      {KernelArg::of(g), KernelArg::of(u), KernelArg::of(y)}),
            "");
  cpu::swiglu(g.data(), u.data(), int64_t(g.size()), ref.data());
  double err = maxRelError(y, ref, 1e-3);
  report("swiglu_max_rel_err", err);
  EXPECT_LT(err, 1e-5);
}

class InterpRope : public ::testing::TestWithParam<bool> {};

TEST_P(InterpRope, MatchesRuntime) {
  bool neox = GetParam();
  RopeParams p;
  p.neox = neox ? 1 : 0;
  p.h = 3;
  p.d = 64;
  p.o = 8;
  p.r = 32;
  p.theta = 10000.0f;
  KernelSpec spec = checked(makeSpec(p));
  int64_t tokens = 5, rowElems = p.h * p.d;
  std::vector<float> x = randomVec(size_t(tokens * rowElems), 7);
  std::vector<int32_t> pos = {0, 1, 17, 4093, 131071};
  std::vector<float> y(x.size(), std::nanf("")), ref = x;
  ASSERT_EQ(runKernel(spec, spec.grid(tokens),
                      {KernelArg::of(x), KernelArg::of(pos), KernelArg::of(y)}),
            "");
  cpu::rope(ref.data(), tokens, p.h, p.d, pos.data(),
            neox ? cpu::RopeStyle::Neox : cpu::RopeStyle::Interleaved, p.theta,
            p.o, p.r);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(double(y[i]) - ref[i]));
  report(std::string("rope_") + (neox ? "neox" : "interleaved") +
             "_max_abs_err",
         worst);
  EXPECT_LT(worst, 2e-6);
  // Dims outside the rotary span are copied exactly.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < p.h; ++h)
      for (int64_t d = 0; d < p.d; ++d)
        if (d < p.o || d >= p.o + p.r) {
          size_t i = size_t((t * p.h + h) * p.d + d);
          ASSERT_EQ(y[i], x[i]);
        }
}

INSTANTIATE_TEST_SUITE_P(Kernels, InterpRope, ::testing::Values(false, true),
                         [](const auto &info) {
                           return std::string(info.param ? "neox"
                                                         : "interleaved");
                         });

TEST(InterpRowKernels, ArgmaxWithTies) {
  int64_t cols = 1000, rows = 6;
  ArgmaxParams p;
  p.c = cols;
  KernelSpec spec = checked(makeSpec(p));
  std::vector<float> x = randomVec(size_t(rows * cols), 9);
  auto row = [&](int64_t r) { return &x[size_t(r * cols)]; };
  std::fill(row(1), row(1) + cols, 0.5f); // all equal: index 0
  row(2)[700] = 9.0f;                     // tie across waves: 3 wins
  row(2)[3] = 9.0f;
  row(3)[999] = 7.0f; // tie inside one thread's elements
  row(3)[743] = 7.0f;
  row(4)[0] = std::nanf(""); // NaN ranks below numbers
  row(4)[500] = 8.0f;
  row(4)[501] = 8.0f;
  row(5)[256] = 6.0f; // same thread (0), two loop iterations
  row(5)[512] = 6.0f;
  std::vector<int32_t> y(size_t(rows), -1), ref(static_cast<size_t>(rows));
  ASSERT_EQ(
      runKernel(spec, spec.grid(rows), {KernelArg::of(x), KernelArg::of(y)}),
      "");
  cpu::argmax(x.data(), rows, cols, ref.data());
  EXPECT_EQ(y, ref);
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 3);
  EXPECT_EQ(y[3], 743);
  EXPECT_EQ(y[4], 500);
  EXPECT_EQ(y[5], 256);
}

//===----------------------------------------------------------------------===//
// The checks themselves
//===----------------------------------------------------------------------===//

TEST(InterpChecks, BufferOneElementTooSmallIsOutOfBounds) {
  int64_t rows = 3, cols = 1000;
  KernelSpec spec = swigluSpec(cols);
  std::vector<float> a(size_t(rows * cols), 1.0f), b = a;
  std::vector<float> y(size_t(rows * cols) - 1);
  std::string error =
      runKernel(spec, spec.grid(rows),
                {KernelArg::of(a), KernelArg::of(b), KernelArg::of(y)});
  std::cout << "[ message  ] " << error << "\n";
  EXPECT_NE(error.find("argument 2"), std::string::npos) << error;
  EXPECT_NE(error.find("element index 2996"), std::string::npos) << error;
  EXPECT_NE(error.find("vector.store"), std::string::npos) << error;
}

TEST(InterpChecks, ArgumentMismatches) {
  KernelSpec spec = swigluSpec(8);
  std::vector<float> a(8);
  EXPECT_NE(runKernel(spec, {1, 1, 1}, {KernelArg::of(a), KernelArg::of(a)})
                .find("takes 3 arguments"),
            std::string::npos);
  std::string error = runKernel(
      spec, {1, 1, 1}, {KernelArg::of(a), KernelArg::i32(3), KernelArg::of(a)});
  EXPECT_NE(error.find("argument 1: expected a pointer"), std::string::npos)
      << error;
}

mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &context,
                                        const char *text) {
  mlir::DialectRegistry registry;
  registerCodegenDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  return mlir::parseSourceString<mlir::ModuleOp>(text, &context);
}

TEST(InterpChecks, UnsupportedOpIsNamed) {
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%x: memref<64xi32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<64xi32>
      %p = math.ipowi %v, %v : i32
      memref.store %p, %x[%t] : memref<64xi32>
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<int32_t> x(64, 2);
  std::string error = runKernel(*module, "k", {1, 1, 1}, {KernelArg::of(x)});
  EXPECT_EQ(error, "unsupported op 'math.ipowi'");
}

TEST(InterpSemantics, WhileShuffleAtomicsAndWorkgroupMemory) {
  // Per-lane trip counts in scf.while, a gpu.shuffle down reduction, LDS
  // through a workgroup attribution and memref.atomic_rmw.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%x: memref<128xi32>, %sum: memref<2xi32>, %n: i32)
        workgroup(%lds: memref<128xi32, #gpu.address_space<workgroup>>)
        kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
      %t = gpu.thread_id x
      %ti = arith.index_cast %t : index to i32
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      // count = number of steps of i -> i + 1 from 0 up to t % n
      %lim = arith.remui %ti, %n : i32
      %cnt:2 = scf.while (%i = %c0, %acc = %c0) : (i32, i32) -> (i32, i32) {
        %go = arith.cmpi ult, %i, %lim : i32
        scf.condition(%go) %i, %acc : i32, i32
      } do {
      ^bb0(%i: i32, %acc: i32):
        %i1 = arith.addi %i, %c1 : i32
        %a1 = arith.addi %acc, %i1 : i32
        scf.yield %i1, %a1 : i32, i32
      }
      memref.store %cnt#1, %lds[%t] : memref<128xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c127 = arith.constant 127 : index
      %r = arith.subi %c127, %t : index
      %other = memref.load %lds[%r] : memref<128xi32, #gpu.address_space<workgroup>>
      memref.store %other, %x[%t] : memref<128xi32>
      %w = arith.constant 64 : i32
      %s1, %v1 = gpu.shuffle down %other, %c1, %w : i32
      %s = arith.addi %other, %s1 : i32
      %wave = arith.divui %t, %c127 : index
      %old = memref.atomic_rmw addi %s, %sum[%wave] : (i32, memref<2xi32>) -> i32
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<int32_t> x(128, -1), sum(2, 0);
  int32_t n = 5;
  ASSERT_EQ(
      runKernel(*module, "k", {1, 1, 1},
                {KernelArg::of(x), KernelArg::of(sum), KernelArg::i32(n)}),
      "");
  auto tri = [&](int t) {
    int m = t % n;
    return m * (m + 1) / 2;
  };
  int64_t expectSum[2] = {0, 0};
  for (int t = 0; t < 128; ++t) {
    EXPECT_EQ(x[size_t(t)], tri(127 - t)) << t;
    int lane = t % 64;
    int s1 = lane + 1 < 64 ? tri(127 - (t + 1)) : tri(127 - t);
    expectSum[t / 127] += tri(127 - t) + s1;
  }
  EXPECT_EQ(sum[0], expectSum[0]);
  EXPECT_EQ(sum[1], expectSum[1]);
}

} // namespace

namespace {

TEST(InterpSemantics, ScaledMfmaFollowsTheLaneTable) {
  // AMDGPU.md section 3, independent of the kernels: A[3][77] (lane 3 +
  // 16 * 2, nibble 13, scale byte 1 of that lane) times B[77][9] (lane 9 +
  // 32, nibble 13, scale byte 3) lands in C[3][9]: lane 9, register 3.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%a: memref<1024xi8>, %b: memref<1024xi8>, %sa: memref<64xi32>,
                %sb: memref<64xi32>, %c: memref<256xf32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %c16 = arith.constant 16 : index
      %c4 = arith.constant 4 : index
      %off = arith.muli %t, %c16 : index
      %av = vector.load %a[%off] : memref<1024xi8>, vector<16xi8>
      %bv = vector.load %b[%off] : memref<1024xi8>, vector<16xi8>
      %af = vector.bitcast %av : vector<16xi8> to vector<32xf4E2M1FN>
      %bf = vector.bitcast %bv : vector<16xi8> to vector<32xf4E2M1FN>
      %saw = memref.load %sa[%t] : memref<64xi32>
      %sbw = memref.load %sb[%t] : memref<64xi32>
      %sa1 = vector.broadcast %saw : i32 to vector<1xi32>
      %sb1 = vector.broadcast %sbw : i32 to vector<1xi32>
      %sas = vector.bitcast %sa1 : vector<1xi32> to vector<4xf8E8M0FNU>
      %sbs = vector.bitcast %sb1 : vector<1xi32> to vector<4xf8E8M0FNU>
      %z = arith.constant dense<0.0> : vector<4xf32>
      %r = amdgpu.scaled_mfma 16x16x128 (%sas[1] * %af) * (%sbs[3] * %bf) + %z
        : vector<4xf8E8M0FNU>, vector<32xf4E2M1FN>, vector<4xf8E8M0FNU>,
          vector<32xf4E2M1FN>, vector<4xf32>
      %o = arith.muli %t, %c4 : index
      vector.store %r, %c[%o] : memref<256xf32>, vector<4xf32>
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<uint8_t> a(1024, 0), b(1024, 0);
  std::vector<uint32_t> sa(64, 0x7F7F7F7Fu), sb(64, 0x7F7F7F7Fu);
  std::vector<float> c(256, std::nanf(""));
  a[35 * 16 + 6] = 0x20; // nibble 13 = code 2 (1.0)
  b[41 * 16 + 6] = 0x50; // code 5 (3.0)
  sa[35] = 0x7F7F817Fu;  // byte 1: 2^2
  sb[41] = 0x7E7F7F7Fu;  // byte 3: 2^-1
  ASSERT_EQ(runKernel(*module, "k", {1, 1, 1},
                      {KernelArg::of(a), KernelArg::of(b), KernelArg::of(sa),
                       KernelArg::of(sb), KernelArg::of(c)}),
            "");
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(c[size_t(4 * l + r)], (l == 9 && r == 3) ? 6.0f : 0.0f)
          << "lane " << l << " register " << r;
}

TEST(InterpSemantics, Bf16MfmaFollowsTheLaneTable) {
  // 16x16x16 bf16: A[3][9] is lane 3 + 16 * (9 / 4), element 9 % 4 = 1;
  // B[9][7] is lane 7 + 32, element 1. C[3][7] is lane 7, register 3.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%a: memref<256xbf16>, %b: memref<256xbf16>,
                %c: memref<256xf32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %c4 = arith.constant 4 : index
      %o = arith.muli %t, %c4 : index
      %av = vector.load %a[%o] : memref<256xbf16>, vector<4xbf16>
      %bv = vector.load %b[%o] : memref<256xbf16>, vector<4xbf16>
      %z = arith.constant dense<0.5> : vector<4xf32>
      %r = amdgpu.mfma 16x16x16 %av * %bv + %z blgp = none
        : vector<4xbf16>, vector<4xbf16>, vector<4xf32>
      vector.store %r, %c[%o] : memref<256xf32>, vector<4xf32>
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<uint16_t> a(256, 0), b(256, 0);
  std::vector<float> c(256, std::nanf(""));
  a[35 * 4 + 1] = cpu::floatToBf16(1.5f);
  b[39 * 4 + 1] = cpu::floatToBf16(-2.0f);
  ASSERT_EQ(runKernel(*module, "k", {1, 1, 1},
                      {KernelArg::of(a), KernelArg::of(b), KernelArg::of(c)}),
            "");
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(c[size_t(4 * l + r)], (l == 7 && r == 3) ? -2.5f : 0.5f)
          << "lane " << l << " register " << r;
}

TEST(InterpSemantics, Fp8MfmaFollowsTheLaneTable) {
  // 16x16x128 f8f6f4 with E4M3FN operands (gfx950): lane l holds K
  // [16 (l / 16), +16) of the first 64 K in bytes 0..15 and the same of the
  // second 64 in bytes 16..31. A[3][77] is lane 3, byte 16 + 13; B[77][9]
  // lane 9, byte 29; A[5][40] lane 5 + 32, byte 8; B[40][9] lane 41, byte 8.
  // 16x16x32 with E4M3FNUZ (gfx942): lane l holds K [8 (l / 16), +8); the
  // code read as FNUZ is half its E4M3FN value, and 0x80 is NaN.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%a: memref<2048xi8>, %b: memref<2048xi8>, %a2: memref<512xi8>,
                %b2: memref<512xi8>, %c: memref<256xf32>, %c2: memref<256xf32>)
        kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %c32 = arith.constant 32 : index
      %c8 = arith.constant 8 : index
      %c4 = arith.constant 4 : index
      %off = arith.muli %t, %c32 : index
      %av = vector.load %a[%off] : memref<2048xi8>, vector<32xi8>
      %bv = vector.load %b[%off] : memref<2048xi8>, vector<32xi8>
      %af = vector.bitcast %av : vector<32xi8> to vector<32xf8E4M3FN>
      %bf = vector.bitcast %bv : vector<32xi8> to vector<32xf8E4M3FN>
      %z = arith.constant dense<0.5> : vector<4xf32>
      %r = amdgpu.mfma 16x16x128 %af * %bf + %z blgp = none
        : vector<32xf8E4M3FN>, vector<32xf8E4M3FN>, vector<4xf32>
      %o = arith.muli %t, %c4 : index
      vector.store %r, %c[%o] : memref<256xf32>, vector<4xf32>
      %off2 = arith.muli %t, %c8 : index
      %av2 = vector.load %a2[%off2] : memref<512xi8>, vector<8xi8>
      %bv2 = vector.load %b2[%off2] : memref<512xi8>, vector<8xi8>
      %af2 = vector.bitcast %av2 : vector<8xi8> to vector<8xf8E4M3FNUZ>
      %bf2 = vector.bitcast %bv2 : vector<8xi8> to vector<8xf8E4M3FNUZ>
      %r2 = amdgpu.mfma 16x16x32 %af2 * %bf2 + %z blgp = none
        : vector<8xf8E4M3FNUZ>, vector<8xf8E4M3FNUZ>, vector<4xf32>
      vector.store %r2, %c2[%o] : memref<256xf32>, vector<4xf32>
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<uint8_t> a(2048, 0), b(2048, 0), a2(512, 0), b2(512, 0);
  std::vector<float> c(256, std::nanf("")), c2(256, std::nanf(""));
  a[3 * 32 + 29] = 0x40; // 2.0
  b[9 * 32 + 29] = 0xC4; // -3.0
  a[37 * 32 + 8] = 0x01; // 2^-9 (the smallest subnormal)
  b[41 * 32 + 8] = 0x7E; // 448
  a2[19 * 8 + 1] = 0x48; // A[3][9]: FNUZ 2.0
  b2[23 * 8 + 1] = 0xC0; // B[9][7]: FNUZ -1.0
  a2[1 * 8 + 0] = 0x80;  // A[1][0]: NaN
  ASSERT_EQ(runKernel(*module, "k", {1, 1, 1},
                      {KernelArg::of(a), KernelArg::of(b), KernelArg::of(a2),
                       KernelArg::of(b2), KernelArg::of(c), KernelArg::of(c2)}),
            "");
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < 4; ++r) {
      // C[3][9]: lane 9, register 3; C[5][9]: lane 9 + 16, register 1.
      float want = l == 9 && r == 3    ? 0.5f - 6.0f
                   : l == 25 && r == 1 ? 0.5f + 0.875f
                                       : 0.5f;
      EXPECT_EQ(c[size_t(4 * l + r)], want) << "lane " << l << " reg " << r;
      // C[3][7]: lane 7, register 3; row 1 (lanes 0..15, register 1) NaN.
      float got = c2[size_t(4 * l + r)];
      if (l < 16 && r == 1)
        EXPECT_TRUE(std::isnan(got)) << "lane " << l;
      else
        EXPECT_EQ(got, l == 7 && r == 3 ? -1.5f : 0.5f)
            << "lane " << l << " reg " << r;
    }
}

TEST(InterpSemantics, PackedTruncToFp8RoundsToNearestEven) {
  // v_cvt_pk_fp8_f32: two f32 into word 0 or 1 of four E4M3FN codes.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%x: memref<512xf32>, %y: memref<128xi32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %c8 = arith.constant 8 : index
      %c2 = arith.constant 2 : index
      %o = arith.muli %t, %c8 : index
      %v = vector.load %x[%o] : memref<512xf32>, vector<8xf32>
      %e0 = vector.extract %v[0] : f32 from vector<8xf32>
      %e1 = vector.extract %v[1] : f32 from vector<8xf32>
      %e2 = vector.extract %v[2] : f32 from vector<8xf32>
      %e3 = vector.extract %v[3] : f32 from vector<8xf32>
      %e4 = vector.extract %v[4] : f32 from vector<8xf32>
      %e5 = vector.extract %v[5] : f32 from vector<8xf32>
      %e6 = vector.extract %v[6] : f32 from vector<8xf32>
      %e7 = vector.extract %v[7] : f32 from vector<8xf32>
      %w0 = amdgpu.packed_trunc_2xfp8 %e0, %e1 into undef[word 0] : f32 to vector<4xf8E4M3FN>
      %w1 = amdgpu.packed_trunc_2xfp8 %e2, %e3 into %w0[word 1] : f32 to vector<4xf8E4M3FN> into vector<4xf8E4M3FN>
      %u0 = amdgpu.packed_trunc_2xfp8 %e4, %e5 into undef[word 0] : f32 to vector<4xf8E4M3FNUZ>
      %u1 = amdgpu.packed_trunc_2xfp8 %e6, %e7 into %u0[word 1] : f32 to vector<4xf8E4M3FNUZ> into vector<4xf8E4M3FNUZ>
      %i0 = vector.bitcast %w1 : vector<4xf8E4M3FN> to vector<1xi32>
      %i1 = vector.bitcast %u1 : vector<4xf8E4M3FNUZ> to vector<1xi32>
      %s0 = vector.extract %i0[0] : i32 from vector<1xi32>
      %s1 = vector.extract %i1[0] : i32 from vector<1xi32>
      %p = arith.muli %t, %c2 : index
      memref.store %s0, %y[%p] : memref<128xi32>
      %c1 = arith.constant 1 : index
      %p1 = arith.addi %p, %c1 : index
      memref.store %s1, %y[%p1] : memref<128xi32>
      gpu.return
    }
  }
}
)mlir");
  ASSERT_TRUE(module);
  std::vector<float> x(512, 0.0f);
  // Ties to even: 1 + 1/16 -> 1.0 (0x38), 1 + 3/16 -> 1.25 (0x3A); 448
  // (0x7E); 3 * 2^-10, halfway between subnormals 1 and 2 -> 2 (0x02).
  // As FNUZ (bias 8): 0.5 -> 0x38, -224 -> 0xFE, -2^-12 (below half the
  // smallest subnormal 2^-10) -> +0, never 0x80.
  const float in[8] = {1.0625f, 1.1875f, 448.0f,    3.0f * 0x1p-10f,
                       0.5f,    -224.0f, -0x1p-12f, 1.0f};
  for (int i = 0; i < 8; ++i)
    x[size_t(i)] = in[i];
  std::vector<int32_t> y(128, -1);
  ASSERT_EQ(
      runKernel(*module, "k", {1, 1, 1}, {KernelArg::of(x), KernelArg::of(y)}),
      "");
  EXPECT_EQ(uint32_t(y[0]), 0x027E3A38u);
  EXPECT_EQ(uint32_t(y[1]), 0x4000FE38u);
  EXPECT_EQ(y[2], 0); // lane 1: all zeros
}

} // namespace
