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
              : "");
}

bool kiln::cpu::cpuHasAvx512() {
  const CpuFeatures &f = cpuFeatures();
  return f.avx512f && f.avx512bw && f.avx512vl;
}

CpuPath kiln::cpu::bestCpuPath() {
  return cpuHasAvx512() ? CpuPath::Avx512 : CpuPath::Scalar;
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
  else if (name == "avx512")
    path = CpuPath::Avx512;
  else {
    if (error)
      *error = "unknown CPU path '" + std::string(name) +
               "', expected scalar, avx512 or best";
    return false;
  }
  if (path > bestCpuPath()) {
    if (error)
      *error = "CPU path '" + std::string(name) +
               "' needs AVX-512 F/BW/VL, which this CPU (" +
               cpuFeatures().model + ") does not have; it can run scalar";
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
// MXFP4 activations
//===----------------------------------------------------------------------===//

namespace {
std::atomic<int> mxfp4Mode{kUnset};

bool applyMxfp4Mode(std::string_view name, std::string *error) {
  Mxfp4Activations mode;
  if (name == "f32")
    mode = Mxfp4Activations::F32;
  else if (name == "int8")
    mode = Mxfp4Activations::Int8;
  else {
    if (error)
      *error = "unknown MXFP4 activation mode '" + std::string(name) +
               "', expected f32 or int8";
    return false;
  }
  mxfp4Mode.store(int(mode), std::memory_order_relaxed);
  return true;
}

Mxfp4Activations mxfp4FromEnvironment() {
  const char *env = std::getenv("KILN_MXFP4_ACTIVATIONS");
  std::string error;
  if (env && *env && !applyMxfp4Mode(env, &error))
    std::fprintf(stderr, "kiln: $KILN_MXFP4_ACTIVATIONS: %s; using f32\n",
                 error.c_str());
  int v = mxfp4Mode.load(std::memory_order_relaxed);
  return v == kUnset ? Mxfp4Activations::F32 : Mxfp4Activations(v);
}
} // namespace

std::string_view kiln::cpu::mxfp4ActivationsName(Mxfp4Activations mode) {
  return mode == Mxfp4Activations::Int8 ? "int8" : "f32";
}

Mxfp4Activations kiln::cpu::mxfp4Activations() {
  static const Mxfp4Activations initial = mxfp4FromEnvironment();
  int v = mxfp4Mode.load(std::memory_order_relaxed);
  return v == kUnset ? initial : Mxfp4Activations(v);
}

bool kiln::cpu::setMxfp4Activations(std::string_view name, std::string *error) {
  (void)mxfp4Activations(); // the environment first, so that this call wins
  return applyMxfp4Mode(name, error);
}
