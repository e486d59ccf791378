//===- ModeScopes.h - Kernel paths and activation modes in tests -*- C++
//-*-===//
//
// Scopes that set a process-wide kernel choice (CpuFeatures.h) for as long
// as they live, shared by the CPU and attention kernel tests.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CPU_MODESCOPES_H
#define KILN_TEST_UNIT_CPU_MODESCOPES_H

#include "runtime/cpu/CpuFeatures.h"

#include <string>
#include <string_view>

namespace kiln::cpu::test {

/// Makes the kernels take their scalar paths while alive.
class ScalarScope {
public:
  ScalarScope() { setForceScalar(true); }
  ~ScalarScope() { setForceScalar(false); }
};

/// Sets an activation mode (CpuFeatures.h) while alive, then restores the
/// mode that was in force before.
template <class Mode, Mode (*Get)(),
          bool (*Set)(std::string_view, std::string *),
          std::string_view (*Name)(Mode)>
class ActivationModeScope {
public:
  explicit ActivationModeScope(std::string_view mode) : before_(Get()) {
    Set(mode, nullptr);
  }
  ~ActivationModeScope() { Set(Name(before_), nullptr); }

private:
  Mode before_;
};

/// MXFP4 matmuls take int8 activations while alive.
struct Int8ActivationsScope
    : ActivationModeScope<Mxfp4Activations, mxfp4Activations,
                          setMxfp4Activations, mxfp4ActivationsName> {
  Int8ActivationsScope() : ActivationModeScope("int8") {}
};

/// BF16 matmuls and attention take BF16 activations while alive.
struct Bf16ActivationsScope
    : ActivationModeScope<Bf16Activations, bf16Activations, setBf16Activations,
                          bf16ActivationsName> {
  Bf16ActivationsScope() : ActivationModeScope("bf16") {}
};

} // namespace kiln::cpu::test

#endif // KILN_TEST_UNIT_CPU_MODESCOPES_H
