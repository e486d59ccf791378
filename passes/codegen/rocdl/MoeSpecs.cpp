//===- MoeSpecs.cpp - Which moe kernels can be generated -------------===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests. The
// parameters of each kind (MoeKernels.cpp describes the kernels):
//   moe_route    e, h, topk, ngroup, topkgroup, norm, rbf (router is bf16),
//                scale (float); wg 256
//   moe_align    e, topk, bm (rows per block); wg 256
//   moe_gate_up  e, n (= I), k (= H), topk, mt, nt, fmt (0 MXFP4, 1 BF16,
//                2 FP8 block-128: E4M3FN bytes + f32 scales per 128 x 128);
//                wg 64 (one wave), block rows bm = 16 * mt
//   moe_down     the same with n = H, k = I; or, with combine = 1, the
//                final sum: h, topk, shared; wg 256
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelSpec.h"
#include "support/abi/MoeRules.h"

#include <sstream>

using namespace kiln::rocdl;

namespace {

/// Collects the first violation, prefixed with the kind's name.
class Check {
public:
  explicit Check(const KernelSpec &spec) : spec_(spec) {}
  void require(bool ok, const std::string &what) {
    if (!ok && error_.empty())
      error_ = std::string(kernelKindName(spec_.kind)) + ": " + what;
  }
  /// Param `name` must be present and in [lo, hi].
  int64_t range(const char *name, int64_t lo, int64_t hi) {
    int64_t v = spec_.param(name, -1);
    std::ostringstream os;
    os << "parameter " << name << " must be in [" << lo << ", " << hi
       << "], got " << (spec_.has(name) ? std::to_string(v) : "none");
    require(spec_.has(name) && v >= lo && v <= hi, os.str());
    return v;
  }
  std::string error() const { return error_; }

private:
  const KernelSpec &spec_;
  std::string error_;
};

constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;

} // namespace

std::string kiln::rocdl::validateMoeSpec(const KernelSpec &spec) {
  Check c(spec);
  int64_t wg = spec.blockSize();
  switch (spec.kind) {
  case KernelKind::MoeRoute: {
    int64_t e = c.range("e", 1, 4096);
    int64_t h = c.range("h", 1, kMaxIndex);
    int64_t topk = c.range("topk", 1, 64);
    int64_t groups = c.range("ngroup", 1, 4096);
    int64_t topkGroup = c.range("topkgroup", 1, 4096);
    c.range("norm", 0, 1);
    c.range("rbf", 0, 1);
    c.require(spec.has("scale"), "parameter scale is missing");
    c.require(wg == kRowBlock, "the workgroup must be 256 threads");
    abi::MoeRuleError rule = abi::checkMoeRouting({e, topk, groups, topkGroup});
    c.require(!rule, rule.field + " " + rule.message);
    c.require(e * h <= kMaxIndex, "router weight beyond 32-bit indexing");
    break;
  }
  case KernelKind::MoeAlign:
    c.range("e", 1, 8192);
    c.range("topk", 1, 64);
    c.range("bm", 1, 1024);
    c.require(wg == kRowBlock, "the workgroup must be 256 threads");
    break;
  case KernelKind::MoeGateUp:
  case KernelKind::MoeDown: {
    if (spec.kind == KernelKind::MoeDown && spec.param("combine") == 1) {
      c.range("h", 1, kMaxIndex);
      c.range("topk", 1, 64);
      c.range("shared", 0, 1);
      c.require(wg == kRowBlock, "the workgroup must be 256 threads");
      break;
    }
    int64_t e = c.range("e", 1, 8192);
    int64_t n = c.range("n", 1, kMaxIndex);
    int64_t k = c.range("k", 1, kMaxIndex);
    c.range("topk", 1, 64);
    c.range("mt", 1, 2);
    c.range("nt", 1, 4);
    int64_t fmt = c.range("fmt", 0, 2);
    c.require(wg == kWaveSize, "the workgroup must be one wave (64)");
    c.require(k % 32 == 0,
              "K must be a multiple of 32, got " + std::to_string(k));
    if (fmt == 0) {
      MxWeightLayout l = MxWeightLayout::forShape(n, k);
      c.require(e * (l.dataBytes() / 16) <= kMaxIndex &&
                    e * (l.scaleBytes() / 4) <= kMaxIndex,
                "expert stack beyond 32-bit indexing");
    } else {
      // BF16 counts vector<8xbf16>, FP8 vector<8xi8> (and f32 scales).
      c.require(e * n * k / 8 <= kMaxIndex,
                "expert stack beyond 32-bit indexing");
      // The BF16 path forms the element offset before dividing by 8, in
      // 32-bit unsigned index arithmetic.
      if (fmt == 1)
        c.require(e * n * k < (int64_t(1) << 32),
                  "BF16 expert stack of 2^32 or more elements");
      if (fmt == 2)
        c.require(e * ((n + 127) / 128) * ((k + 127) / 128) <= kMaxIndex,
                  "expert scales beyond 32-bit indexing");
    }
    break;
  }
  default:
    c.require(false, "not a moe kernel");
    break;
  }
  return c.error();
}
