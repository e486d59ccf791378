//===- GenerateGpuKernels.cpp - The launches' kernels as a gpu.module -----===//
//
// kiln-generate-gpu-kernels (EmitPasses.td): the kernels of every
// dispatch's gpu_launches, specialized for one chip, built by
// passes/codegen/rocdl into `gpu.module @kiln_kernels` beside the plans.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/EmitPasses.h"

#include "passes/codegen/rocdl/RocdlCodegen.h"
#include "passes/emit/GpuKernels.h"
#include "passes/emit/GpuLaunch.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <set>

namespace kiln {
#define GEN_PASS_DEF_KILNGENERATEGPUKERNELSPASS
#include "passes/emit/EmitPasses.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::emit;

namespace {

struct GenerateGpuKernelsPass
    : kiln::impl::KilnGenerateGpuKernelsPassBase<GenerateGpuKernelsPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    rocdl::registerCodegenDialects(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<rocdl::Chip> target = rocdl::chipFromName(chip);
    if (!target) {
      module.emitError() << "unknown chip '" << chip
                         << "', expected gfx950 or gfx942";
      return signalPassFailure();
    }
    auto launches = readGpuLaunches(module);
    if (!launches.isOk()) {
      module.emitError() << launches.status().message();
      return signalPassFailure();
    }
    std::vector<rocdl::KernelSpec> specs;
    std::set<std::string> seen;
    for (const auto &plan : *launches)
      for (const std::optional<GpuDispatchLowering> &d : plan) {
        if (!d)
          continue;
        for (const GpuLaunchSpec &l : d->launches) {
          rocdl::KernelSpec spec = specForChip(l.spec, *target);
          if (seen.insert(spec.symbol()).second)
            specs.push_back(spec);
        }
      }
    if (auto old =
            module.lookupSymbol<gpu::GPUModuleOp>(rocdl::kKernelModuleName))
      old->erase();
    if (specs.empty())
      return;
    if (failed(rocdl::buildKernelModule(module, specs)))
      signalPassFailure();
  }
};

} // namespace
