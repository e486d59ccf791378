//===- DataSpecs.cpp - Which data kernels can be generated -------------===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests.
//
// Params per kind (DataKernels.cpp has the arguments and grids):
//   embedding   h row width, v table rows, dt table dtype (0 f32, 1 bf16,
//               2 f16)
//   layer_norm  c cols, eps (float)
//   unary       op (0 sigmoid, 1 silu, 2 relu, 3 scale), c row elements,
//               w vector width (1 or 4), s factor (float, scale only)
//   binary      op (0 add, 1 mul), c row elements, bc broadcast length
//               (0: same shape), w vector width
//   softmax     c cols
//   normalize   c cols, eps (float)
//   group_limit c cols, g groups, k groups kept
//   top_k       c cols, k
//   gather      c source cols, k picks per group, n output row elements
//   copy_blocks outer blocks per row, chunk, sstride, soff, dstride, doff
//               (elements), w vector width
//   take_rows   c row elements
//   fp8_gemm    n, k (W [n, k]), mt x nt MFMA tiles per wave, wg 64,
//               waves (declared occupancy)
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelSpec.h"

#include <algorithm>
#include <sstream>

using namespace kiln::rocdl;

namespace {

/// Collects the first problem found.
class Check {
public:
  explicit Check(const KernelSpec &spec) : spec_(spec) {}

  Check &positive(std::string_view name) {
    int64_t v = spec_.param(name, 0);
    if (v <= 0)
      fail() << "parameter " << name << " must be positive, got " << v;
    return *this;
  }
  Check &floatParam(std::string_view name) {
    bool isFloat = false;
    for (const KernelSpec::Param &p : spec_.params)
      isFloat = isFloat || (p.name == name && p.isFloat);
    if (!isFloat)
      fail() << "needs the float parameter " << name;
    return *this;
  }
  Check &oneOf(std::string_view name, int64_t lo, int64_t hi) {
    int64_t v = spec_.param(name, -1);
    if (v < lo || v > hi)
      fail() << "parameter " << name << " must be in [" << lo << ", " << hi
             << "], got " << v;
    return *this;
  }
  /// The vector width "w" (1 or 4) must divide every named param.
  Check &width(std::initializer_list<std::string_view> names) {
    int64_t w = spec_.param("w", 0);
    if (w != 1 && w != 4) {
      fail() << "vector width w must be 1 or 4, got " << w;
      return *this;
    }
    for (std::string_view n : names)
      if (spec_.param(n) % w != 0)
        fail() << "vector width " << w << " does not divide " << n << " = "
               << spec_.param(n);
    return *this;
  }
  Check &reduces() {
    if (spec_.blockSize() != kRowBlock)
      fail() << "reduces across the workgroup, which must have " << kRowBlock
             << " threads, got " << spec_.blockSize();
    return *this;
  }
  Check &below31(int64_t v, const char *what) {
    if (v >= (int64_t(1) << 31))
      fail() << what << " = " << v << " is beyond 32-bit indexing";
    return *this;
  }
  Check &require(bool ok, const std::string &why) {
    if (!ok)
      fail() << why;
    return *this;
  }
  std::string result() const { return os_.str(); }

private:
  std::ostream &fail() {
    if (failed_)
      return ignored_; // only the first problem is reported
    failed_ = true;
    os_ << kernelKindName(spec_.kind) << ": ";
    return os_;
  }
  const KernelSpec &spec_;
  std::ostringstream os_, ignored_;
  bool failed_ = false;
};

} // namespace

std::string kiln::rocdl::validateDataSpec(const KernelSpec &spec) {
  Check c(spec);
  auto p = [&](std::string_view n) { return spec.param(n); };
  switch (spec.kind) {
  case KernelKind::Embedding:
    c.positive("h").positive("v").oneOf("dt", 0, 2);
    c.below31(p("h") * p("v"), "the table's elements");
    break;
  case KernelKind::LayerNorm:
  case KernelKind::Normalize:
    c.positive("c").floatParam("eps").reduces();
    break;
  case KernelKind::Softmax:
    c.positive("c").reduces();
    break;
  case KernelKind::Unary:
    c.oneOf("op", 0, 3).positive("c").width({"c"});
    if (p("op") == 3)
      c.floatParam("s");
    break;
  case KernelKind::Binary:
    c.oneOf("op", 0, 1).positive("c").width({"c", "bc"});
    c.require(p("bc") == 0 || p("c") % p("bc") == 0,
              "broadcast length " + std::to_string(p("bc")) +
                  " does not divide the row width " + std::to_string(p("c")));
    break;
  case KernelKind::GroupLimit:
    c.positive("c").positive("g").positive("k").reduces();
    c.require(p("g") > 0 && p("c") % p("g") == 0 && p("k") <= p("g"),
              "groups " + std::to_string(p("g")) + " keep " +
                  std::to_string(p("k")) + " over " + std::to_string(p("c")) +
                  " cols: expected groups dividing the cols and keep <= "
                  "groups");
    // Scores and keep flags live in LDS.
    c.require(p("g") <= 4096,
              "at most 4096 groups (LDS), got " + std::to_string(p("g")));
    break;
  case KernelKind::TopK:
    c.positive("c").positive("k").reduces();
    c.require(p("k") <= p("c"), "k " + std::to_string(p("k")) +
                                    " exceeds the cols " +
                                    std::to_string(p("c")));
    break;
  case KernelKind::Gather:
    c.positive("c").positive("k").positive("n");
    c.require(p("k") > 0 && p("n") % p("k") == 0,
              "k " + std::to_string(p("k")) +
                  " does not divide the output row " + std::to_string(p("n")));
    break;
  case KernelKind::CopyBlocks:
    c.positive("outer").positive("chunk").positive("sstride").positive(
        "dstride");
    c.width({"chunk", "sstride", "soff", "dstride", "doff"});
    c.require(p("soff") + p("chunk") <= p("sstride") &&
                  p("doff") + p("chunk") <= p("dstride"),
              "the chunk leaves its block");
    c.below31(p("outer") * std::max(p("sstride"), p("dstride")),
              "the row elements");
    break;
  case KernelKind::TakeRows:
    c.positive("c");
    break;
  case KernelKind::Fp8Gemm:
    c.positive("n").positive("k").oneOf("mt", 1, 4).oneOf("nt", 1, 8);
    c.require(p("k") % 32 == 0,
              "K must be a multiple of 32, got " + std::to_string(p("k")));
    c.require(spec.blockSize() == 64, "runs one wave per workgroup (wg 64)");
    c.below31(p("n") * p("k"), "the weight's elements");
    break;
  default:
    return std::string(kernelKindName(spec.kind)) + ": not a data kernel";
  }
  return c.result();
}
