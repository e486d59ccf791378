//===- LlvmDriver.h - The LLVM toolchain both code generators drive -*- C++
//-*-===//
//
// What the ROCDL (gfx950/gfx942 code objects) and x86-64 (host kernels)
// generators share from the MLIR LLVM dialect down to a shared object: the
// dialects and ConvertToLLVM interfaces of the kernels' IR, the target
// machine, the O3 pipeline, object or assembly emission, and the ld.lld
// link (LinkShared.h). Each generator adds only its target's specifics
// (triple and CPU, function attributes, what a kernel may call).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_LLVMDRIVER_H
#define KILN_PASSES_CODEGEN_LLVMDRIVER_H

#include "support/Status.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <memory>
#include <string>

namespace kiln::codegen {

/// The dialects kernel IR is written in (arith, cf, math, memref, scf, ub,
/// vector, llvm), their ConvertToLLVM interfaces and the builtin and LLVM
/// translations to LLVM IR.
void registerKernelLowering(mlir::DialectRegistry &registry);

/// A PIC target machine at -O3 for `triple` and `cpu`; errors start with
/// `what` ("x86 codegen"). The target must be initialized.
Result<std::unique_ptr<llvm::TargetMachine>>
makeTargetMachine(const std::string &triple, const std::string &cpu,
                  const std::string &what);

/// LLVM's default O3 module pipeline for `tm`.
void optimizeO3(llvm::Module &module, llvm::TargetMachine &tm);

/// Object code or assembly of `module`. Code generation rewrites the module
/// it runs on: to emit twice, pass a copy (llvm::CloneModule) each time.
/// (Emitting a copy is not always byte-identical to emitting the original.)
Result<std::string> emitFile(llvm::Module &module, llvm::TargetMachine &tm,
                             llvm::CodeGenFileType type,
                             const std::string &what);

} // namespace kiln::codegen

#endif // KILN_PASSES_CODEGEN_LLVMDRIVER_H
