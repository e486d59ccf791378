//===- KernelInterpreter.h - Executes the generated GPU kernels on the CPU ===//
//
// A SIMT interpreter for the gpu.module that buildKernels() returns (before
// any lowering): gpu, amdgpu, rocdl, arith, math, vector, memref, scf and
// llvm.call_intrinsic ops. One workgroup runs in lockstep: every SSA value
// holds one value per work-item, structured control flow runs under an
// active-lane mask, and wave-level ops (MFMA, shuffles, lane reads) combine
// the 64 lanes of each wave. Workgroups run one after another.
//
// Numerics: f32 arithmetic is done in float (IEEE, round to nearest even,
// denormals kept); f64 in double; narrower float types are computed in
// float and rounded to the type (LLVM's promotion). Transcendentals
// (exp2, log, sin, cos, rsq, ...) use libm in double and round to the
// result type, so they are at least as accurate as the hardware's ~1 ulp
// instructions but not bit-identical. An MFMA forms its dot products
// exactly (in double) and rounds once into each f32 accumulator.
//
// Every memory access is checked against the caller's real buffer sizes;
// any op the interpreter does not know is an error naming it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_KERNELINTERPRETER_H
#define KILN_TEST_UNIT_ROCDL_KERNELINTERPRETER_H

#include "passes/codegen/rocdl/KernelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rocdl::interp {

struct KernelArg {
  enum Kind { Pointer, I32 } kind = Pointer;
  void *pointer = nullptr; // Pointer: the real buffer
  size_t bytes = 0;        // Pointer: its size in bytes
  int32_t value = 0;       // I32

  static KernelArg ptr(void *p, size_t bytes);
  template <class T> static KernelArg of(std::vector<T> &v) {
    return ptr(v.data(), v.size() * sizeof(T));
  }
  static KernelArg i32(int32_t v);
};

/// Runs kernel `symbol` of the module's gpu.module over `grid` workgroups
/// (block size from the gpu.func's known_block_size). Args in the kernel's
/// argument order (memref args <- Pointer, i32/index args <- I32). Returns
/// "" on success, else a message naming what failed (an unsupported op with
/// its name, an access outside a buffer naming the argument number and the
/// element index, a type mismatch, ...).
std::string runKernel(mlir::ModuleOp module, llvm::StringRef symbol,
                      std::array<int64_t, 3> grid,
                      llvm::ArrayRef<KernelArg> args);

/// Builds the kernel for `spec` with buildKernels in a fresh context and
/// runs it.
std::string runKernel(const KernelSpec &spec, std::array<int64_t, 3> grid,
                      llvm::ArrayRef<KernelArg> args);

} // namespace kiln::rocdl::interp

#endif // KILN_TEST_UNIT_ROCDL_KERNELINTERPRETER_H
