//===- Program.h - A plan as the artifact stores it -------------*- C++ -*-===//
//
// One declaration of what an artifact's Plan and Cache tables hold, in plain
// structs: each plan's buffers (name, rows per call, element type, row
// shape), its inputs and outputs, and its kernel dispatches (the kernel, its
// arguments by index, its parameters of the kernel's own type from
// Kernels.td); and the caches the plans read and write. The compiler fills
// them from the kiln_plan IR (passes/emit/ProgramSpec.h), the engine tests
// by hand (test/unit/engine/TinyArtifact.h); runtime/artifact/PlanTable.h
// writes both into the artifact the same way.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_PROGRAM_H
#define KILN_SUPPORT_ABI_PROGRAM_H

#include "support/abi/KernelContract.h"
#include "support/abi/Signature.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kiln::abi {

struct BufferSpec {
  std::string name;
  RowsKind rows = RowsKind::Tokens;
  bool i32 = false; // else f32
  std::vector<int64_t> rowShape;
  int64_t rowElems() const {
    int64_t n = 1;
    for (int64_t d : rowShape)
      n *= d;
    return n;
  }
};

struct DispatchSpec {
  Kernel kernel;
  std::vector<ArgRef> args;
  Params params; // the kernel's own struct (Kernels.td)
  std::string location;
  template <typename P> const P &get() const { return std::get<P>(params); }
};

struct PlanSpec {
  std::string name;
  std::vector<BufferSpec> buffers;
  std::vector<uint32_t> inputs, outputs;
  std::vector<DispatchSpec> dispatches;
};

struct CacheSpec {
  std::string name;
  int64_t width = 0;
  bool bf16 = false;
  std::string owner = "main"; // the plan family that writes it: main, draft
};

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_PROGRAM_H
