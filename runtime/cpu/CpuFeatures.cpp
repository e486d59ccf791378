//===- CpuFeatures.cpp ----------------------------------------------------===//

#include "runtime/cpu/CpuFeatures.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define KILN_X86 1
#endif

using namespace kiln::cpu;

namespace {

#ifdef KILN_X86
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(uint32_t leaf, uint32_t sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d))
    return Regs{};
  return r;
}

uint64_t xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(uint32_t v, int i) { return (v >> i) & 1u; }
#endif

std::string modelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

CpuFeatures detect() {
  CpuFeatures f;
  f.model = modelName();
#ifdef KILN_X86
  const Regs one = cpuid(1, 0);
  const bool osxsave = bit(one.c, 27);
  const uint64_t xcr = osxsave ? xcr0() : 0;
  const bool ymm = (xcr & 0x6) == 0x6;           // SSE + AVX state
  const bool zmm = ymm && (xcr & 0xe0) == 0xe0;  // opmask + ZMM state
  const bool tiles = (xcr & 0x60000) == 0x60000; // TILECFG + TILEDATA
  const Regs seven = cpuid(7, 0), sevenOne = cpuid(7, 1);
  f.fma = ymm && bit(one.c, 12);
  f.f16c = ymm && bit(one.c, 29);
  f.avx2 = ymm && bit(seven.b, 5);
  f.avx512f = zmm && bit(seven.b, 16);
  f.avx512bw = zmm && bit(seven.b, 30);
  f.avx512vl = zmm && bit(seven.b, 31);
  f.avx512vbmi = zmm && bit(seven.c, 1);
  f.avx512vnni = zmm && bit(seven.c, 11);
  f.avx512bf16 = zmm && bit(sevenOne.a, 5);
  f.amxBf16 = tiles && bit(seven.d, 22);
  f.amxTile = tiles && bit(seven.d, 24);
  f.amxInt8 = tiles && bit(seven.d, 25);
#endif
  return f;
}

constexpr int kUnset = -1;
std::atomic<int> forced{kUnset};

bool applyPath(std::string_view name, std::string *error);

CpuPath fromEnvironment() {
  const char *env = std::getenv("KILN_CPU_PATH");
  std::string error;
  if (env && *env && !applyPath(env, &error))
    // A wrong value must not go unnoticed, and library code may not exit:
    // say so once and keep the best path.
    std::fprintf(stderr, "kiln: $KILN_CPU_PATH: %s; using %s\n", error.c_str(),
                 std::string(cpuPathName(bestCpuPath())).c_str());
  int v = forced.load(std::memory_order_relaxed);
  return v == kUnset ? bestCpuPath() : CpuPath(v);
}

} // namespace

std::string CpuFeatures::list() const {
  std::string out;
  auto add = [&](bool has, const char *name) {
    if (has)
      out += out.empty() ? name : std::string(" ") + name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512vbmi, "avx512vbmi");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  add(amxTile, "amx-tile");
  add(amxBf16, "amx-bf16");
  add(amxInt8, "amx-int8");
  return out.empty() ? "none" : out;
}

const CpuFeatures &kiln::cpu::cpuFeatures() {
  static const CpuFeatures features = detect();
  return features;
}

std::string_view kiln::cpu::cpuPathName(CpuPath path) {
  switch (path) {
  case CpuPath::Scalar:
    return "scalar";
  case CpuPath::Avx2:
    return "avx2";
  case CpuPath::Avx512:
    return "avx512";
  }
  return "unknown";
}

std::string kiln::cpu::cpuSummary() {
  const CpuFeatures &f = cpuFeatures();
  return "cpu: " + f.model + "; features: " + f.list() +
         "; kernel path: " + std::string(cpuPathName(cpuPath())) +
         " (best here: " + std::string(cpuPathName(bestCpuPath())) +
         "); mxfp4 activations: " +
         std::string(mxfp4ActivationsName(mxfp4Activations())) +
         (mxfp4Activations() == Mxfp4Activations::Int8
              ? (useAvx512Vnni() ? " (avx512-vnni)" : " (scalar)")
              : "") +
         "; bf16 activations: " +
         std::string(bf16ActivationsName(bf16Activations())) +
         (bf16Activations() == Bf16Activations::BF16
              ? (useAvx512Bf16() ? " (avx512-bf16)" : " (scalar)")
              : "");
}

bool kiln::cpu::cpuHasAvx512() {
  const CpuFeatures &f = cpuFeatures();
  return f.avx512f && f.avx512bw && f.avx512vl;
}

bool kiln::cpu::cpuHasAvx2() {
  const CpuFeatures &f = cpuFeatures();
  return f.avx2 && f.fma && f.f16c;
}

CpuPath kiln::cpu::bestCpuPath() {
  return cpuHasAvx512() ? CpuPath::Avx512
         : cpuHasAvx2() ? CpuPath::Avx2
                        : CpuPath::Scalar;
}

CpuPath kiln::cpu::cpuPath() {
  static const CpuPath initial = fromEnvironment();
  int v = forced.load(std::memory_order_relaxed);
  return v == kUnset ? initial : CpuPath(v);
}

bool kiln::cpu::setCpuPath(std::string_view name, std::string *error) {
  (void)cpuPath(); // the environment first, so that this call wins
  return applyPath(name, error);
}

namespace {
bool applyPath(std::string_view name, std::string *error) {
  CpuPath path;
  if (name == "best")
    path = bestCpuPath();
  else if (name == "scalar")
    path = CpuPath::Scalar;
  else if (name == "avx2")
    path = CpuPath::Avx2;
  else if (name == "avx512")
    path = CpuPath::Avx512;
  else {
    if (error)
      *error = "unknown CPU path '" + std::string(name) +
               "', expected scalar, avx2, avx512 or best";
    return false;
  }
  if (path > bestCpuPath()) {
    if (error)
      *error =
          "CPU path '" + std::string(name) + "' needs " +
          (path == CpuPath::Avx512 ? "AVX-512 F/BW/VL" : "AVX2, FMA and F16C") +
          ", which this CPU (" + cpuFeatures().model +
          ") does not have; it can run " +
          std::string(cpuPathName(bestCpuPath()));
    return false;
  }
  forced.store(int(path), std::memory_order_relaxed);
  return true;
}
} // namespace

void kiln::cpu::setForceScalar(bool force) {
  forced.store(force ? int(CpuPath::Scalar) : kUnset,
               std::memory_order_relaxed);
}

//===----------------------------------------------------------------------===//
// Activation modes (MXFP4: f32 or int8; BF16: f32 or bf16)
//===----------------------------------------------------------------------===//

namespace {
/// One activation mode: two named values, the first the default, set by
/// $env or set(); the environment is read once, before any set() wins.
struct ActivationMode {
  const char *env, *what;
  std::string_view names[2];
  std::atomic<int> chosen{kUnset};

  bool apply(std::string_view name, std::string *error) {
    for (int i = 0; i < 2; ++i)
      if (name == names[i]) {
        chosen.store(i, std::memory_order_relaxed);
        return true;
      }
    if (error)
      *error = "unknown " + std::string(what) + " activation mode '" +
               std::string(name) + "', expected " + std::string(names[0]) +
               " or " + std::string(names[1]);
    return false;
  }
  int fromEnvironment() {
    const char *value = std::getenv(env);
    std::string error;
    if (value && *value && !apply(value, &error))
      std::fprintf(stderr, "kiln: $%s: %s; using %s\n", env, error.c_str(),
                   names[0].data());
    int v = chosen.load(std::memory_order_relaxed);
    return v == kUnset ? 0 : v;
  }
  int current(int initial) const {
    int v = chosen.load(std::memory_order_relaxed);
    return v == kUnset ? initial : v;
  }
};

ActivationMode mxfp4Mode{"KILN_MXFP4_ACTIVATIONS", "MXFP4", {"f32", "int8"}};
ActivationMode bf16Mode{"KILN_BF16_ACTIVATIONS", "BF16", {"f32", "bf16"}};
} // namespace

std::string_view kiln::cpu::mxfp4ActivationsName(Mxfp4Activations mode) {
  return mxfp4Mode.names[int(mode)];
}

Mxfp4Activations kiln::cpu::mxfp4Activations() {
  static const int initial = mxfp4Mode.fromEnvironment();
  return Mxfp4Activations(mxfp4Mode.current(initial));
}

bool kiln::cpu::setMxfp4Activations(std::string_view name, std::string *error) {
  (void)mxfp4Activations(); // the environment first, so that this call wins
  return mxfp4Mode.apply(name, error);
}

std::string_view kiln::cpu::bf16ActivationsName(Bf16Activations mode) {
  return bf16Mode.names[int(mode)];
}

Bf16Activations kiln::cpu::bf16Activations() {
  static const int initial = bf16Mode.fromEnvironment();
  return Bf16Activations(bf16Mode.current(initial));
}

bool kiln::cpu::setBf16Activations(std::string_view name, std::string *error) {
  (void)bf16Activations(); // the environment first, so that this call wins
  return bf16Mode.apply(name, error);
}
