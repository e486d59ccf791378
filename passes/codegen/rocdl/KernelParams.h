//===- KernelParams.h - Typed parameters of the generic kernel kinds ------===//
//
// One struct per generic kind (EmbeddingParams, MoeRouteParams, ...),
// expanded from KernelParams.def, and the conversions to and from a
// KernelSpec:
//
//   MoeAlignParams p;
//   p.e = 256; p.topk = 8; p.bm = 16;
//   KernelSpec spec = makeSpec(p);           // kiln_moe_align_e256_..._gfx950
//   int64_t bm = params<MoeAlignParams>(spec).bm;
//
// Required fields are plain integers and floats. Optional ones are
// OptParam: they read their default until assigned, and the symbol spells
// them only once assigned (so specs that never set them keep their
// symbols).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_KERNELPARAMS_H
#define KILN_PASSES_CODEGEN_ROCDL_KERNELPARAMS_H

#include "passes/codegen/rocdl/KernelSpec.h"

#include <cassert>

namespace kiln::rocdl {

/// An optional parameter: its default until assigned.
template <typename T> class OptParam {
public:
  constexpr OptParam(T fallback) : value_(fallback) {}
  OptParam &operator=(T value) {
    value_ = value;
    set_ = true;
    return *this;
  }
  operator T() const { return value_; }
  T get() const { return value_; }
  /// Whether it was assigned (and so is spelled in the symbol).
  bool isSet() const { return set_; }

private:
  T value_;
  bool set_ = false;
};

#define KILN_KIND(Kind, Struct)                                                \
  struct Struct {                                                              \
    static constexpr KernelKind kind = KernelKind::Kind;                       \
    /* Calls f(name, field) for each field, in the symbol's order. */          \
    template <typename Self, typename F> static void visit(Self &self, F &&f);
#define KILN_INT(name) int64_t name = 0;
#define KILN_FLOAT(name) float name = 0.0f;
#define KILN_OPT_INT(name, fallback) OptParam<int64_t> name{fallback};
#define KILN_OPT_FLOAT(name, fallback) OptParam<float> name{fallback};
#define KILN_END_KIND                                                          \
  }                                                                            \
  ;
#include "passes/codegen/rocdl/KernelParams.def"

#define KILN_KIND(Kind, Struct)                                                \
  template <typename Self, typename F> void Struct::visit(Self &self, F &&f) {
#define KILN_INT(name) f(#name, self.name);
#define KILN_FLOAT(name) f(#name, self.name);
#define KILN_OPT_INT(name, fallback) f(#name, self.name);
#define KILN_OPT_FLOAT(name, fallback) f(#name, self.name);
#define KILN_END_KIND }
#include "passes/codegen/rocdl/KernelParams.def"

namespace detail {
inline void writeParam(KernelSpec &s, std::string_view name, int64_t v) {
  KernelSpecParams::setInt(s, name, v);
}
inline void writeParam(KernelSpec &s, std::string_view name, float v) {
  KernelSpecParams::setFloat(s, name, v);
}
template <typename T>
void writeParam(KernelSpec &s, std::string_view name, const OptParam<T> &v) {
  if (v.isSet())
    writeParam(s, name, v.get());
}
inline void readParam(const KernelSpec &s, std::string_view name, int64_t &v) {
  v = KernelSpecParams::getInt(s, name);
}
inline void readParam(const KernelSpec &s, std::string_view name, float &v) {
  v = KernelSpecParams::getFloat(s, name);
}
template <typename T>
void readParam(const KernelSpec &s, std::string_view name, OptParam<T> &v) {
  if (!KernelSpecParams::has(s, name))
    return;
  T value;
  readParam(s, name, value);
  v = value;
}
} // namespace detail

/// The spec of kind P::kind with p's parameters.
template <typename P>
KernelSpec makeSpec(const P &p, Chip chip = Chip::Gfx950) {
  KernelSpec spec;
  spec.kind = P::kind;
  spec.chip = chip;
  P::visit(p, [&](std::string_view name, const auto &field) {
    detail::writeParam(spec, name, field);
  });
  return spec;
}

/// The parameters of `spec`, which must be of kind P::kind.
template <typename P> P params(const KernelSpec &spec) {
  assert(spec.kind == P::kind && "params<P>() of another kind's spec");
  P p;
  P::visit(p, [&](std::string_view name, auto &field) {
    detail::readParam(spec, name, field);
  });
  return p;
}

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_KERNELPARAMS_H
