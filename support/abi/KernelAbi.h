//===- KernelAbi.h - The contract between plans and kernels ----*- C++ -*-===//
//
// Every kernel a plan can dispatch is declared once, in Kernels.td: its
// arguments in order and its typed parameters. The build generates
// KernelContract.h from it (the Kernel enum, names, argument and parameter
// tables, one struct per kernel's parameters); Signature.h checks a
// dispatch against it on both sides. The compiler writes dispatches by it
// (kiln-build-plan, passes/BuildPlan.cpp, and the kiln_plan
// dialect's verifier); the runtime checks every dispatch once at
// load and then runs it without further checks. Header-only, no LLVM.
//
// This header adds what is not per kernel: the plans' input and output
// positions.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_KERNELABI_H
#define KILN_SUPPORT_ABI_KERNELABI_H

#include "support/abi/KernelContract.h"

#include <cstdint>

namespace kiln::abi {

/// Plan input and output positions (Plan.inputs / Plan.outputs).
enum PlanInput : uint32_t {
  kInputTokenIds = 0,
  kInputSeqIds = 1,
  kInputPositions = 2,
  kInputLogitRows = 3,
  kInputHidden = 4, // draft plan only
};
enum PlanOutput : uint32_t { kOutputLogits = 0, kOutputHidden = 1 };

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_KERNELABI_H
