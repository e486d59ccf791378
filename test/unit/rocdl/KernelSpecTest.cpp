//===- KernelSpecTest.cpp - Symbols name their specs, both ways -----------===//

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/codegen/rocdl/KernelParams.h"
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

  RmsNormParams norm;
  norm.c = 6144;
  norm.eps = 1e-6f;
  EXPECT_EQ(params<RmsNormParams>(roundTrip(makeSpec(norm))).eps, 1e-6f);

  RopeParams rope;
  rope.neox = 1;
  rope.h = 64;
  rope.d = 192;
  rope.o = 128;
  rope.r = 64;
  rope.theta = 1e6f;
  RopeParams r = params<RopeParams>(roundTrip(makeSpec(rope)));
  EXPECT_EQ(r.neox, 1);
  EXPECT_EQ(r.o, 128);
  EXPECT_EQ(r.theta, 1e6f);
}

TEST(KernelSpec, GenericKindsSpellEveryParam) {
  MoeGateUpParams p;
  p.e = 256;
  p.n = 6144;
  p.k = 2048;
  p.topk = 8;
  p.mt = 1;
  p.nt = 4;
  p.fmt = 0;
  p.wg = 64;
  KernelSpec s = makeSpec(p);
  // Declared order; waves unset, so not spelled.
  EXPECT_EQ(s.symbol(),
            "kiln_moe_gate_up_e256_n6144_k2048_topk8_mt1_nt4_fmt0_wg64_gfx950");
  KernelSpec back = roundTrip(s);
  EXPECT_EQ(back.kind, KernelKind::MoeGateUp);
  MoeGateUpParams q = params<MoeGateUpParams>(back);
  EXPECT_EQ(q.n, 6144);
  EXPECT_TRUE(q.wg.isSet());
  EXPECT_FALSE(q.waves.isSet());
  EXPECT_EQ(q.waves, 8); // the default
  EXPECT_EQ(back.blockSize(), 64);
  EXPECT_EQ(back.declaredWavesPerSimd(), 8);
  // Floats keep their bits.
  MoeRouteParams r;
  r.e = r.topk = r.ngroup = r.topkgroup = 1;
  r.h = 64;
  r.scale = -2.5f;
  KernelSpec route = makeSpec(r, Chip::Gfx942);
  EXPECT_EQ(route.symbol(), "kiln_moe_route_e1_h64_topk1_ngroup1_topkgroup1_"
                            "norm0_rbf0_scaleXc0200000_gfx942");
  EXPECT_EQ(params<MoeRouteParams>(roundTrip(route)).scale, -2.5f);
  // A kind whose name is a prefix of another's parses as the longer one.
  TopKParams top;
  top.c = 64;
  top.k = 8;
  EXPECT_EQ(roundTrip(makeSpec(top)).kind, KernelKind::TopK);
}

TEST(KernelSpec, EveryGenericKindDeclaresItsParams) {
  for (size_t i = 0; i < kKernelKindNames.size(); ++i) {
    KernelKind kind = KernelKind(i);
    EXPECT_EQ(declaredParams(kind).empty(), !isGenericKind(kind))
        << kernelKindName(kind);
  }
  EXPECT_TRUE(findParam(KernelKind::Fp8Gemm, "wg"));
  EXPECT_FALSE(findParam(KernelKind::Softmax, "wg"));
  EXPECT_TRUE(findParam(KernelKind::LayerNorm, "eps")->isFloat);
}

TEST(KernelSpec, RejectsWhatItDidNotWrite) {
  for (const char *bad :
       {"", "kiln_", "kiln_softmax", "kiln_softmax_c64",
        "kiln_softmax_c64_gfx90a", "kiln_nosuch_c1_gfx950",
        "kiln_mx_gemm_n1_k2_tx4_gfx950", "kiln_softmax_C64_gfx950",
        "kiln_softmax_c-1_gfx950", "kiln_softmax_c64__gfx950",
        "other_softmax_c64_gfx950", "kiln_rms_norm_c64_epsZZ_gfx950",
        "kiln_rms_norm_c64_epsXZZ_gfx950",
        // The spellings before row kernels were declared in KernelParams.def.
        "kiln_rms_norm_c64_eps3727c5ac_gfx950", "kiln_add_c64_gfx950"})
    EXPECT_FALSE(KernelSpec::fromSymbol(bad)) << bad;
}

TEST(KernelSpec, RejectsUndeclaredAndMissingParams) {
  EXPECT_TRUE(KernelSpec::fromSymbol("kiln_top_k_c64_k8_gfx950"));
  for (const char *bad : {
           "kiln_top_k_c64_k8_x1_gfx950",    // x: not a top_k param
           "kiln_top_k_c64_gfx950",          // k: required, missing
           "kiln_top_k_k8_c64_gfx950",       // not the declared order
           "kiln_top_k_c64_k8_k8_gfx950",    // twice
           "kiln_softmax_c64_wg128_gfx950",  // softmax declares no wg
           "kiln_layer_norm_c64_eps1_gfx950" // eps is a float
       })
    EXPECT_FALSE(KernelSpec::fromSymbol(bad)) << bad;
}

TEST(KernelSpec, GenericValidation) {
  Fp8GemmParams p;
  p.n = 64;
  p.k = 64;
  p.mt = p.nt = 1;
  p.wg = 100;
  EXPECT_NE(
      makeSpec(p).validate().find("workgroup size must be a multiple of 64"),
      std::string::npos)
      << makeSpec(p).validate();
  p.wg = 64;
  p.n = int64_t(1) << 31;
  EXPECT_NE(makeSpec(p).validate().find("beyond 32-bit indexing"),
            std::string::npos)
      << makeSpec(p).validate();
}

#ifdef NDEBUG
// Release builds store an undeclared name (debug builds assert at the
// call); validate() names the kind and the parameter.
TEST(KernelSpec, ValidateNamesUndeclaredParams) {
  KernelSpec s = makeSpec(SoftmaxParams{64});
  KernelSpecParams::setInt(s, "wg", 128);
  EXPECT_EQ(s.validate(), "softmax: parameter 'wg' is not declared for this "
                          "kind (KernelParams.def)");
  KernelSpec norm;
  norm.kind = KernelKind::LayerNorm;
  KernelSpecParams::setInt(norm, "c", 64);
  EXPECT_EQ(norm.validate(), "layer_norm: parameter eps is missing");
}
#endif

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
