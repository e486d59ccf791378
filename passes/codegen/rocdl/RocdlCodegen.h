//===- RocdlCodegen.h - GPU kernels to HSA code objects, in process -------===//
//
// The gfx950/gfx942 code generator (AMDGPU.md section 5, "C++ API route"):
//
//   KernelSpec --buildKernels--> gpu.module (gpu/amdgpu/arith/vector/memref/
//     scf) --convert-gpu-to-rocdl{chipset, bare pointers, 32-bit index}-->
//     LLVM dialect --translate--> LLVM IR --O3--> AMDGPU TargetMachine
//     --> ISA text and an ELF object --ld.lld -shared--> code object (COV5)
//
// No ROCm: constant block sizes and LLVM AMDGPU intrinsics keep the
// kernels off the device libraries, and linking execs ld.lld directly.
// Errors are MLIR diagnostics on the module's location.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_ROCDLCODEGEN_H
#define KILN_PASSES_CODEGEN_ROCDL_ROCDLCODEGEN_H

#include "passes/codegen/rocdl/KernelProperties.h"
#include "passes/codegen/rocdl/KernelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace kiln::rocdl {

/// Dialects and LLVM IR translations the generator needs.
void registerCodegenDialects(mlir::DialectRegistry &registry);

/// Name of the gpu.module that holds the kernels.
inline constexpr const char *kKernelModuleName = "kiln_kernels";

/// Builds `module { gpu.module @kiln_kernels { ... } }` with one kernel per
/// distinct spec (all for the same chip). Fails with a diagnostic when a
/// spec does not validate.
mlir::OwningOpRef<mlir::ModuleOp>
buildKernels(mlir::MLIRContext &context, llvm::ArrayRef<KernelSpec> specs);

/// The same gpu.module appended to `module`, whose context has the
/// dialects of registerCodegenDialects loaded (a pass declares them as its
/// dependent dialects): kiln-generate-gpu-kernels.
mlir::LogicalResult buildKernelModule(mlir::ModuleOp module,
                                      llvm::ArrayRef<KernelSpec> specs);

struct CompileOptions {
  bool assembly = true;   // fill CompiledModule::assembly
  bool codeObject = true; // fill CompiledModule::codeObject (runs ld.lld)
  /// ld.lld to exec; empty: $KILN_LLD, else the LLVM 22 tools' ld.lld.
  std::string lldPath;
};

struct CompiledModule {
  std::string assembly;                  // AMDGPU ISA with .amdgpu_metadata
  std::vector<uint8_t> codeObject;       // HSA code object (ELF, COV5)
  std::vector<KernelProperties> kernels; // from the metadata, per kernel
};

/// Lowers the module built by buildKernels() (in place, to the LLVM
/// dialect) and compiles it for `chip`. `specs` must be the ones it was
/// built from: they carry each kernel's declared occupancy.
mlir::LogicalResult compileKernels(mlir::ModuleOp module, Chip chip,
                                   llvm::ArrayRef<KernelSpec> specs,
                                   const CompileOptions &options,
                                   CompiledModule &out);

/// Only the MLIR part: lowers the gpu.module to the LLVM + ROCDL dialects.
mlir::LogicalResult lowerToLLVMDialect(mlir::ModuleOp module, Chip chip);

/// Only the translation: the lowered gpu.module as LLVM IR text, after O3.
mlir::LogicalResult translateToLLVMIR(mlir::ModuleOp module, Chip chip,
                                      llvm::ArrayRef<KernelSpec> specs,
                                      std::string &llvmIr);

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_ROCDLCODEGEN_H
