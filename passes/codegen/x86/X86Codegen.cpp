//===- X86Codegen.cpp - Compiled x86-64 host kernels ----------------------===//

#include "passes/codegen/x86/X86Codegen.h"

#include "passes/codegen/LinkShared.h"
#include "passes/codegen/LlvmDriver.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <cstdlib>

using namespace mlir;
using namespace kiln;
using namespace kiln::x86;

namespace {

std::vector<std::string> selected(const std::vector<std::string> &kernels) {
  std::vector<std::string> out;
  for (const std::string &k : hostKernelNames())
    if (kernels.empty() ||
        std::find(kernels.begin(), kernels.end(), k) != kernels.end())
      out.push_back(k);
  return out;
}

/// Collects the diagnostics of a context into a string.
struct Diagnostics {
  explicit Diagnostics(MLIRContext &context)
      : handler(context.getDiagEngine().registerHandler([this](Diagnostic &d) {
          text += d.str() + "\n";
          return success();
        })),
        context(context) {}
  ~Diagnostics() { context.getDiagEngine().eraseHandler(handler); }
  DiagnosticEngine::HandlerID handler;
  MLIRContext &context;
  std::string text;
};

Status lowerToLLVMDialect(ModuleOp module, std::string &diag) {
  // exp -> polynomial (no libm in the shared object).
  RewritePatternSet patterns(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns);
  if (failed(applyPatternsGreedily(module, std::move(patterns))))
    return makeError(StatusCode::Internal,
                     "x86 codegen: math approximation failed: ", diag);
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(module)))
    return makeError(
        StatusCode::Internal,
        "x86 codegen: lowering to the LLVM dialect failed: ", diag);
  return Status::ok();
}

Result<std::string> emitObject(ModuleOp module,
                               const std::vector<std::string> &symbols) {
  static bool initialized = [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    return true;
  }();
  (void)initialized;
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<llvm::TargetMachine> tm,
      kiln::codegen::makeTargetMachine(kTriple, kCpu, "x86 codegen"));
  llvm::Triple triple(kTriple);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "kiln_host_kernels");
  if (!llvmModule)
    return makeError(StatusCode::Internal,
                     "x86 codegen: translation to LLVM IR failed");
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(tm->createDataLayout());
  for (llvm::Function &fn : *llvmModule) {
    if (fn.isDeclaration()) {
      // Intrinsics the backend turns into libm calls are as bad as calls.
      llvm::StringRef name = fn.getName();
      bool libm =
          name.starts_with("llvm.exp") || name.starts_with("llvm.log") ||
          name.starts_with("llvm.pow") || name.starts_with("llvm.sin") ||
          name.starts_with("llvm.cos") || name.starts_with("llvm.tan");
      if (!fn.isIntrinsic() || libm)
        return makeError(StatusCode::Internal,
                         "x86 codegen: kernel code calls '", fn.getName().str(),
                         "', which the .so cannot link");
      continue;
    }
    fn.addFnAttr("target-cpu", kCpu);
    fn.addFnAttr("nounwind");
    if (std::find(symbols.begin(), symbols.end(), fn.getName().str()) ==
        symbols.end())
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  kiln::codegen::optimizeO3(*llvmModule, *tm);
  return kiln::codegen::emitFile(
      *llvmModule, *tm, llvm::CodeGenFileType::ObjectFile, "x86 codegen");
}

Result<std::vector<uint8_t>> link(const std::string &object,
                                  const std::string &lldOption) {
  llvm::StringRef extra[] = {"--hash-style=both", "-z", "noexecstack",
                             "-soname", "kiln_host_kernels.so"};
  return kiln::codegen::linkSharedObject(object, lldOption, extra,
                                         "x86 codegen");
}

} // namespace

const std::vector<std::string> &kiln::x86::hostKernelNames() {
  static const std::vector<std::string> names = {
      "silu", "sigmoid", "relu", "scale", "add", "mul", "rms_norm"};
  return names;
}

Result<HostCodeObject>
kiln::x86::buildHostKernels(const std::vector<std::string> &kernels,
                            const std::string &lldPath) {
  HostCodeObject out;
  std::vector<std::string> names = selected(kernels);
  if (names.empty())
    return out;
  DialectRegistry registry;
  kiln::codegen::registerKernelLowering(registry);
  registry.insert<func::FuncDialect>();
  registerConvertFuncToLLVMInterface(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  Diagnostics diag(context);

  OwningOpRef<ModuleOp> module = buildHostKernelModule(context, names);
  if (failed(verify(*module)))
    return makeError(StatusCode::Internal,
                     "x86 codegen: internal error: the generated kernels do "
                     "not verify: ",
                     diag.text);
  KILN_RETURN_IF_ERROR(lowerToLLVMDialect(*module, diag.text));
  std::vector<std::string> symbols;
  for (const std::string &k : names)
    symbols.push_back("kiln_" + k);
  KILN_ASSIGN_OR_RETURN(std::string object, emitObject(*module, symbols));
  KILN_ASSIGN_OR_RETURN(out.so, link(object, lldPath));
  for (const std::string &k : names)
    out.symbols.push_back({k, "kiln_" + k});
  return out;
}
