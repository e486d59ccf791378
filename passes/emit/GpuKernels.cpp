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

KernelSpec kiln::emit::specForChip(const KernelSpec &launched, Chip chip) {
  KernelSpec spec = launched;
  spec.chip = chip;
  // declaredWavesPerSimd and the tiling depend on the chip.
  spec.chooseTiling();
  return spec;
}

Result<GpuCodeObject> kiln::emit::buildGpuCodeObject(
    Chip chip, const std::map<std::string, GpuDispatchLowering> &lowerings) {
  // Every distinct kernel once, specialized for the chip.
  std::vector<KernelSpec> specs;
  std::map<std::string, std::string> symbolOf; // chip-less spec -> symbol
  for (const auto &[key, lowering] : lowerings)
    for (const GpuLaunchSpec &l : lowering.launches) {
      KernelSpec spec = specForChip(l.spec, chip);
      if (symbolOf.emplace(l.spec.symbol(), spec.symbol()).second)
        specs.push_back(spec);
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
  std::map<std::string, GpuLaunchBinary> binaries;
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
    binaries[symbol] = {symbol, uint32_t(spec.blockSize()),
                        uint32_t(props->ldsBytes)};
  }
  for (const auto &[key, lowering] : lowerings) {
    std::vector<GpuLaunchBinary> &launches = out.dispatches[key]; // none: the
    for (const GpuLaunchSpec &l : lowering.launches) // communicator's alone
      launches.push_back(binaries.at(symbolOf.at(l.spec.symbol())));
  }
  out.elf = std::move(compiled.codeObject);
  return out;
}
