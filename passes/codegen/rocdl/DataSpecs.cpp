//===- DataSpecs.cpp - Which row and data kernels can be generated -----===//
//
// LLVM-free: shared by the artifact emitter and the kernel tests. The
// parameters of each kind are declared in KernelParams.def; RowKernels.cpp
// and DataKernels.cpp have the arguments and grids.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"

#include <algorithm>
#include <sstream>

using namespace kiln::rocdl;

namespace {

/// Collects the first problem found.
class Check {
public:
  explicit Check(const KernelSpec &spec) : spec_(spec) {}

  Check &positive(std::string_view name, int64_t v) {
    if (v <= 0)
      fail() << "parameter " << name << " must be positive, got " << v;
    return *this;
  }
  Check &oneOf(std::string_view name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      fail() << "parameter " << name << " must be in [" << lo << ", " << hi
             << "], got " << v;
    return *this;
  }
  /// The vector width w (1 or 4) must divide every named value.
  Check &
  width(int64_t w,
        std::initializer_list<std::pair<std::string_view, int64_t>> values) {
    if (w != 1 && w != 4) {
      fail() << "vector width w must be 1 or 4, got " << w;
      return *this;
    }
    for (auto [n, v] : values)
      if (v % w != 0)
        fail() << "vector width " << w << " does not divide " << n << " = "
               << v;
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
  auto str = [](int64_t v) { return std::to_string(v); };
  switch (spec.kind) {
  case KernelKind::RmsNorm:
    c.positive("c", params<RmsNormParams>(spec).c).reduces();
    break;
  case KernelKind::SwiGlu:
    c.positive("c", params<SwiGluParams>(spec).c);
    break;
  case KernelKind::Argmax:
    c.positive("c", params<ArgmaxParams>(spec).c).reduces();
    break;
  case KernelKind::Rope: {
    auto p = params<RopeParams>(spec);
    c.oneOf("neox", p.neox, 0, 1)
        .positive("h", p.h)
        .positive("d", p.d)
        .positive("r", p.r)
        .reduces();
    c.require(p.r % 2 == 0 && p.o + p.r <= p.d,
              "rotary dims [" + str(p.o) + ", " + str(p.o + p.r) +
                  ") must be an even-sized range inside the head dim " +
                  str(p.d));
    c.require(p.theta > 1.0f,
              "theta must be > 1, got " + std::to_string(p.theta));
    c.below31(p.h * p.d, "the row elements");
    break;
  }
  case KernelKind::Embedding: {
    auto p = params<EmbeddingParams>(spec);
    c.positive("h", p.h).positive("v", p.v).oneOf("dt", p.dt, 0, 2);
    c.below31(p.h * p.v, "the table's elements");
    break;
  }
  case KernelKind::LayerNorm:
    c.positive("c", params<LayerNormParams>(spec).c).reduces();
    break;
  case KernelKind::Normalize:
    c.positive("c", params<NormalizeParams>(spec).c).reduces();
    break;
  case KernelKind::Softmax:
    c.positive("c", params<SoftmaxParams>(spec).c).reduces();
    break;
  case KernelKind::Unary: {
    auto p = params<UnaryParams>(spec);
    c.oneOf("op", p.op, 0, 3).positive("c", p.c).width(p.w, {{"c", p.c}});
    c.require(p.op != 3 || p.s.isSet(), "needs the float parameter s");
    break;
  }
  case KernelKind::Binary: {
    auto p = params<BinaryParams>(spec);
    c.oneOf("op", p.op, 0, 1)
        .positive("c", p.c)
        .width(p.w, {{"c", p.c}, {"bc", p.bc}});
    c.require(p.bc == 0 || p.c % p.bc == 0,
              "broadcast length " + str(p.bc) +
                  " does not divide the row width " + str(p.c));
    break;
  }
  case KernelKind::GroupLimit: {
    auto p = params<GroupLimitParams>(spec);
    c.positive("c", p.c).positive("g", p.g).positive("k", p.k).reduces();
    c.require(p.g > 0 && p.c % p.g == 0 && p.k <= p.g,
              "groups " + str(p.g) + " keep " + str(p.k) + " over " + str(p.c) +
                  " cols: expected groups dividing the cols and keep <= "
                  "groups");
    // Scores and keep flags live in LDS.
    c.require(p.g <= 4096, "at most 4096 groups (LDS), got " + str(p.g));
    break;
  }
  case KernelKind::TopK: {
    auto p = params<TopKParams>(spec);
    c.positive("c", p.c).positive("k", p.k).reduces();
    c.require(p.k <= p.c, "k " + str(p.k) + " exceeds the cols " + str(p.c));
    break;
  }
  case KernelKind::Gather: {
    auto p = params<GatherParams>(spec);
    c.positive("c", p.c).positive("k", p.k).positive("n", p.n);
    c.require(p.k > 0 && p.n % p.k == 0,
              "k " + str(p.k) + " does not divide the output row " + str(p.n));
    break;
  }
  case KernelKind::CopyBlocks: {
    auto p = params<CopyBlocksParams>(spec);
    c.positive("outer", p.outer)
        .positive("chunk", p.chunk)
        .positive("sstride", p.sstride)
        .positive("dstride", p.dstride);
    c.width(p.w, {{"chunk", p.chunk},
                  {"sstride", p.sstride},
                  {"soff", p.soff},
                  {"dstride", p.dstride},
                  {"doff", p.doff}});
    c.require(p.soff + p.chunk <= p.sstride && p.doff + p.chunk <= p.dstride,
              "the chunk leaves its block");
    c.below31(p.outer * std::max(p.sstride, p.dstride), "the row elements");
    break;
  }
  case KernelKind::TakeRows:
    c.positive("c", params<TakeRowsParams>(spec).c);
    break;
  case KernelKind::RankSum: {
    int64_t w = params<RankSumParams>(spec).w;
    c.require(w == 1 || w == 4, "w must be 1 or 4, got " + str(w));
    break;
  }
  case KernelKind::Fp8Gemm: {
    auto p = params<Fp8GemmParams>(spec);
    c.positive("n", p.n)
        .positive("k", p.k)
        .oneOf("mt", p.mt, 1, 4)
        .oneOf("nt", p.nt, 1, 8)
        .oneOf("qa", p.qa, 0, 1);
    c.require(p.k % 32 == 0, "K must be a multiple of 32, got " + str(p.k));
    c.require(spec.blockSize() == 64, "runs one wave per workgroup (wg 64)");
    c.below31(p.n * p.k, "the weight's elements");
    break;
  }
  default:
    return std::string(kernelKindName(spec.kind)) +
           ": not a row or data kernel";
  }
  return c.result();
}
