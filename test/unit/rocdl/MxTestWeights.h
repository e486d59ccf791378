//===- MxTestWeights.h - Random MXFP4 weights for the kernel tests -*- C++ -*-//
//
// Random weights quantized the Quark way (scale rule "even"), with block
// scales spread over a few binades so they matter, in both the checkpoint
// layout and the GPU kernels' shuffled layout.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H
#define KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H

#include "passes/codegen/rocdl/MxWeightShuffle.h"
#include "passes/emit/Mxfp4Quantize.h"

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

} // namespace kiln::rocdl::test

#endif // KILN_TEST_UNIT_ROCDL_MXTESTWEIGHTS_H
