//===- RocdlCodegen.cpp - buildKernels and the lowering to a code object --===//

#include "passes/codegen/rocdl/RocdlCodegen.h"

#include "passes/codegen/LinkShared.h"
#include "passes/codegen/rocdl/KernelIr.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/GPUToROCDL/GPUToROCDLPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include "passes/codegen/LlvmDriver.h"

#include <cstdlib>
#include <set>

using namespace mlir;
using namespace kiln::rocdl;

static constexpr const char *kTriple = "amdgcn-amd-amdhsa";

void kiln::rocdl::registerCodegenDialects(DialectRegistry &registry) {
  // convert-gpu-to-rocdl lowers every loaded dialect through its
  // ConvertToLLVMPatternInterface; without these the casts remain.
  kiln::codegen::registerKernelLowering(registry);
  registry
      .insert<amdgpu::AMDGPUDialect, gpu::GPUDialect, ROCDL::ROCDLDialect>();
  registerGPUDialectTranslation(registry);
  registerROCDLDialectTranslation(registry);
}

OwningOpRef<ModuleOp> kiln::rocdl::buildKernels(MLIRContext &context,
                                                ArrayRef<KernelSpec> specs) {
  DialectRegistry registry;
  registerCodegenDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(&context));
  if (failed(buildKernelModule(*module, specs)))
    return nullptr;
  return module;
}

LogicalResult kiln::rocdl::buildKernelModule(ModuleOp module,
                                             ArrayRef<KernelSpec> specs) {
  Location loc = module.getLoc();
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, kKernelModuleName);
  std::set<std::string> seen;
  for (const KernelSpec &spec : specs) {
    std::string error = spec.validate();
    if (!error.empty()) {
      gpuModule->erase();
      return emitError(loc) << error;
    }
    if (!seen.insert(spec.symbol()).second)
      continue;
    switch (spec.kind) {
    case KernelKind::MxGemm:
      buildMxGemm(gpuModule, spec);
      break;
    case KernelKind::Bf16Gemm:
      buildBf16Gemm(gpuModule, spec);
      break;
    case KernelKind::MoeRoute:
    case KernelKind::MoeAlign:
    case KernelKind::MoeGateUp:
    case KernelKind::MoeDown:
      buildMoeKernel(gpuModule, spec);
      break;
    case KernelKind::KvAppend:
    case KernelKind::MlaAttention:
    case KernelKind::IndexerTopK:
    case KernelKind::GqaAttention:
      buildAttentionKernel(gpuModule, spec);
      break;
    case KernelKind::RmsNorm:
    case KernelKind::SwiGlu:
    case KernelKind::Rope:
    case KernelKind::Argmax:
      buildRowKernel(gpuModule, spec);
      break;
    default:
      buildDataKernel(gpuModule, spec);
      break;
    }
  }
  if (failed(verify(gpuModule)))
    return emitError(loc)
           << "internal error: the generated kernels do not verify";
  return success();
}

static gpu::GPUModuleOp kernelModule(ModuleOp module) {
  for (auto m : module.getOps<gpu::GPUModuleOp>())
    if (m.getName() == kKernelModuleName)
      return m;
  return nullptr;
}

LogicalResult kiln::rocdl::lowerToLLVMDialect(ModuleOp module, Chip chip) {
  PassManager pm(module.getContext());
  OpPassManager &gpm = pm.nest<gpu::GPUModuleOp>();
  gpm.addPass(createCanonicalizerPass());
  gpm.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToROCDLOpsOptions options;
  // Without the chipset the scaled MFMA is rejected (AMDGPU.md gotcha 3).
  options.chipset = std::string(chipInfo(chip).name);
  options.indexBitwidth = 32;
  options.useBarePtrCallConv = true;
  gpm.addPass(createConvertGpuOpsToROCDLOps(options));
  gpm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

namespace {

/// LLVM side: TargetMachine creation, function attributes, O3, emission.
class Backend {
public:
  Backend(ModuleOp module, Chip chip, ArrayRef<KernelSpec> specs)
      : module_(module), chip_(chip), specs_(specs) {}

  LogicalResult translate() {
    static bool initialized = [] {
      LLVMInitializeAMDGPUTargetInfo();
      LLVMInitializeAMDGPUTarget();
      LLVMInitializeAMDGPUTargetMC();
      LLVMInitializeAMDGPUAsmPrinter();
      return true;
    }();
    (void)initialized;
    gpu::GPUModuleOp gpuModule = kernelModule(module_);
    if (!gpuModule)
      return module_.emitError() << "no gpu.module @" << kKernelModuleName;
    auto tm = kiln::codegen::makeTargetMachine(
        kTriple, std::string(chipInfo(chip_).name), "rocdl codegen");
    if (!tm.isOk())
      return module_.emitError() << tm.status().message();
    tm_ = std::move(tm).value();
    llvm::Triple triple(kTriple);
    llvm_ = translateModuleToLLVMIR(gpuModule, context_, "kiln_kernels");
    if (!llvm_)
      return module_.emitError() << "translation to LLVM IR failed";
    llvm_->setTargetTriple(triple);
    llvm_->setDataLayout(tm_->createDataLayout());
    // COV5 (AMDGPU.md gotcha 6).
    llvm_->addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version",
                         500);
    for (const KernelSpec &spec : specs_) {
      llvm::Function *fn = llvm_->getFunction(spec.symbol());
      if (!fn)
        continue;
      fn->addFnAttr("amdgpu-waves-per-eu",
                    std::to_string(spec.declaredWavesPerSimd()));
    }
    // Anything still declared but not an intrinsic would need the ROCm
    // device libraries, which Kiln never links (AMDGPU.md gotcha 2).
    for (llvm::Function &fn : *llvm_)
      if (fn.isDeclaration() && !fn.isIntrinsic())
        return module_.emitError()
               << "kernel code calls '" << fn.getName()
               << "', a ROCm device library function; use an LLVM AMDGPU "
                  "intrinsic instead";
    optimize();
    return success();
  }

  std::string llvmIr() const {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm_->print(os, nullptr);
    return text;
  }

  LogicalResult emit(llvm::CodeGenFileType type, std::string &out) {
    // Code generation rewrites the module, so each emission gets a copy.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*llvm_);
    auto file = kiln::codegen::emitFile(*copy, *tm_, type, "rocdl codegen");
    if (!file.isOk())
      return module_.emitError() << file.status().message();
    out = std::move(file).value();
    return success();
  }

private:
  // O3 drops the unused COV5 hidden arguments (AMDGPU.md gotcha 7).
  void optimize() { kiln::codegen::optimizeO3(*llvm_, *tm_); }

  ModuleOp module_;
  Chip chip_;
  ArrayRef<KernelSpec> specs_;
  llvm::LLVMContext context_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::Module> llvm_;
};

/// ld.lld -shared object -o code-object (passes/codegen/LinkShared.h).
LogicalResult link(ModuleOp module, const std::string &lldOption,
                   const std::string &object, std::vector<uint8_t> &out) {
  auto linked =
      kiln::codegen::linkSharedObject(object, lldOption, {}, "rocdl codegen");
  if (!linked.isOk())
    return module.emitError() << linked.status().message();
  out = std::move(linked).value();
  return success();
}

} // namespace

LogicalResult kiln::rocdl::translateToLLVMIR(ModuleOp module, Chip chip,
                                             ArrayRef<KernelSpec> specs,
                                             std::string &llvmIr) {
  if (failed(lowerToLLVMDialect(module, chip)))
    return failure();
  Backend backend(module, chip, specs);
  if (failed(backend.translate()))
    return failure();
  llvmIr = backend.llvmIr();
  return success();
}

LogicalResult kiln::rocdl::compileKernels(ModuleOp module, Chip chip,
                                          ArrayRef<KernelSpec> specs,
                                          const CompileOptions &options,
                                          CompiledModule &out) {
  if (failed(lowerToLLVMDialect(module, chip)))
    return failure();
  Backend backend(module, chip, specs);
  if (failed(backend.translate()))
    return failure();
  // The assembly is always produced: the kernel properties come from its
  // metadata.
  std::string assembly;
  if (failed(backend.emit(llvm::CodeGenFileType::AssemblyFile, assembly)))
    return failure();
  std::string error = parseKernelProperties(assembly, out.kernels);
  if (!error.empty())
    return module.emitError() << error;
  if (options.assembly)
    out.assembly = std::move(assembly);
  if (options.codeObject) {
    std::string object;
    if (failed(backend.emit(llvm::CodeGenFileType::ObjectFile, object)) ||
        failed(link(module, options.lldPath, object, out.codeObject)))
      return failure();
  }
  return success();
}
