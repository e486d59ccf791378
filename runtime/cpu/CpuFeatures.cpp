//===- CpuFeatures.cpp ----------------------------------------------------===//

#include "runtime/cpu/CpuFeatures.h"

#include <atomic>

using namespace kiln::cpu;

static std::atomic<bool> forceScalar{false};

bool kiln::cpu::cpuHasAvx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

bool kiln::cpu::useAvx512() {
  return cpuHasAvx512() && !forceScalar.load(std::memory_order_relaxed);
}

void kiln::cpu::setForceScalar(bool force) {
  forceScalar.store(force, std::memory_order_relaxed);
}
