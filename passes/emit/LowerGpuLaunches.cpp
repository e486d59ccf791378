//===- LowerGpuLaunches.cpp - Plan dispatches to GPU launches in IR -------===//
//
// kiln-lower-gpu-launches (EmitPasses.td) writes each dispatch's GPU
// lowering (GpuLaunch.h) onto its kiln_plan.dispatch; readGpuLaunches reads
// them back for the artifact writer. The launch attribute names its kernel
// by the chip-less symbol; the writer specializes it per target.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/EmitPasses.h"

#include "dialects/plan/IR/PlanOps.h"
#include "passes/emit/GpuKernels.h"
#include "passes/emit/GpuLaunch.h"
#include "passes/emit/HostKernels.h"
#include "passes/emit/WeightStreamer.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERGPULAUNCHESPASS
#include "passes/emit/EmitPasses.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::emit;

namespace {

// The IR's parts are the artifact's, by number.
#define KILN_SAME_PART(ir, fbPart)                                             \
  static_assert(int(plan::GpuArgPart::ir) == int(fb::GpuArgPart::fbPart));
KILN_SAME_PART(data, Data)
KILN_SAME_PART(scales, Scales)
KILN_SAME_PART(scratch, Scratch)
KILN_SAME_PART(rows, Rows)
KILN_SAME_PART(cache_capacity, CacheCapacity)
KILN_SAME_PART(raw_data, RawData)
KILN_SAME_PART(raw_scales, RawScales)
KILN_SAME_PART(rows_of, RowsOf)
KILN_SAME_PART(page_table, PageTable)
KILN_SAME_PART(page_rows, PageRows)
#undef KILN_SAME_PART
static_assert(int(fb::GpuArgPart::MAX) == int(plan::GpuArgPart::page_rows));

/// The chip the symbols in IR leave out; any chip parses the same spec.
constexpr std::string_view kSymbolChip = "_gfx950";

std::string chiplessSymbol(const rocdl::KernelSpec &spec) {
  rocdl::KernelSpec s = spec;
  s.chip = rocdl::Chip::Gfx950;
  std::string symbol = s.symbol();
  return symbol.substr(0, symbol.size() - kSymbolChip.size());
}

plan::GpuLaunchAttr toAttr(MLIRContext *context, const GpuLaunchSpec &l) {
  SmallVector<int64_t> grid, args;
  for (const GpuGridAxis &g : l.grid)
    grid.append({g.mul, g.add, g.div, g.rowsOf});
  for (const GpuArgRef &a : l.args)
    args.append({int64_t(a.part), int64_t(a.index)});
  return plan::GpuLaunchAttr::get(context, chiplessSymbol(l.spec), grid, args);
}

struct LowerGpuLaunchesPass
    : kiln::impl::KilnLowerGpuLaunchesPassBase<LowerGpuLaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Result<std::vector<rocdl::Chip>> chips = parseGpuTargets(targets);
    if (!chips.isOk()) {
      module.emitError() << chips.status().message();
      return signalPassFailure();
    }
    if (chips->empty()) {
      module.emitError() << "targets '" << targets
                         << "' name no GPU: nothing to lower";
      return signalPassFailure();
    }
    if (decodeAttention != "vector" && decodeAttention != "mfma") {
      module.emitError() << "decode-attention '" << decodeAttention
                         << "', expected vector or mfma";
      return signalPassFailure();
    }
    if (fp8Gemm != "bf16" && fp8Gemm != "fp8") {
      module.emitError() << "fp8-gemm '" << fp8Gemm
                         << "', expected bf16 or fp8";
      return signalPassFailure();
    }
    const bool cpu = targetsIncludeCpu(targets);
    Result<ProgramSpec> program = readPrograms(module);
    if (!program.isOk()) {
      module.emitError() << program.status().message();
      return signalPassFailure();
    }
    chooseWeightLayouts(*program, /*panels=*/false, /*gpu=*/true, cpu);
    std::vector<StoredForm> forms;
    for (const WeightSpec &w : program->weights)
      forms.push_back(storedForm(w));

    MLIRContext *context = module.getContext();
    Builder b(context);
    bool failed = false;
    size_t planIndex = 0;
    for (auto p : module.getOps<plan::PlanOp>()) {
      const PlanSpec &plan = program->plans[planIndex++];
      size_t index = 0;
      for (auto op : p.getBody().front().getOps<plan::DispatchOp>()) {
        const DispatchSpec &d = plan.dispatches[index];
        op.removeGpuLaunchesAttr();
        op.removeGpuScratchAttr();
        std::optional<GpuDispatchLowering> lowering =
            lowerGpuDispatch({plan, d, *program, forms,
                              decodeAttention == "mfma", fp8Gemm == "fp8"});
        if (!lowering) {
          if (!cpu) {
            op.emitError() << "plan '" << plan.name << "' dispatch " << index
                           << " (" << op.getKernel()
                           << ") has no GPU kernel for its shapes and "
                              "weights, and targets '"
                           << targets
                           << "' have no cpu to run it: add cpu to --target";
            failed = true;
          }
          ++index;
          continue;
        }
        SmallVector<Attribute> launches;
        for (const GpuLaunchSpec &l : lowering->launches)
          launches.push_back(toAttr(context, l));
        op.setGpuLaunchesAttr(b.getArrayAttr(launches));
        if (!lowering->scratch.empty()) {
          SmallVector<int64_t> scratch;
          for (const GpuScratchSpec &s : lowering->scratch)
            scratch.append({s.perRow, s.fixed, s.perPosition});
          op.setGpuScratchAttr(b.getDenseI64ArrayAttr(scratch));
        }
        ++index;
      }
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace

Result<std::vector<std::vector<std::optional<GpuDispatchLowering>>>>
kiln::emit::readGpuLaunches(ModuleOp module) {
  std::vector<std::vector<std::optional<GpuDispatchLowering>>> out;
  for (auto p : module.getOps<plan::PlanOp>()) {
    out.emplace_back();
    for (auto op : p.getBody().front().getOps<plan::DispatchOp>()) {
      out.back().emplace_back();
      ArrayAttr launches = op.getGpuLaunchesAttr();
      if (!launches)
        continue;
      GpuDispatchLowering lowering;
      for (Attribute a : launches) {
        auto launch = cast<plan::GpuLaunchAttr>(a);
        std::string symbol =
            launch.getKernel().str() + std::string(kSymbolChip);
        std::optional<rocdl::KernelSpec> spec =
            rocdl::KernelSpec::fromSymbol(symbol);
        std::string error = spec ? spec->validate() : "not a kernel symbol";
        if (!error.empty())
          return makeError(
              StatusCode::InvalidArgument, "plan '", p.getSymName().str(),
              "' dispatch ", out.back().size() - 1, " (", op.getKernel().str(),
              "): launch kernel '", launch.getKernel().str(), "': ", error);
        GpuLaunchSpec l;
        l.spec = *spec;
        ArrayRef<int64_t> grid = launch.getGrid();
        for (size_t axis = 0; axis < 3; ++axis) {
          const int64_t *g = &grid[plan::GpuLaunchAttr::kAxisFields * axis];
          l.grid[axis] = {g[0], g[1], g[2], int32_t(g[3])};
        }
        for (size_t i = 0; i < launch.getNumArgs(); ++i)
          l.args.push_back({static_cast<fb::GpuArgPart>(launch.getArgPart(i)),
                            uint32_t(launch.getArgIndex(i))});
        lowering.launches.push_back(std::move(l));
      }
      // Recorded with no launch: the communicator's alone.
      lowering.communicatorOnly = lowering.launches.empty();
      if (auto scratch = op.getGpuScratchAttr()) {
        ArrayRef<int64_t> s = scratch.asArrayRef();
        for (size_t i = 0; i + 2 < s.size(); i += 3)
          lowering.scratch.push_back({s[i], s[i + 1], s[i + 2]});
      }
      out.back().back() = std::move(lowering);
    }
  }
  return out;
}
