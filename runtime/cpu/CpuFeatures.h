//===- CpuFeatures.h - Which instruction set the kernels use ----*- C++ -*-===//
//
// The kernels are built for baseline x86-64 plus AVX-512 variants compiled
// with function target attributes; the variant is chosen at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_CPUFEATURES_H
#define KILN_RUNTIME_CPU_CPUFEATURES_H

namespace kiln::cpu {

/// True if this CPU has AVX-512 F, BW and VL.
bool cpuHasAvx512();

/// True if the kernels take their AVX-512 paths: the CPU has them and they
/// have not been turned off with setForceScalar().
bool useAvx512();

/// Test hook: makes every kernel take its portable scalar path.
void setForceScalar(bool force);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_CPUFEATURES_H
