//===- CpuFeatures.h - Which instruction set the kernels use ----*- C++ -*-===//
//
// The kernels are built for baseline x86-64 plus variants compiled with
// function target attributes; the variant is chosen once at run time from
// cpuid (and the OS's saved-state mask, XCR0), and can be forced lower with
// $KILN_CPU_PATH or setCpuPath() so a machine with AVX-512 also tests the
// paths below it. Every path computes the same bits (Matmul.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_CPUFEATURES_H
#define KILN_RUNTIME_CPU_CPUFEATURES_H

#include <string>
#include <string_view>

namespace kiln::cpu {

/// What this CPU and OS can run, from cpuid and XCR0.
struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool avx512bf16 = false, avx512vnni = false, avx512vbmi = false;
  bool amxTile = false, amxBf16 = false, amxInt8 = false;
  std::string model; // "model name" of the first CPU, or the cpuid brand

  /// "avx2 fma avx512f ... amx-int8": the features above that are present.
  std::string list() const;
};

const CpuFeatures &cpuFeatures();

/// The kernel paths, lowest first.
enum class CpuPath { Scalar, Avx512 };

std::string_view cpuPathName(CpuPath path);
/// The best path this CPU can run.
CpuPath bestCpuPath();
/// The path the kernels take: bestCpuPath(), or what $KILN_CPU_PATH or
/// setCpuPath() chose.
CpuPath cpuPath();
/// Forces `name` (scalar, avx512, or best). False, with `error` naming the
/// value and what this CPU can run, if it is unknown or not runnable here.
bool setCpuPath(std::string_view name, std::string *error);

/// "cpu: MODEL; features: LIST; kernel path: PATH (best here: PATH)", the
/// line tools print so a measurement says which code ran.
std::string cpuSummary();

/// True if this CPU has AVX-512 F, BW and VL (and the OS saves ZMM state).
bool cpuHasAvx512();
/// True if the kernels take their AVX-512 paths.
inline bool useAvx512() { return cpuPath() == CpuPath::Avx512; }

/// Test hook: makes every kernel take its portable scalar path (true) or the
/// best one (false).
void setForceScalar(bool force);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_CPUFEATURES_H
