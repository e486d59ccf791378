//===- KernelSpecTest.cpp - Symbols name their specs, both ways -----------===//

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/codegen/rocdl/MfmaLayout.h"
#include "runtime/artifact/ArtifactChecks.h"

#include <gtest/gtest.h>

#include <array>

using namespace kiln::rocdl;

namespace {

KernelSpec roundTrip(const KernelSpec &spec) {
  std::optional<KernelSpec> parsed = KernelSpec::fromSymbol(spec.symbol());
  EXPECT_TRUE(parsed) << spec.symbol();
  return parsed ? *parsed : KernelSpec();
}

TEST(KernelSpec, FixedKindsRoundTrip) {
  KernelSpec gemm;
  gemm.kind = KernelKind::MxGemm;
  gemm.chip = Chip::Gfx942;
  gemm.m = 64;
  gemm.n = 6144;
  gemm.k = 2048;
  gemm.chooseTiling();
  KernelSpec back = roundTrip(gemm);
  EXPECT_EQ(back.symbol(), gemm.symbol());
  EXPECT_EQ(back.tiling.mTiles, 2);
  EXPECT_EQ(back.chip, Chip::Gfx942);

  KernelSpec norm;
  norm.kind = KernelKind::RmsNorm;
  norm.cols = 6144;
  norm.eps = 1e-6f;
  EXPECT_EQ(roundTrip(norm).eps, 1e-6f);

  KernelSpec rope;
  rope.kind = KernelKind::Rope;
  rope.heads = 64;
  rope.headDim = 192;
  rope.offset = 128;
  rope.rotaryDim = 64;
  rope.neox = true;
  rope.theta = 1e6f;
  KernelSpec r = roundTrip(rope);
  EXPECT_TRUE(r.neox);
  EXPECT_EQ(r.offset, 128);
  EXPECT_EQ(r.theta, 1e6f);
}

TEST(KernelSpec, GenericKindsSpellEveryParam) {
  KernelSpec s;
  s.kind = KernelKind::MoeGateUp;
  s.chip = Chip::Gfx950;
  s.set("e", 256).set("h", 6144).setFloat("scale", -2.5f).set("wg", 64);
  EXPECT_EQ(s.symbol(),
            "kiln_moe_gate_up_e256_h6144_scaleXc0200000_wg64_gfx950");
  KernelSpec back = roundTrip(s);
  EXPECT_EQ(back.kind, KernelKind::MoeGateUp);
  EXPECT_EQ(back.param("h"), 6144);
  EXPECT_EQ(back.paramFloat("scale"), -2.5f);
  EXPECT_EQ(back.blockSize(), 64);
  // A kind whose name is a prefix of another's parses as the longer one.
  KernelSpec top;
  top.kind = KernelKind::TopK;
  top.set("k", 8);
  EXPECT_EQ(roundTrip(top).kind, KernelKind::TopK);
}

TEST(KernelSpec, RejectsWhatItDidNotWrite) {
  for (const char *bad :
       {"", "kiln_", "kiln_softmax", "kiln_softmax_c64",
        "kiln_softmax_c64_gfx90a", "kiln_nosuch_c1_gfx950",
        "kiln_mx_gemm_n1_k2_tx4_gfx950", "kiln_softmax_C64_gfx950",
        "kiln_softmax_c-1_gfx950", "kiln_softmax_c64__gfx950",
        "other_softmax_c64_gfx950", "kiln_rms_norm_c64_epsZZ_gfx950"})
    EXPECT_FALSE(KernelSpec::fromSymbol(bad)) << bad;
}

TEST(KernelSpec, GenericValidation) {
  KernelSpec s;
  s.kind = KernelKind::Softmax;
  s.set("wg", 100);
  EXPECT_NE(s.validate().find("workgroup size must be a multiple of 64"),
            std::string::npos)
      << s.validate();
  s.set("wg", 256).set("c", int64_t(1) << 31);
  EXPECT_NE(s.validate().find("beyond 32-bit indexing"), std::string::npos)
      << s.validate();
}

// The artifact checker's size formula for Mxfp4Gpu copies is the layout's.
TEST(KernelSpec, GpuCopySizesAreTheLayouts) {
  for (auto [e, n, k] : {std::array<int64_t, 3>{1, 16, 128},
                         {1, 40, 96},
                         {3, 2048, 6144},
                         {2, 17, 544}}) {
    MxWeightLayout l = MxWeightLayout::forShape(n, k);
    int64_t shape3[3] = {e, n, k};
    kiln::artifact::WeightBytes b = kiln::artifact::mxfp4GpuBytes(shape3, 3);
    EXPECT_EQ(b.data, uint64_t(e * l.dataBytes()));
    EXPECT_EQ(b.scales, uint64_t(e * l.scaleBytes()));
  }
}

} // namespace
