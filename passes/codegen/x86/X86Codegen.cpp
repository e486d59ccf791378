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
#include "mlir/Parser/Parser.h"
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

/// f32 lanes per vector step: two ymm registers on x86-64-v3.
constexpr int kLanes = 16;

std::string vecTy() { return "vector<" + std::to_string(kLanes) + "xf32>"; }
std::string maskTy() { return "vector<" + std::to_string(kLanes) + "xi1>"; }

/// `%name : memref<?xf32>` over the bare pointer `%ptr` with `%len` (i64)
/// elements: a memref descriptor built in the LLVM dialect and cast.
std::string view(const std::string &name, const std::string &ptr,
                 const std::string &len) {
  std::string d = "%" + name + "_d";
  std::string s;
  s += "    " + d + "0 = llvm.mlir.poison : !desc\n";
  s +=
      "    " + d + "1 = llvm.insertvalue %" + ptr + ", " + d + "0[0] : !desc\n";
  s +=
      "    " + d + "2 = llvm.insertvalue %" + ptr + ", " + d + "1[1] : !desc\n";
  s += "    " + d + "3 = llvm.insertvalue %c0_i64, " + d + "2[2] : !desc\n";
  s += "    " + d + "4 = llvm.insertvalue %" + len + ", " + d +
       "3[3, 0] : !desc\n";
  s += "    " + d + "5 = llvm.insertvalue %c1_i64, " + d + "4[4, 0] : !desc\n";
  s += "    %" + name + " = builtin.unrealized_conversion_cast " + d +
       "5 : !desc to memref<?xf32>\n";
  return s;
}

std::string prologue() {
  return "    %c0_i64 = llvm.mlir.constant(0 : i64) : i64\n"
         "    %c1_i64 = llvm.mlir.constant(1 : i64) : i64\n"
         "    %c0 = arith.constant 0 : index\n"
         "    %c1 = arith.constant 1 : index\n"
         "    %cW = arith.constant " +
         std::to_string(kLanes) +
         " : index\n"
         "    %zero = arith.constant dense<0.0> : " +
         vecTy() +
         "\n"
         "    %one = arith.constant dense<1.0> : " +
         vecTy() + "\n";
}

/// A loop over elements [0, %len) (index) of the inputs `ins` (view,
/// offset index) into `out` at `outOff`, kLanes at a time with one masked
/// tail step. `body` reads %in0, %in1, ... and defines %r. `tag` keeps the
/// names of sibling loops apart.
std::string vecLoop(const std::string &tag, const std::string &len,
                    const std::vector<std::pair<std::string, std::string>> &ins,
                    const std::string &out, const std::string &outOff,
                    const std::string &body) {
  std::string V = vecTy(), M = maskTy(), t = tag;
  std::string s;
  s += "    %" + t + "_rem = arith.remui %" + len + ", %cW : index\n";
  s +=
      "    %" + t + "_main = arith.subi %" + len + ", %" + t + "_rem : index\n";
  auto step = [&](bool masked, const std::string &at) {
    std::string b;
    for (size_t i = 0; i < ins.size(); ++i) {
      std::string idx = "%ix" + std::to_string(i);
      b += "      " + idx + " = arith.addi %" + ins[i].second + ", " + at +
           " : index\n";
      if (masked)
        b += "      %in" + std::to_string(i) + " = vector.maskedload %" +
             ins[i].first + "[" + idx + "], %m, %zero : memref<?xf32>, " + M +
             ", " + V + " into " + V + "\n";
      else
        b += "      %in" + std::to_string(i) + " = vector.load %" +
             ins[i].first + "[" + idx + "] : memref<?xf32>, " + V + "\n";
    }
    b += body;
    b += "      %ox = arith.addi %" + outOff + ", " + at + " : index\n";
    if (masked)
      b += "      vector.maskedstore %" + out +
           "[%ox], %m, %r : memref<?xf32>, " + M + ", " + V + "\n";
    else
      b += "      vector.store %r, %" + out + "[%ox] : memref<?xf32>, " + V +
           "\n";
    return b;
  };
  s += "    scf.for %j = %c0 to %" + t + "_main step %cW {\n";
  s += step(false, "%j");
  s += "    }\n";
  s += "    %" + t + "_has = arith.cmpi ugt, %" + t + "_rem, %c0 : index\n";
  s += "    scf.if %" + t + "_has {\n";
  s += "      %m = vector.create_mask %" + t + "_rem : " + M + "\n";
  s += step(true, "%" + t + "_main");
  s += "    }\n";
  return s;
}

/// y = f(x) over n elements; `extraArgs` and `pre` for scale's factor.
std::string unaryKernel(const std::string &name, const std::string &body,
                        const std::string &extraArgs = "",
                        const std::string &pre = "") {
  std::string s = "  func.func @kiln_" + name +
                  "(%xp: !llvm.ptr, %yp: !llvm.ptr, %n: i64" + extraArgs +
                  ") {\n";
  s += prologue();
  s += view("x", "xp", "n") + view("y", "yp", "n");
  s += "    %ni = arith.index_cast %n : i64 to index\n";
  s += pre;
  s += vecLoop("l", "ni", {{"x", "c0"}}, "y", "c0", body);
  s += "    return\n  }\n";
  return s;
}

std::string v(const std::string &op) { return op + " : " + vecTy() + "\n"; }

/// y = a (op) b, b the same shape or one row broadcast over the rows.
std::string binaryKernel(const std::string &name, const std::string &op) {
  std::string s = "  func.func @kiln_" + name +
                  "(%ap: !llvm.ptr, %bp: !llvm.ptr, %yp: !llvm.ptr, "
                  "%rows: i64, %cols: i64, %bcast: i64) {\n";
  s += prologue();
  s += "    %isb = arith.cmpi ne, %bcast, %c0_i64 : i64\n"
       "    %total = arith.muli %rows, %cols : i64\n"
       "    %R = arith.select %isb, %rows, %c1_i64 : i64\n"
       "    %C = arith.select %isb, %cols, %total : i64\n"
       "    %bstride = arith.select %isb, %c0_i64, %C : i64\n";
  s += view("a", "ap", "total") + view("b", "bp", "C") +
       view("y", "yp", "total");
  s += "    %Ri = arith.index_cast %R : i64 to index\n"
       "    %Ci = arith.index_cast %C : i64 to index\n"
       "    %Bi = arith.index_cast %bstride : i64 to index\n"
       "    scf.for %row = %c0 to %Ri step %c1 {\n"
       "    %ao = arith.muli %row, %Ci : index\n"
       "    %bo = arith.muli %row, %Bi : index\n";
  s += vecLoop("l", "Ci", {{"a", "ao"}, {"b", "bo"}}, "y", "ao",
               "      %r = " + v(op + " %in0, %in1"));
  s += "    }\n    return\n  }\n";
  return s;
}

std::string rmsNormKernel() {
  std::string s = "  func.func @kiln_rms_norm(%xp: !llvm.ptr, %wp: !llvm.ptr, "
                  "%yp: !llvm.ptr, %rows: i64, %dim: i64, %eps: f32) {\n";
  s += prologue();
  s += "    %total = arith.muli %rows, %dim : i64\n";
  s += view("x", "xp", "total") + view("w", "wp", "dim") +
       view("y", "yp", "total");
  s += "    %Ri = arith.index_cast %rows : i64 to index\n"
       "    %Di = arith.index_cast %dim : i64 to index\n"
       "    %c8 = arith.constant 8 : index\n"
       "    %zf = arith.constant 0.0 : f32\n"
       "    %z8 = arith.constant dense<0.0> : vector<8xf32>\n"
       "    %zd = arith.constant dense<0.0> : vector<8xf64>\n"
       "    %oned = arith.constant 1.0 : f64\n"
       "    %dimf = arith.sitofp %dim : i64 to f64\n"
       "    %epsd = arith.extf %eps : f32 to f64\n"
       "    %srem = arith.remui %Di, %c8 : index\n"
       "    %smain = arith.subi %Di, %srem : index\n"
       "    scf.for %row = %c0 to %Ri step %c1 {\n"
       "    %xo = arith.muli %row, %Di : index\n"
       // Σ x² in f64, eight lanes at a time, then the masked tail.
       "    %acc = scf.for %k = %c0 to %smain step %c8 iter_args(%a = %zd) -> "
       "(vector<8xf64>) {\n"
       "      %kx = arith.addi %xo, %k : index\n"
       "      %sv = vector.load %x[%kx] : memref<?xf32>, vector<8xf32>\n"
       "      %sd = arith.extf %sv : vector<8xf32> to vector<8xf64>\n"
       "      %sa = math.fma %sd, %sd, %a : vector<8xf64>\n"
       "      scf.yield %sa : vector<8xf64>\n"
       "    }\n"
       "    %tk = arith.addi %xo, %smain : index\n"
       "    %tm = vector.create_mask %srem : vector<8xi1>\n"
       "    %tv = vector.maskedload %x[%tk], %tm, %z8 : memref<?xf32>, "
       "vector<8xi1>, vector<8xf32> into vector<8xf32>\n"
       "    %td = arith.extf %tv : vector<8xf32> to vector<8xf64>\n"
       "    %acc2 = math.fma %td, %td, %acc : vector<8xf64>\n"
       "    %ss = vector.reduction <add>, %acc2 : vector<8xf64> into f64\n"
       "    %mean = arith.divf %ss, %dimf : f64\n"
       "    %me = arith.addf %mean, %epsd : f64\n"
       "    %rt = math.sqrt %me : f64\n"
       "    %invd = arith.divf %oned, %rt : f64\n"
       "    %inv = arith.truncf %invd : f64 to f32\n"
       "    %invv = vector.broadcast %inv : f32 to " +
       vecTy() + "\n";
  s += vecLoop("l", "Di", {{"x", "xo"}, {"w", "c0"}}, "y", "xo",
               "      %xs = " + v("arith.mulf %in0, %invv") +
                   "      %r = " + v("arith.mulf %xs, %in1"));
  s += "    }\n    return\n  }\n";
  return s;
}

std::string kernelSource(const std::string &kernel) {
  std::string sig = "      %nx = " + v("arith.negf %in0") +
                    "      %e = " + v("math.exp %nx") +
                    "      %d = " + v("arith.addf %one, %e");
  if (kernel == "silu")
    return unaryKernel(kernel, sig + "      %r = " + v("arith.divf %in0, %d"));
  if (kernel == "sigmoid")
    return unaryKernel(kernel, sig + "      %r = " + v("arith.divf %one, %d"));
  if (kernel == "relu")
    // std::max(x, 0): x unless x < 0 (NaN and -0 pass through).
    return unaryKernel(
        kernel, "      %lt = arith.cmpf olt, %in0, %zero : " + vecTy() +
                    "\n      %r = arith.select %lt, %zero, %in0 : " + maskTy() +
                    ", " + vecTy() + "\n");
  if (kernel == "scale")
    return unaryKernel(
        kernel, "      %r = " + v("arith.mulf %in0, %sv"), ", %s: f32",
        "    %sv = vector.broadcast %s : f32 to " + vecTy() + "\n");
  if (kernel == "add")
    return binaryKernel(kernel, "arith.addf");
  if (kernel == "mul")
    return binaryKernel(kernel, "arith.mulf");
  if (kernel == "rms_norm")
    return rmsNormKernel();
  return "";
}

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

std::string
kiln::x86::hostKernelSource(const std::vector<std::string> &kernels) {
  std::string s = "!desc = !llvm.struct<(ptr, ptr, i64, array<1 x i64>, "
                  "array<1 x i64>)>\nmodule {\n";
  for (const std::string &k : selected(kernels))
    s += kernelSource(k);
  s += "}\n";
  return s;
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

  std::string source = hostKernelSource(names);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  if (!module || failed(verify(*module)))
    return makeError(StatusCode::Internal,
                     "x86 codegen: internal error: the generated kernels do "
                     "not parse or verify: ",
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
