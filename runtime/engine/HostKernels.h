//===- HostKernels.h - Compiled x86-64 kernels from the artifact -*- C++
//-*-===//
//
// The artifact may carry an x86-64 ELF shared object that kiln-compile built
// (passes/codegen/x86) for some kernels of the elementwise family. At load
// it is written to a memfd and dlopen'ed from /proc/self/fd/N; each
// KernelSymbol of target "x86_64" is resolved with dlsym. The object is built
// for x86-64-v3 (AVX2 + FMA): on an older CPU it is not loaded and the
// built-in kernels run. PlanRunner calls these functions instead of the
// built-ins when they are set. C ABI: passes/codegen/x86/X86Codegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_HOSTKERNELS_H
#define KILN_RUNTIME_ENGINE_HOSTKERNELS_H

#include "runtime/artifact/Artifact.h"
#include "support/Status.h"
#include "support/abi/KernelAbi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::engine {

using HostUnaryFn = void (*)(const float *x, float *y, int64_t n);
using HostScaleFn = void (*)(const float *x, float *y, int64_t n, float s);
using HostBinaryFn = void (*)(const float *a, const float *b, float *y,
                              int64_t rows, int64_t cols, int64_t rhsIsRow);
using HostRmsNormFn = void (*)(const float *x, const float *w, float *y,
                               int64_t rows, int64_t dim, float eps);

class HostKernels {
public:
  /// The target name of the code object and the symbols.
  static constexpr const char *kTarget = "x86_64";

  /// Whether this CPU runs the x86-64-v3 baseline (AVX2 and FMA).
  static bool cpuSupported();

  /// Loads `size` bytes of a shared object and resolves `symbols` (kernel,
  /// symbol name). Kernels without a host ABI here are ignored.
  static Result<std::unique_ptr<HostKernels>>
  load(const uint8_t *data, size_t size,
       const std::vector<std::pair<abi::Kernel, std::string>> &symbols);

  /// The artifact's x86_64 code object and symbols; null when it has none,
  /// or when the CPU lacks the baseline (then `note` says so).
  static Result<std::unique_ptr<HostKernels>>
  fromArtifact(const artifact::Artifact &artifact, std::string *note);

  ~HostKernels();
  HostKernels(const HostKernels &) = delete;
  HostKernels &operator=(const HostKernels &) = delete;

  /// Resolved kernels; null ones run as built-ins.
  HostUnaryFn silu = nullptr;
  HostUnaryFn sigmoid = nullptr;
  HostUnaryFn relu = nullptr;
  HostScaleFn scale = nullptr;
  HostBinaryFn add = nullptr;
  HostBinaryFn mul = nullptr;
  HostRmsNormFn rmsNorm = nullptr;
  /// How many kernels resolved.
  int count() const;

private:
  HostKernels() = default;
  void *handle_ = nullptr;
  int fd_ = -1;
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_HOSTKERNELS_H
