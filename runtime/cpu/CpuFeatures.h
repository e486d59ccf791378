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
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool avx512bf16 = false, avx512vnni = false, avx512vbmi = false;
  bool amxTile = false, amxBf16 = false, amxInt8 = false;
  std::string model; // "model name" of the first CPU, or the cpuid brand

  /// "avx2 fma avx512f ... amx-int8": the features above that are present.
  std::string list() const;
};

const CpuFeatures &cpuFeatures();

/// The kernel paths, lowest first.
enum class CpuPath { Scalar, Avx2, Avx512 };

std::string_view cpuPathName(CpuPath path);
/// The best path this CPU can run.
CpuPath bestCpuPath();
/// The path the kernels take: bestCpuPath(), or what $KILN_CPU_PATH or
/// setCpuPath() chose.
CpuPath cpuPath();
/// Forces `name` (scalar, avx2, avx512, or best). False, with `error` naming
/// the value and what this CPU can run, if it is unknown or not runnable here.
bool setCpuPath(std::string_view name, std::string *error);

/// "cpu: MODEL; features: LIST; kernel path: PATH (best here: PATH);
/// mxfp4 activations: MODE; bf16 activations: MODE", the line tools print so a
/// measurement says which code ran.
std::string cpuSummary();

/// True if this CPU has AVX-512 F, BW and VL (and the OS saves ZMM state).
bool cpuHasAvx512();
/// True if this CPU has AVX2, FMA and F16C (and the OS saves YMM state).
bool cpuHasAvx2();
/// True if the matmuls take their AVX2 + FMA path (a CPU without AVX-512,
/// or the path forced down to it); the other kernels run scalar there.
inline bool useAvx2() { return cpuPath() == CpuPath::Avx2; }
/// True if the kernels take their AVX-512 paths.
inline bool useAvx512() { return cpuPath() == CpuPath::Avx512; }
/// True if the int8 dot products (Mxfp4Activations::Int8) take AVX-512 VNNI
/// (vpdpbusd); without it they run the scalar reference.
inline bool useAvx512Vnni() { return useAvx512() && cpuFeatures().avx512vnni; }

/// True if the BF16 dot products (Bf16Activations::BF16) take AVX-512 BF16
/// (vdpbf16ps); without it they run the scalar reference.
inline bool useAvx512Bf16() { return useAvx512() && cpuFeatures().avx512bf16; }

/// Test hook: makes every kernel take its portable scalar path (true) or the
/// best one (false).
void setForceScalar(bool force);

/// How MXFP4 weights meet the activations in a matmul (Matmul.h):
///  - F32: the exact path, each E2M1 value times its scale in FP32 (default);
///  - Int8: activations rounded to int8 per 32-value block, multiplied with
///    the E2M1 codes as integers (AVX-512 VNNI where present).
/// Both are bit-identical across threads and batch composition; Int8 gives
/// up the activations' low bits for speed (docs/cpu.md).
enum class Mxfp4Activations { F32, Int8 };

std::string_view mxfp4ActivationsName(Mxfp4Activations mode);
/// The mode the kernels use: F32, or what $KILN_MXFP4_ACTIVATIONS or
/// setMxfp4Activations() chose.
Mxfp4Activations mxfp4Activations();
/// Chooses `name` (f32 or int8). False, with `error` naming the value, if
/// it is unknown.
bool setMxfp4Activations(std::string_view name, std::string *error);

/// How BF16 weights meet the activations in a matmul:
///  - F32: the exact path, each BF16 weight widened to FP32 (default);
///  - BF16: activations rounded to BF16, pairs of products added as AVX-512
///    BF16's vdpbf16ps adds them (MatmulBf16.h).
/// Both are bit-identical across threads and batch composition; BF16 gives
/// up the activations' low 16 bits for speed (docs/cpu.md).
enum class Bf16Activations { F32, BF16 };

std::string_view bf16ActivationsName(Bf16Activations mode);
/// The mode the kernels use: F32, or what $KILN_BF16_ACTIVATIONS or
/// setBf16Activations() chose.
Bf16Activations bf16Activations();
/// Chooses `name` (f32 or bf16). False, with `error` naming the value, if
/// it is unknown.
bool setBf16Activations(std::string_view name, std::string *error);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_CPUFEATURES_H
