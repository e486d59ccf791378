//===- StepProfile.h - Time per kernel kind over plan runs ------*- C++ -*-===//
//
// When enabled, the CPU plan runner adds each dispatch's wall time to its
// kernel's entry, so `kiln-bench --profile` shows where a step goes without
// a profiler. Off by default: a disabled profile costs one branch per
// dispatch.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_STEPPROFILE_H
#define KILN_RUNTIME_ENGINE_STEPPROFILE_H

#include "support/abi/KernelAbi.h"

#include <array>
#include <cstdint>

namespace kiln::engine {

struct StepProfile {
  static constexpr size_t kKinds = size_t(abi::Kernel::Count);

  bool enabled = false;
  std::array<double, kKinds> seconds{};
  std::array<int64_t, kKinds> calls{};
  /// Bytes the collectives sent to other ranks (not to this one).
  std::array<int64_t, kKinds> bytesSent{};

  void add(abi::Kernel kernel, double s) {
    seconds[size_t(kernel)] += s;
    calls[size_t(kernel)] += 1;
  }
  void sent(abi::Kernel kernel, int64_t bytes) {
    bytesSent[size_t(kernel)] += bytes;
  }
  void reset() {
    seconds.fill(0);
    calls.fill(0);
    bytesSent.fill(0);
  }
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_STEPPROFILE_H
