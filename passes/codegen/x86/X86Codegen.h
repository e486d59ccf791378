//===- X86Codegen.h - Compiled x86-64 host kernels --------------*- C++ -*-===//
//
// Builds the host (CPU) kernels of the elementwise family as one x86-64 ELF
// shared object, in process: an MLIR module built with builders
// (func/scf/arith/math/vector/memref over flat f32 buffers) lowered to the LLVM
// dialect, translated to LLVM IR, optimized at O3 for the fixed baseline
// x86-64-v3 (AVX2 + FMA + BMI2, any x86 from Haswell / Zen 1 on), emitted as a
// PIC object and linked with `ld.lld -shared`. The .so needs no libc or libm:
// exp is a polynomial approximation (MLIR math-polynomial-approximation, ~1-2
// ulp over the f32 range, inf/0 at overflow/underflow).
//
// C ABI of the symbols (all buffers contiguous f32; y may alias an input):
//   void kiln_silu   (const float *x, float *y, int64_t n);
//   void kiln_sigmoid(const float *x, float *y, int64_t n);
//   void kiln_relu   (const float *x, float *y, int64_t n);
//   void kiln_scale  (const float *x, float *y, int64_t n, float s);
//   void kiln_add    (const float *a, const float *b, float *y, int64_t rows,
//                     int64_t cols, int64_t rhs_is_row);
//   void kiln_mul    (same as kiln_add);
//   void kiln_rms_norm(const float *x, const float *w, float *y, int64_t rows,
//                      int64_t dim, float eps);   // sum of squares in f64
// add/mul: b is [rows, cols], or one row [cols] when rhs_is_row != 0.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_X86_X86CODEGEN_H
#define KILN_PASSES_CODEGEN_X86_X86CODEGEN_H

#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::x86 {

/// The target the shared object is built for.
inline constexpr const char *kTarget = "x86_64";
inline constexpr const char *kTriple = "x86_64-unknown-linux-gnu";
inline constexpr const char *kCpu = "x86-64-v3";

/// One kernel of the shared object: its KernelAbi.h name ("silu") and its
/// exported symbol ("kiln_silu").
struct HostSymbol {
  std::string kernel;
  std::string symbol;
};

struct HostCodeObject {
  std::vector<uint8_t> so; // the ELF shared object
  std::vector<HostSymbol> symbols;
};

/// The kernels the generator implements (KernelAbi.h names).
const std::vector<std::string> &hostKernelNames();

/// The kernels named in `kernels` as IR, built with MLIR builders
/// (HostKernelIr.cpp), before lowering.
mlir::OwningOpRef<mlir::ModuleOp>
buildHostKernelModule(mlir::MLIRContext &context,
                      const std::vector<std::string> &kernels);

/// Builds the shared object for the kernels named in `kernels` that the
/// generator implements (all of them when empty). `lldPath` overrides the
/// linker (else $KILN_LLD, else the configured ld.lld).
Result<HostCodeObject>
buildHostKernels(const std::vector<std::string> &kernels = {},
                 const std::string &lldPath = "");

} // namespace kiln::x86

#endif // KILN_PASSES_CODEGEN_X86_X86CODEGEN_H
