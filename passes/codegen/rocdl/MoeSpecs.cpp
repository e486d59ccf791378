//===- MoeSpecs.cpp - Which moe kernels can be generated -------------===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests. The
// parameters of each kind are declared in KernelParams.def; MoeKernels.cpp
// describes the kernels.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"
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
  /// Param `name` must be in [lo, hi].
  int64_t range(const char *name, int64_t v, int64_t lo, int64_t hi) {
    return range(name, v, true, lo, hi);
  }
  /// An optional param must be set, and in [lo, hi].
  int64_t range(const char *name, OptParam<int64_t> v, int64_t lo, int64_t hi) {
    return range(name, v.get(), v.isSet(), lo, hi);
  }
  std::string error() const { return error_; }

private:
  int64_t range(const char *name, int64_t v, bool set, int64_t lo, int64_t hi) {
    std::ostringstream os;
    os << "parameter " << name << " must be in [" << lo << ", " << hi
       << "], got " << (set ? std::to_string(v) : "none");
    require(set && v >= lo && v <= hi, os.str());
    return v;
  }

  const KernelSpec &spec_;
  std::string error_;
};

constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;

/// The expert GEMM of moe_gate_up and moe_down (P: MoeGateUpParams or
/// MoeDownParams).
template <typename P> void checkExpertGemm(Check &c, const P &p, int64_t wg) {
  int64_t e = c.range("e", p.e, 1, 8192);
  int64_t n = c.range("n", p.n, 1, kMaxIndex);
  int64_t k = c.range("k", p.k, 1, kMaxIndex);
  c.range("topk", p.topk, 1, 64);
  c.range("mt", p.mt, 1, 2);
  c.range("nt", p.nt, 1, 4);
  int64_t fmt = c.range("fmt", p.fmt, 0, 2);
  int64_t qa = c.range("qa", p.qa.get(), 0, 1);
  c.require(qa == 0 || fmt == 2,
            "qa (FP8 activations) needs FP8 weights (fmt 2), got fmt " +
                std::to_string(fmt));
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
}

} // namespace

std::string kiln::rocdl::validateMoeSpec(const KernelSpec &spec) {
  Check c(spec);
  int64_t wg = spec.blockSize();
  switch (spec.kind) {
  case KernelKind::MoeRoute: {
    auto p = params<MoeRouteParams>(spec);
    int64_t e = c.range("e", p.e, 1, 4096);
    c.range("h", p.h, 1, kMaxIndex);
    int64_t topk = c.range("topk", p.topk, 1, 64);
    int64_t groups = c.range("ngroup", p.ngroup, 1, 4096);
    int64_t topkGroup = c.range("topkgroup", p.topkgroup, 1, 4096);
    c.range("norm", p.norm, 0, 1);
    c.range("rbf", p.rbf, 0, 1);
    c.require(wg == kRowBlock, "the workgroup must be 256 threads");
    abi::MoeRuleError rule = abi::checkMoeRouting({e, topk, groups, topkGroup});
    c.require(!rule, rule.field + " " + rule.message);
    c.require(e * p.h <= kMaxIndex, "router weight beyond 32-bit indexing");
    // Optional: expert parallelism's share of the experts.
    c.range("off", p.off.get(), 0, e - 1);
    c.range("el", p.el.get(), 0, e);
    c.require(p.off + p.el <= e, "experts off + el past the router's e");
    break;
  }
  case KernelKind::MoeAlign: {
    auto p = params<MoeAlignParams>(spec);
    c.range("e", p.e, 1, 8192);
    c.range("topk", p.topk, 1, 64);
    c.range("bm", p.bm, 1, 1024);
    c.require(wg == kRowBlock, "the workgroup must be 256 threads");
    break;
  }
  case KernelKind::MoeGateUp:
    checkExpertGemm(c, params<MoeGateUpParams>(spec), wg);
    break;
  case KernelKind::MoeDown: {
    auto p = params<MoeDownParams>(spec);
    if (p.combine != 1) {
      checkExpertGemm(c, p, wg);
      break;
    }
    c.range("h", p.h, 1, kMaxIndex);
    c.range("topk", p.topk, 1, 64);
    c.range("shared", p.shared, 0, 1);
    c.range("ep", p.ep.get(), 0, 1);
    c.require(wg == kRowBlock, "the workgroup must be 256 threads");
    break;
  }
  default:
    c.require(false, "not a moe kernel");
    break;
  }
  return c.error();
}
