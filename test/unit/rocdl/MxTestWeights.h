//===- MxTestWeights.h - Test data for the GEMM kernel tests ---*- C++ -*-===//
//
// Random weights quantized the Quark way (scale rule "even"), with block
// scales spread over a few binades so they matter, in both the checkpoint
// layout and the GPU kernels' shuffled layout; activations with a few
// extreme rows; the CPU view of the weights; GEMM kernel specs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H
#define KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/codegen/rocdl/MxWeightShuffle.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::rocdl::test {

struct MxWeights {
  int64_t n, k;
  std::vector<uint8_t> packed, scales; // checkpoint layout
  ShuffledMxWeight shuffled;
};

inline MxWeights makeMxWeights(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-4, 3);
  MxWeights w{n, k, {}, {}, {}};
  w.packed.resize(size_t(n * k / 2));
  w.scales.resize(size_t(n * k / 32));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < k / 32; ++b) {
      float s = std::ldexp(1.0f, binade(rng));
      for (int i = 0; i < 32; ++i)
        row[size_t(b * 32 + i)] = dist(rng) * s;
    }
    quantizeMxfp4Row(row.data(), k, Mxfp4ScaleRule::Even,
                     &w.packed[size_t(r * k / 2)],
                     &w.scales[size_t(r * k / 32)]);
  }
  std::string error;
  EXPECT_TRUE(shuffleMxfp4Weight(w.packed.data(), w.scales.data(), n, k,
                                 w.shuffled, error))
      << error;
  return w;
}

/// Normal activations; rows 1 and 2 scaled by 1000 and 1e-3 when there
/// are more than two rows (a large and a tiny dynamic range).
inline std::vector<float> makeActivations(int64_t rows, int64_t k,
                                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * k));
  for (float &v : x)
    v = dist(rng);
  if (rows > 2) {
    for (int64_t i = 0; i < k; ++i) {
      x[size_t(k + i)] *= 1000.0f;
      x[size_t(2 * k + i)] *= 1e-3f;
    }
  }
  return x;
}

/// Weight (r, c) as a float, from the checkpoint layout.
inline float mxWeightValue(const MxWeights &w, int64_t r, int64_t c) {
  uint8_t byte = w.packed[size_t(r * w.k / 2 + c / 2)];
  uint8_t code = (c % 2) ? byte >> 4 : byte & 0xF;
  return cpu::e2m1ToFloat(code) *
         cpu::e8m0ToFloat(w.scales[size_t(r * w.k / 32 + c / 32)]);
}

/// The CPU runtime's view of the checkpoint-layout weights.
inline cpu::WeightView mxView(const MxWeights &w) {
  cpu::WeightView v;
  v.format = cpu::WeightFormat::MXFP4;
  v.data = w.packed.data();
  v.scales = w.scales.data();
  v.rows = w.n;
  v.cols = w.k;
  return v;
}

inline KernelSpec gemmSpec(KernelKind kind, Chip chip, int64_t m, int64_t n,
                           int64_t k) {
  KernelSpec s;
  s.kind = kind;
  s.chip = chip;
  s.m = m;
  s.n = n;
  s.k = k;
  s.chooseTiling();
  EXPECT_EQ(s.validate(), "");
  return s;
}

} // namespace kiln::rocdl::test

#endif // KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H
