//===- GpuKernels.cpp -----------------------------------------------------===//

#include "passes/emit/GpuKernels.h"

#include "passes/codegen/rocdl/RocdlCodegen.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <optional>
#include <sstream>

using namespace kiln;
using namespace kiln::emit;
using namespace kiln::rocdl;

Result<std::vector<Chip>>
kiln::emit::parseGpuTargets(const std::string &targets) {
  std::vector<Chip> chips;
  std::stringstream in(targets);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "cpu")
      continue;
    std::optional<Chip> chip = chipFromName(name);
    if (!chip)
      return makeError(StatusCode::InvalidArgument, "target '", name,
                       "': expected cpu, gfx950 or gfx942");
    if (std::find(chips.begin(), chips.end(), *chip) == chips.end())
      chips.push_back(*chip);
  }
  return chips;
}

namespace {

/// The kernel spec of a dispatch (chip left at its default), if any.
std::optional<KernelSpec> specOf(const PlanSpec &plan, const DispatchSpec &d,
                                 const ProgramSpec &program,
                                 const std::vector<StreamedWeight> &weights) {
  auto isBuffer = [&](size_t i) {
    return i < d.args.size() && d.args[i].kind == ArgKind::Buffer;
  };
  auto bufferElems = [&](size_t i) {
    return plan.buffers[d.args[i].index].rowElems();
  };
  KernelSpec s;
  switch (d.kernel) {
  case abi::Kernel::Matmul: {
    if (!isBuffer(0) || d.args.size() < 3 || d.args[1].kind != ArgKind::Weight)
      return std::nullopt;
    const WeightSpec &w = program.weights[d.args[1].index];
    const StreamedWeight &stored = weights[d.args[1].index];
    if (w.shape.size() != 2 || w.experts > 0)
      return std::nullopt;
    if (stored.layout == fb::WeightLayout::Mxfp4)
      s.kind = KernelKind::MxGemm;
    else if (stored.layout == fb::WeightLayout::Dense &&
             stored.dtype == fb::DType::BF16)
      s.kind = KernelKind::Bf16Gemm;
    else
      return std::nullopt;
    s.n = w.shape[0];
    s.k = w.shape[1];
    // Decode runs a few rows; prefill and draft get the two-tile kernel.
    s.m = plan.name == "decode" ? 1 : 64;
    s.chooseTiling();
    break;
  }
  case abi::Kernel::RmsNorm:
    if (!isBuffer(0) || d.args.size() < 3 ||
        d.args[1].kind != ArgKind::Weight || d.floats.empty())
      return std::nullopt;
    s.kind = KernelKind::RmsNorm;
    s.cols = program.weights[d.args[1].index].shape.back();
    s.eps = d.floats[0];
    if (bufferElems(0) % s.cols != 0)
      return std::nullopt;
    break;
  case abi::Kernel::Add:
    if (!isBuffer(0) || !isBuffer(1) || bufferElems(0) != bufferElems(1))
      return std::nullopt;
    s.kind = KernelKind::Add;
    s.cols = bufferElems(0);
    break;
  case abi::Kernel::Rope:
    if (!isBuffer(0) || d.ints.size() < 4 || d.floats.empty() || d.ints[3] <= 0)
      return std::nullopt;
    s.kind = KernelKind::Rope;
    s.neox = d.ints[0] == 1;
    s.offset = d.ints[1];
    s.rotaryDim = d.ints[2];
    s.heads = d.ints[3];
    s.headDim = bufferElems(0) / s.heads;
    s.theta = d.floats[0];
    break;
  case abi::Kernel::Argmax:
    if (!isBuffer(0))
      return std::nullopt;
    s.kind = KernelKind::Argmax;
    s.cols = plan.buffers[d.args[0].index].rowShape.empty()
                 ? 1
                 : plan.buffers[d.args[0].index].rowShape.back();
    break;
  default:
    return std::nullopt;
  }
  if (!s.validate().empty())
    return std::nullopt; // a shape the kernels do not cover: CPU only
  return s;
}

/// The symbol without its chip suffix.
std::string keyOf(const KernelSpec &spec) {
  std::string symbol = spec.symbol();
  return symbol.substr(0, symbol.rfind('_'));
}

} // namespace

std::string
kiln::emit::gpuKernelKey(const PlanSpec &plan, const DispatchSpec &dispatch,
                         const ProgramSpec &program,
                         const std::vector<StreamedWeight> &weights) {
  std::optional<KernelSpec> spec = specOf(plan, dispatch, program, weights);
  return spec ? keyOf(*spec) : "";
}

Result<GpuCodeObject>
kiln::emit::buildGpuCodeObject(Chip chip, const ProgramSpec &program,
                               const std::vector<StreamedWeight> &weights) {
  std::vector<KernelSpec> specs;
  std::map<std::string, size_t> byKey;
  for (const PlanSpec &plan : program.plans)
    for (const DispatchSpec &d : plan.dispatches) {
      std::optional<KernelSpec> spec = specOf(plan, d, program, weights);
      if (!spec)
        continue;
      spec->chip = chip;
      // declaredWavesPerSimd and the tiling depend on the chip.
      spec->chooseTiling();
      if (byKey.emplace(keyOf(*spec), specs.size()).second)
        specs.push_back(*spec);
    }

  GpuCodeObject out;
  out.target = std::string(chipInfo(chip).name);
  out.triple = "amdgcn-amd-amdhsa--" + out.target;
  if (specs.empty())
    return out;

  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + diag.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = buildKernels(context, specs);
  CompileOptions options;
  options.assembly = false;
  CompiledModule compiled;
  if (!module ||
      mlir::failed(compileKernels(*module, chip, specs, options, compiled)))
    return makeError(StatusCode::Internal, "GPU kernels for ", out.target, ": ",
                     diagnostics);
  for (const KernelSpec &spec : specs) {
    std::string symbol = spec.symbol();
    const KernelProperties *props = nullptr;
    for (const KernelProperties &p : compiled.kernels)
      if (p.name == symbol)
        props = &p;
    if (!props)
      return makeError(StatusCode::Internal, "GPU kernels for ", out.target,
                       ": the code object lacks ", symbol);
    std::string violations = checkKernelProperties(*props, spec);
    if (!violations.empty())
      return makeError(StatusCode::Internal, "GPU kernels for ", out.target,
                       ": quality gates failed: ", violations);
    out.symbols[keyOf(spec)] = {symbol, uint32_t(spec.blockSize()),
                                uint32_t(props->ldsBytes)};
  }
  out.elf = std::move(compiled.codeObject);
  return out;
}
