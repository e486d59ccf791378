//===- KernelSpec.h - Which GPU kernel to generate, for which shapes -----===//
//
// A KernelSpec names one kernel family and every constant it is specialized
// to. The same spec always yields the same symbol, so the artifact emitter
// generates each distinct kernel once and the plans refer to it by name.
//
// Kernel arguments (bare global pointers, then scalars; AMDGPU.md section 10):
//   mx_gemm   (f32 x[M, K], u8 w[MxWeightLayout data], u32 scales[...],
//              f32 y[M, N], i32 M)                      grid (gridX, gridY)
//   bf16_gemm (f32 x[M, K], bf16 w[N, K], f32 y[M, N], i32 M)
//   rms_norm  (f32 x[rows, cols], f32 w[cols], f32 y[rows, cols])
//   swiglu    (f32 gate[rows, cols], f32 up[rows, cols], f32 y[rows, cols])
//   add       (f32 a[rows, cols], f32 b[rows, cols], f32 y[rows, cols])
//   rope      (f32 x[tokens, heads, headDim], i32 pos[tokens],
//              f32 y[tokens, heads, headDim])
//   argmax    (f32 x[rows, cols], i32 y[rows])
// Row kernels run one workgroup per row (grid x = rows, the row count is not
// an argument) with kRowBlock threads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_KERNELSPEC_H
#define KILN_PASSES_CODEGEN_ROCDL_KERNELSPEC_H

#include "passes/codegen/rocdl/MfmaLayout.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rocdl {

enum class Chip { Gfx950, Gfx942 };

struct ChipInfo {
  std::string_view name; // "gfx950"
  int64_t ldsBytes;      // per workgroup (= per CU) limit
  bool scaledMfma;       // v_mfma_scale_f32_*_f8f6f4
  bool bf16K32;          // v_mfma_f32_16x16x32_bf16
};
const ChipInfo &chipInfo(Chip chip);
std::optional<Chip> chipFromName(std::string_view name);

/// The two GEMMs carry their shape and tiling in the named fields below;
/// every other kind ("generic" kinds) declares its parameters in
/// KernelParams.def and is built and read through the typed structs of
/// KernelParams.h. The symbol spells every parameter, so a symbol alone
/// rebuilds its spec (fromSymbol).
enum class KernelKind {
  MxGemm,
  Bf16Gemm,
  // Row kernels (RowKernels.cpp).
  RmsNorm,
  SwiGlu,
  Rope,
  Argmax,
  // Data movement and row kernels (DataKernels.cpp).
  Embedding,
  LayerNorm,
  Unary,
  Binary,
  Softmax,
  Normalize,
  GroupLimit,
  TopK,
  Gather,
  CopyBlocks,
  TakeRows,
  // Fused MoE (MoeKernels.cpp).
  MoeRoute,
  MoeAlign,
  MoeGateUp,
  MoeDown,
  // Attention and caches (AttentionKernels.cpp).
  KvAppend,
  MlaAttention,
  IndexerTopK,
  GqaAttention,
  // Dense FP8 (Fp8Block128) GEMM (DataKernels.cpp).
  Fp8Gemm,
  // The rank-order sum of an all-reduce (DataKernels.cpp).
  RankSum,
};
inline constexpr std::array<std::string_view, 27> kKernelKindNames = {
    "mx_gemm",       "bf16_gemm", "rms_norm",      "swiglu",
    "rope",          "argmax",    "embedding",     "layer_norm",
    "unary",         "binary",    "softmax",       "normalize",
    "group_limit",   "top_k",     "gather",        "copy_blocks",
    "take_rows",     "moe_route", "moe_align",     "moe_gate_up",
    "moe_down",      "kv_append", "mla_attention", "indexer_top_k",
    "gqa_attention", "fp8_gemm",  "rank_sum"};
/// Kinds whose parameters KernelParams.def declares: all but the GEMMs.
inline bool isGenericKind(KernelKind kind) {
  return kind != KernelKind::MxGemm && kind != KernelKind::Bf16Gemm;
}
std::optional<KernelKind> kernelKindFromName(std::string_view name);
inline std::string_view kernelKindName(KernelKind kind) {
  return kKernelKindNames[size_t(kind)];
}

/// Threads per workgroup of the row kernels (four waves).
inline constexpr int64_t kRowBlock = 256;

struct KernelSpec {
  KernelKind kind = KernelKind::MxGemm;
  Chip chip = Chip::Gfx950;
  // GEMMs: W is [n, k]; `m` is only a hint that picks the tiling, the
  // kernel takes the row count at run time.
  int64_t m = 16, n = 0, k = 0;
  GemmTiling tiling;

  /// Picks the tiling from the shape hints (GEMMs only).
  void chooseTiling();
  /// An empty string when the spec can be generated, else why not.
  std::string validate() const;
  /// Workgroup size (x; y = z = 1).
  int64_t blockSize() const;
  /// Grid for `rows` activation rows (tokens).
  std::array<int64_t, 3> grid(int64_t rows) const;
  /// Minimum waves per SIMD the kernel is compiled for
  /// ("amdgpu-waves-per-eu"); the register budget is 512 / this.
  int64_t declaredWavesPerSimd() const;
  /// Unique, stable symbol, e.g. kiln_mx_gemm_n256_k512_t1x4_gfx950 or
  /// kiln_softmax_c64_gfx942.
  std::string symbol() const;
  /// The spec a symbol() names; nullopt for anything else (for a generic
  /// kind: a parameter the kind does not declare, or a required one
  /// missing).
  static std::optional<KernelSpec> fromSymbol(std::string_view symbol);

private:
  friend struct KernelSpecParams;
  /// Generic kinds: the parameters as the symbol spells them, in order.
  /// Built through KernelParams.h (makeSpec, params<P>) or fromSymbol.
  /// Float values keep their bits (spelled X<hex bits> in the symbol).
  struct Param {
    std::string name;
    int64_t value = 0;
    bool isFloat = false;
    float f = 0.0f;
  };
  std::vector<Param> params_;
};

/// A parameter a generic kind declares (KernelParams.def).
struct ParamDecl {
  std::string_view name;
  bool isFloat = false;
  bool required = false;
};
/// The declared parameters of `kind` in symbol order; empty for the fixed
/// kinds.
const std::vector<ParamDecl> &declaredParams(KernelKind kind);
const ParamDecl *findParam(KernelKind kind, std::string_view name);

/// The string-keyed storage behind KernelParams.h; nothing else uses it.
/// Names must be declared by the spec's kind (asserted; validate() reports
/// them too).
struct KernelSpecParams {
  static void setInt(KernelSpec &spec, std::string_view name, int64_t value);
  static void setFloat(KernelSpec &spec, std::string_view name, float value);
  static int64_t getInt(const KernelSpec &spec, std::string_view name);
  static float getFloat(const KernelSpec &spec, std::string_view name);
  static bool has(const KernelSpec &spec, std::string_view name);
  /// Every stored name declared, of its type, not negative; required ones
  /// present. An empty string when so, else why not.
  static std::string check(const KernelSpec &spec);
  /// Every integer below 2^31.
  static std::string checkIndexing(const KernelSpec &spec);
};

/// Generic kinds: every parameter declared, of its type, required ones
/// present; then the kind's family checks its values (KernelSpec::validate
/// calls validateGeneric).
std::string validateGeneric(const KernelSpec &spec);
/// Per family (DataSpecs.cpp, MoeSpecs.cpp, AttentionSpecs.cpp): an empty
/// string when the family can generate the spec, else why not.
std::string validateDataSpec(const KernelSpec &spec);
std::string validateMoeSpec(const KernelSpec &spec);
std::string validateAttentionSpec(const KernelSpec &spec);

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_KERNELSPEC_H
