//===- HostKernelsTest.cpp - Compiled host kernels vs the built-ins -------===//
//
// Builds the x86-64 shared object (passes/codegen/x86), loads it through
// HostKernels (memfd + dlopen) and compares every kernel with the C++
// built-in on random inputs, including lengths that leave a masked tail.
// exp is MLIR's polynomial approximation, hence 1e-5 for silu/sigmoid.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/HostKernels.h"
#include "passes/codegen/x86/X86Codegen.h"
#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Norm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

using namespace kiln;
using namespace kiln::engine;

namespace {

class HostKernelsTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    auto built = x86::buildHostKernels();
    ASSERT_TRUE(built.isOk()) << built.status().toString();
    std::vector<std::pair<kiln::abi::Kernel, std::string>> symbols;
    for (const x86::HostSymbol &s : built->symbols) {
      kiln::abi::Kernel k;
      ASSERT_TRUE(kiln::abi::kernelFromName(s.kernel, k)) << s.kernel;
      symbols.emplace_back(k, s.symbol);
    }
    auto loaded =
        HostKernels::load(built->so.data(), built->so.size(), symbols);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    host = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() { delete host; }
  void SetUp() override {
    if (!HostKernels::cpuSupported())
      GTEST_SKIP() << "no AVX2/FMA";
    ASSERT_NE(host, nullptr);
    ASSERT_EQ(host->count(), 7);
  }
  static HostKernels *host;
};
HostKernels *HostKernelsTest::host = nullptr;

std::vector<float> randoms(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 double tol, const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - double(want[i]));
    double scale = std::max(std::fabs(double(want[i])), 1e-30);
    ASSERT_TRUE(err <= tol * scale || err <= 1e-37)
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
  }
}

const size_t kLengths[] = {0, 1, 7, 15, 16, 17, 100, 1000, 4099};

TEST_F(HostKernelsTest, Unary) {
  for (size_t n : kLengths) {
    std::vector<float> x = randoms(n, -30.f, 30.f, unsigned(n));
    if (n > 3) {
      x[0] = -100.f; // exp overflows: silu -> -0, sigmoid -> 0
      x[1] = 100.f;
      x[2] = 0.f;
    }
    std::vector<float> got(n), want(n);
    host->silu(x.data(), got.data(), int64_t(n));
    cpu::silu(x.data(), int64_t(n), want.data());
    expectClose(got, want, 1e-5, "silu");
    host->sigmoid(x.data(), got.data(), int64_t(n));
    cpu::sigmoid(x.data(), int64_t(n), want.data());
    expectClose(got, want, 1e-5, "sigmoid");
    host->relu(x.data(), got.data(), int64_t(n));
    cpu::relu(x.data(), int64_t(n), want.data());
    expectClose(got, want, 1e-6, "relu");
    host->scale(x.data(), got.data(), int64_t(n), 0.37f);
    cpu::scale(x.data(), int64_t(n), 0.37f, want.data());
    expectClose(got, want, 1e-6, "scale");
    // In place, the runtime's aliasing contract.
    std::vector<float> inPlace = x;
    host->silu(inPlace.data(), inPlace.data(), int64_t(n));
    cpu::silu(x.data(), int64_t(n), want.data());
    expectClose(inPlace, want, 1e-5, "silu in place");
  }
}

TEST_F(HostKernelsTest, Binary) {
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {4, 16}, {7, 33}, {2, 1000}};
  for (auto [rows, cols] : shapes) {
    size_t n = size_t(rows * cols);
    std::vector<float> a = randoms(n, -5.f, 5.f, 1),
                       b = randoms(n, -5.f, 5.f, 2);
    std::vector<float> row = randoms(size_t(cols), -5.f, 5.f, 3);
    std::vector<float> got(n), want(n);
    for (int bcast = 0; bcast < 2; ++bcast) {
      const float *rhs = bcast ? row.data() : b.data();
      host->add(a.data(), rhs, got.data(), rows, cols, bcast);
      cpu::add(a.data(), rhs, rows, cols, want.data(), bcast);
      expectClose(got, want, 1e-6, "add");
      host->mul(a.data(), rhs, got.data(), rows, cols, bcast);
      cpu::mul(a.data(), rhs, rows, cols, want.data(), bcast);
      expectClose(got, want, 1e-6, "mul");
    }
  }
}

TEST_F(HostKernelsTest, RmsNorm) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {4, 64}, {5, 129}, {2, 4096}};
  for (auto [rows, dim] : shapes) {
    size_t n = size_t(rows * dim);
    std::vector<float> x = randoms(n, -3.f, 3.f, 4);
    std::vector<float> w = randoms(size_t(dim), 0.5f, 1.5f, 5);
    std::vector<float> got(n), want(n);
    host->rmsNorm(x.data(), w.data(), got.data(), rows, dim, 1e-5f);
    cpu::rmsNorm(x.data(), rows, dim, w.data(), 1e-5f, want.data());
    expectClose(got, want, 1e-5, "rms_norm");
  }
}

TEST_F(HostKernelsTest, SiluTiming) {
  const int64_t n = 1 << 20;
  std::vector<float> x = randoms(size_t(n), -8.f, 8.f, 6);
  std::vector<float> y(static_cast<size_t>(n));
  auto time = [&](auto &&fn) {
    fn();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i)
      fn();
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - t0)
               .count() /
           20;
  };
  double compiled = time([&] { host->silu(x.data(), y.data(), n); });
  double builtin = time([&] { cpu::silu(x.data(), n, y.data()); });
  std::printf("silu over %lld floats: compiled %.1f us, built-in %.1f us\n",
              (long long)n, compiled, builtin);
}

TEST(HostKernelsLoad, MissingSymbolIsNamed) {
  auto built = x86::buildHostKernels({"relu"});
  ASSERT_TRUE(built.isOk()) << built.status().toString();
  auto loaded = HostKernels::load(built->so.data(), built->so.size(),
                                  {{kiln::abi::Kernel::Silu, "kiln_silu"}});
  ASSERT_FALSE(loaded.isOk());
  EXPECT_NE(loaded.status().message().find("kiln_silu"), std::string::npos);
  auto garbage = std::vector<uint8_t>(64, 0x5a);
  EXPECT_FALSE(HostKernels::load(garbage.data(), garbage.size(), {}).isOk());
}

} // namespace
