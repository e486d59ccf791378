//===- kiln-gpu-codegen.cpp - Emit one GPU kernel for a chip --------------===//
//
//   kiln-gpu-codegen --kernel=mx_gemm --chip=gfx950 --m=16 --n=256 --k=512
//                    --emit=isa|hsaco|mlir|llvm|report [--check] -o F
//
// Generates one kernel with passes/codegen/rocdl and writes the stage asked
// for. `report` prints the kernel's resource use and the quality gates;
// --check makes any gate violation (scratch, spills, LDS, occupancy) an
// error. A thin wrapper for lit tests and inspection.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/codegen/rocdl/RocdlCodegen.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace kiln::rocdl;

static cl::OptionCategory category("kiln-gpu-codegen options");
static cl::opt<std::string>
    kernel("kernel",
           cl::desc("mx_gemm, bf16_gemm, rms_norm, swiglu, rope, argmax "
                    "(the other kinds take --symbol)"),
           cl::init(""), cl::cat(category));
static cl::opt<std::string>
    symbolName("symbol",
               cl::desc("Any kernel, by the symbol its spec has (e.g. "
                        "kiln_softmax_c64_gfx950); overrides the other "
                        "spec options and --chip"),
               cl::init(""), cl::cat(category));
static cl::opt<std::string> chip("chip", cl::desc("gfx950 or gfx942"),
                                 cl::init("gfx950"), cl::cat(category));
static cl::opt<int64_t> m("m", cl::desc("GEMM rows (tiling hint)"),
                          cl::init(16), cl::cat(category));
static cl::opt<int64_t> n("n", cl::desc("GEMM output columns"), cl::init(0),
                          cl::cat(category));
static cl::opt<int64_t> k("k", cl::desc("GEMM reduction size"), cl::init(0),
                          cl::cat(category));
static cl::opt<int64_t> cols("cols", cl::desc("Row kernels: row width"),
                             cl::init(0), cl::cat(category));
static cl::opt<float> eps("eps", cl::desc("rms_norm epsilon"), cl::init(1e-5f),
                          cl::cat(category));
static cl::opt<int64_t> heads("heads", cl::desc("rope: heads per token"),
                              cl::init(0), cl::cat(category));
static cl::opt<int64_t> headDim("head-dim", cl::desc("rope: values per head"),
                                cl::init(0), cl::cat(category));
static cl::opt<int64_t> ropeOffset("rope-offset",
                                   cl::desc("rope: first rotated dim"),
                                   cl::init(0), cl::cat(category));
static cl::opt<int64_t> rotaryDim("rotary-dim",
                                  cl::desc("rope: rotated dims per head"),
                                  cl::init(0), cl::cat(category));
static cl::opt<std::string> ropeStyle("rope-style",
                                      cl::desc("interleaved or neox"),
                                      cl::init("interleaved"),
                                      cl::cat(category));
static cl::opt<float> theta("theta", cl::desc("rope base"), cl::init(10000.0f),
                            cl::cat(category));
static cl::opt<std::string>
    emit("emit",
         cl::desc("isa, hsaco, mlir (gpu.module), llvm (after O3), "
                  "report"),
         cl::init("isa"), cl::cat(category));
static cl::opt<bool> check("check",
                           cl::desc("Fail when a quality gate does not hold"),
                           cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                       cl::value_desc("path"), cl::init("-"),
                                       cl::cat(category));

static int fail(const Twine &message) {
  errs() << "kiln-gpu-codegen: " << message << "\n";
  return 1;
}

static int emitKernels(const KernelSpec &spec);

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Kiln GPU kernel generator\n");

  KernelSpec spec;
  if (!symbolName.empty()) {
    std::optional<KernelSpec> parsed = KernelSpec::fromSymbol(symbolName);
    if (!parsed)
      return fail("'" + symbolName + "' is not a Kiln kernel symbol");
    return emitKernels(*parsed);
  }
  if (kernel.empty())
    return fail("one of --kernel or --symbol is required");
  auto kind = kernelKindFromName(kernel);
  if (!kind)
    return fail("unknown kernel '" + kernel + "'");
  auto target = chipFromName(chip);
  if (!target)
    return fail("unknown chip '" + chip + "', expected gfx950 or gfx942");
  if (ropeStyle != "interleaved" && ropeStyle != "neox")
    return fail("--rope-style must be interleaved or neox, got '" + ropeStyle +
                "'");
  switch (*kind) {
  case KernelKind::MxGemm:
  case KernelKind::Bf16Gemm:
    spec.kind = *kind;
    spec.m = m;
    spec.n = n;
    spec.k = k;
    spec.chooseTiling();
    break;
  case KernelKind::RmsNorm: {
    RmsNormParams p;
    p.c = cols;
    p.eps = eps;
    spec = makeSpec(p);
    break;
  }
  case KernelKind::SwiGlu: {
    SwiGluParams p;
    p.c = cols;
    spec = makeSpec(p);
    break;
  }
  case KernelKind::Argmax: {
    ArgmaxParams p;
    p.c = cols;
    spec = makeSpec(p);
    break;
  }
  case KernelKind::Rope: {
    RopeParams p;
    p.neox = ropeStyle == "neox" ? 1 : 0;
    p.h = heads;
    p.d = headDim;
    p.o = ropeOffset;
    p.r = rotaryDim;
    p.theta = theta;
    spec = makeSpec(p);
    break;
  }
  default:
    return fail("kernel '" + kernel + "' takes --symbol");
  }
  spec.chip = *target;
  return emitKernels(spec);
}

static int emitKernels(const KernelSpec &spec) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildKernels(context, {spec});
  if (!module)
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);

  if (emit == "mlir") {
    module->print(output->os());
    output->keep();
    return 0;
  }
  if (emit == "llvm") {
    std::string ir;
    if (failed(translateToLLVMIR(*module, spec.chip, {spec}, ir)))
      return 1;
    output->os() << ir;
    output->keep();
    return 0;
  }
  if (emit != "isa" && emit != "hsaco" && emit != "report")
    return fail("--emit must be isa, hsaco, mlir, llvm or report, got '" +
                emit + "'");

  CompileOptions options;
  options.codeObject = emit == "hsaco";
  CompiledModule compiled;
  if (failed(compileKernels(*module, spec.chip, {spec}, options, compiled)))
    return 1;
  const KernelProperties *props = nullptr;
  for (const KernelProperties &p : compiled.kernels)
    if (p.name == spec.symbol())
      props = &p;
  if (!props)
    return fail("the code object has no kernel " + spec.symbol());

  if (emit == "isa")
    output->os() << compiled.assembly;
  else if (emit == "hsaco")
    output->os().write(
        reinterpret_cast<const char *>(compiled.codeObject.data()),
        compiled.codeObject.size());
  else
    output->os() << formatKernelProperties(*props, spec);
  output->keep();

  std::string violations = checkKernelProperties(*props, spec);
  if (check && !violations.empty())
    return fail("quality gates failed:\n" + violations);
  return 0;
}
