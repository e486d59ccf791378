//===- KernelSpec.cpp -----------------------------------------------------===//

#include "passes/codegen/rocdl/KernelSpec.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <sstream>

using namespace kiln::rocdl;

const ChipInfo &kiln::rocdl::chipInfo(Chip chip) {
  // LDS: the LLVM limits (AMDGPU.md section 2).
  static const ChipInfo kGfx950 = {"gfx950", 163840, true, true};
  static const ChipInfo kGfx942 = {"gfx942", 65536, false, false};
  return chip == Chip::Gfx950 ? kGfx950 : kGfx942;
}

std::optional<Chip> kiln::rocdl::chipFromName(std::string_view name) {
  if (name == "gfx950")
    return Chip::Gfx950;
  if (name == "gfx942")
    return Chip::Gfx942;
  return std::nullopt;
}

std::optional<KernelKind>
kiln::rocdl::kernelKindFromName(std::string_view name) {
  for (size_t i = 0; i < kKernelKindNames.size(); ++i)
    if (kKernelKindNames[i] == name)
      return KernelKind(i);
  return std::nullopt;
}

void KernelSpec::chooseTiling() {
  if (isGenericKind(kind)) // not a GEMM
    return;
  // One wave per workgroup. Two M tiles share each weight load once there
  // are rows for them (prefill); decode keeps one so that no MFMA runs on
  // padding rows. Four N tiles share each activation load (and, for MXFP4,
  // its quantization).
  tiling.mTiles = m > kTile ? 2 : 1;
  tiling.nTiles = std::max<int64_t>(1, std::min<int64_t>(4, ceilDiv(n, kTile)));
}

std::string KernelSpec::validate() const {
  std::ostringstream os;
  auto positive = [&](const char *what, int64_t v) {
    if (v <= 0 && os.tellp() == 0)
      os << kernelKindName(kind) << ": " << what << " must be positive, got "
         << v;
  };
  switch (kind) {
  case KernelKind::MxGemm:
  case KernelKind::Bf16Gemm: {
    positive("N", n);
    positive("K", k);
    positive("M tiles", tiling.mTiles);
    positive("N tiles", tiling.nTiles);
    int64_t multiple = kind == KernelKind::MxGemm ? kMxLaneK : kBf16StepK;
    if (os.tellp() == 0 && k % multiple != 0)
      os << kernelKindName(kind) << ": K must be a multiple of " << multiple
         << ", got " << k;
    // Element offsets are 32-bit (index-bitwidth=32).
    if (os.tellp() == 0 && n * k >= (int64_t(1) << 31))
      os << kernelKindName(kind) << ": weight [" << n << ", " << k
         << "] has 2^31 or more elements, beyond 32-bit indexing";
    if (os.tellp() == 0 && (tiling.mTiles > 4 || tiling.nTiles > 8))
      os << kernelKindName(kind) << ": tiling " << tiling.mTiles << "x"
         << tiling.nTiles << " exceeds the register budget (at most 4x8)";
    break;
  }
  default:
    return validateGeneric(*this);
  }
  return os.str();
}

const std::vector<ParamDecl> &kiln::rocdl::declaredParams(KernelKind kind) {
  static const std::vector<std::vector<ParamDecl>> kDecls = [] {
    std::vector<std::vector<ParamDecl>> decls(kKernelKindNames.size());
    std::vector<ParamDecl> *d = nullptr;
#define KILN_KIND(Kind, Struct) d = &decls[size_t(KernelKind::Kind)];
#define KILN_INT(name) d->push_back({#name, false, true});
#define KILN_FLOAT(name) d->push_back({#name, true, true});
#define KILN_OPT_INT(name, fallback) d->push_back({#name, false, false});
#define KILN_OPT_FLOAT(name, fallback) d->push_back({#name, true, false});
#define KILN_END_KIND
#include "passes/codegen/rocdl/KernelParams.def"
    return decls;
  }();
  return kDecls[size_t(kind)];
}

const ParamDecl *kiln::rocdl::findParam(KernelKind kind,
                                        std::string_view name) {
  for (const ParamDecl &d : declaredParams(kind))
    if (d.name == name)
      return &d;
  return nullptr;
}

/// Debug builds stop at the call that names an undeclared parameter;
/// release builds store it, and validate() names it.
static void assertDeclared(const KernelSpec &spec, std::string_view name) {
  (void)spec;
  (void)name;
  assert(findParam(spec.kind, name) &&
         "parameter not declared for this kind in KernelParams.def");
}

void KernelSpecParams::setInt(KernelSpec &spec, std::string_view name,
                              int64_t value) {
  assertDeclared(spec, name);
  for (KernelSpec::Param &p : spec.params_)
    if (p.name == name) {
      p.value = value;
      p.isFloat = false;
      return;
    }
  spec.params_.push_back({std::string(name), value, false, 0.0f});
}

void KernelSpecParams::setFloat(KernelSpec &spec, std::string_view name,
                                float value) {
  assertDeclared(spec, name);
  for (KernelSpec::Param &p : spec.params_)
    if (p.name == name) {
      p.f = value;
      p.isFloat = true;
      return;
    }
  spec.params_.push_back({std::string(name), 0, true, value});
}

int64_t KernelSpecParams::getInt(const KernelSpec &spec,
                                 std::string_view name) {
  assertDeclared(spec, name);
  for (const KernelSpec::Param &p : spec.params_)
    if (p.name == name && !p.isFloat)
      return p.value;
  return 0;
}

float KernelSpecParams::getFloat(const KernelSpec &spec,
                                 std::string_view name) {
  assertDeclared(spec, name);
  for (const KernelSpec::Param &p : spec.params_)
    if (p.name == name && p.isFloat)
      return p.f;
  return 0.0f;
}

bool KernelSpecParams::has(const KernelSpec &spec, std::string_view name) {
  assertDeclared(spec, name);
  for (const KernelSpec::Param &p : spec.params_)
    if (p.name == name)
      return true;
  return false;
}

std::string KernelSpecParams::check(const KernelSpec &spec) {
  std::string kind(kernelKindName(spec.kind));
  const std::vector<ParamDecl> &decls = declaredParams(spec.kind);
  const ParamDecl *last = nullptr;
  for (const KernelSpec::Param &p : spec.params_) {
    const ParamDecl *d = findParam(spec.kind, p.name);
    if (!d)
      return kind + ": parameter '" + p.name +
             "' is not declared for this kind (KernelParams.def)";
    // makeSpec writes them in declared order, once each.
    if (last && d <= last)
      return kind + ": parameter " + p.name + " is out of order or repeated";
    last = d;
    if (d->isFloat != p.isFloat)
      return kind + ": parameter " + p.name + " must be " +
             (d->isFloat ? "a float" : "an integer");
    if (!p.isFloat && p.value < 0)
      return kind + ": parameter " + p.name + " must not be negative, got " +
             std::to_string(p.value);
  }
  for (const ParamDecl &d : decls) {
    bool present = false;
    for (const KernelSpec::Param &p : spec.params_)
      present = present || p.name == d.name;
    if (d.required && !present)
      return kind + ": parameter " + std::string(d.name) + " is missing";
  }
  return "";
}

std::string KernelSpecParams::checkIndexing(const KernelSpec &spec) {
  // Element offsets are 32-bit (index-bitwidth=32).
  for (const KernelSpec::Param &p : spec.params_)
    if (!p.isFloat && p.value >= (int64_t(1) << 31))
      return std::string(kernelKindName(spec.kind)) + ": parameter " + p.name +
             " = " + std::to_string(p.value) + " is beyond 32-bit indexing";
  return "";
}

std::string kiln::rocdl::validateGeneric(const KernelSpec &spec) {
  std::string error = KernelSpecParams::check(spec);
  if (!error.empty())
    return error;
  int64_t wg = spec.blockSize();
  if (wg < kWaveSize || wg > 1024 || wg % kWaveSize != 0)
    return std::string(kernelKindName(spec.kind)) +
           ": workgroup size must be a multiple of 64 in [64, 1024], got " +
           std::to_string(wg);
  error = KernelSpecParams::checkIndexing(spec);
  if (!error.empty())
    return error;
  switch (spec.kind) {
  case KernelKind::MoeRoute:
  case KernelKind::MoeAlign:
  case KernelKind::MoeGateUp:
  case KernelKind::MoeDown:
    return validateMoeSpec(spec);
  case KernelKind::KvAppend:
  case KernelKind::MlaAttention:
  case KernelKind::IndexerTopK:
  case KernelKind::GqaAttention:
    return validateAttentionSpec(spec);
  default:
    return validateDataSpec(spec);
  }
}

/// The shared parameter `name` (wg, waves) where the kind declares it and
/// the spec sets it, else `fallback`.
static int64_t sharedParam(const KernelSpec &spec, std::string_view name,
                           int64_t fallback) {
  if (!findParam(spec.kind, name) || !KernelSpecParams::has(spec, name))
    return fallback;
  return KernelSpecParams::getInt(spec, name);
}

int64_t KernelSpec::blockSize() const {
  if (isGenericKind(kind))
    return sharedParam(*this, "wg", kRowBlock);
  return kWaveSize; // the GEMMs
}

std::array<int64_t, 3> KernelSpec::grid(int64_t rows) const {
  if (!isGenericKind(kind)) // the GEMMs
    return {tiling.gridX(n), tiling.gridY(rows), 1};
  return {rows, 1, 1};
}

int64_t KernelSpec::declaredWavesPerSimd() const {
  // GEMMs keep to 128 registers per lane (arch + accumulation, 4 waves per
  // SIMD): up to 32 accumulators and a step's operands. The MXFP4 GEMM with
  // two M tiles (prefill) holds twice a step's activations -- 64 f32 on
  // gfx950 before quantization, beside two tiles' dequantized bf16 weights
  // on gfx942 -- and gets 256 (2 waves), which the MFMA-bound prefill
  // tolerates. Row kernels are small.
  if (isGenericKind(kind))
    return sharedParam(*this, "waves", 8);
  return kind == KernelKind::MxGemm && tiling.mTiles > 1 ? 2 : 4;
}

static std::string floatTag(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  std::ostringstream os;
  os << std::hex << bits;
  return os.str();
}

std::string KernelSpec::symbol() const {
  std::ostringstream os;
  os << "kiln_" << kernelKindName(kind);
  switch (kind) {
  case KernelKind::MxGemm:
  case KernelKind::Bf16Gemm:
    os << "_n" << n << "_k" << k << "_t" << tiling.mTiles << "x"
       << tiling.nTiles;
    break;
  default:
    for (const Param &p : params_)
      os << "_" << p.name
         << (p.isFloat ? "X" + floatTag(p.f) : std::to_string(p.value));
    break;
  }
  os << "_" << chipInfo(chip).name;
  return os.str();
}

namespace {

bool parseInt(std::string_view s, int64_t &out) {
  if (s.empty() || s.size() > 18)
    return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

bool parseHexFloat(std::string_view s, float &out) {
  if (s.empty() || s.size() > 8)
    return false;
  uint32_t bits = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0)
      return false;
    bits = bits << 4 | uint32_t(d);
  }
  std::memcpy(&out, &bits, 4);
  return true;
}

/// "abc123" -> ("abc", "123").
std::pair<std::string_view, std::string_view> splitTag(std::string_view t) {
  size_t i = 0;
  while (i < t.size() && t[i] >= 'a' && t[i] <= 'z')
    ++i;
  return {t.substr(0, i), t.substr(i)};
}

} // namespace

std::optional<KernelSpec> KernelSpec::fromSymbol(std::string_view symbol) {
  constexpr std::string_view prefix = "kiln_";
  if (symbol.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::string_view rest = symbol.substr(prefix.size());
  // The longest kind name followed by '_' (kind names contain '_').
  std::optional<KernelKind> kind;
  size_t kindLength = 0;
  for (size_t i = 0; i < kKernelKindNames.size(); ++i) {
    std::string_view name = kKernelKindNames[i];
    if (rest.size() > name.size() && rest.substr(0, name.size()) == name &&
        rest[name.size()] == '_' && name.size() > kindLength) {
      kind = KernelKind(i);
      kindLength = name.size();
    }
  }
  if (!kind)
    return std::nullopt;
  rest = rest.substr(kindLength + 1);
  std::vector<std::string_view> tags;
  while (!rest.empty()) {
    size_t cut = rest.find('_');
    tags.push_back(rest.substr(0, cut));
    rest = cut == std::string_view::npos ? std::string_view()
                                         : rest.substr(cut + 1);
  }
  if (tags.empty())
    return std::nullopt;
  std::optional<Chip> chip = chipFromName(tags.back());
  if (!chip)
    return std::nullopt;
  tags.pop_back();
  KernelSpec spec;
  spec.kind = *kind;
  spec.chip = *chip;
  for (std::string_view tag : tags) {
    auto [name, value] = splitTag(tag);
    int64_t v = 0;
    float f = 0;
    if (isGenericKind(*kind)) {
      if (name.empty())
        return std::nullopt;
      if (!value.empty() && value[0] == 'X' &&
          parseHexFloat(value.substr(1), f))
        spec.params_.push_back({std::string(name), 0, true, f});
      else if (parseInt(value, v))
        spec.params_.push_back({std::string(name), v, false, 0.0f});
      else
        return std::nullopt;
      continue;
    }
    if (name == "n" && parseInt(value, v))
      spec.n = v;
    else if (name == "k" && parseInt(value, v))
      spec.k = v;
    else if (name == "t") {
      size_t x = value.find('x');
      int64_t mt = 0, nt = 0;
      if (x == std::string_view::npos || !parseInt(value.substr(0, x), mt) ||
          !parseInt(value.substr(x + 1), nt))
        return std::nullopt;
      spec.tiling.mTiles = mt;
      spec.tiling.nTiles = nt;
      spec.m = mt > 1 ? 64 : 1;
    } else
      return std::nullopt;
  }
  // Each name once, declared, of its type, required ones present.
  if (isGenericKind(*kind) && !KernelSpecParams::check(spec).empty())
    return std::nullopt;
  if (spec.symbol() != symbol)
    return std::nullopt;
  return spec;
}
