//===- GpuKernels.h - GPU code objects for the plans' dispatches ---------===//
//
// For each GPU target (gfx950, gfx942), builds one specialized kernel per
// distinct spec the dispatches' launches name (kiln-lower-gpu-launches,
// GpuLaunch.h) and compiles them into one HSA code object per target. A
// dispatch whose shape no kernel family covers has no GPU lowering; the HIP
// runner refuses such an artifact by naming it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_GPUKERNELS_H
#define KILN_PASSES_EMIT_GPUKERNELS_H

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/emit/GpuLaunch.h"
#include "passes/emit/ProgramSpec.h"
#include "passes/emit/WeightStreamer.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::emit {

/// One compiled launch on one target.
struct GpuLaunchBinary {
  std::string symbol;
  uint32_t workgroupSize = 0;
  uint32_t ldsBytes = 0;
};

struct GpuCodeObject {
  std::string target; // "gfx950"
  std::string triple; // "amdgcn-amd-amdhsa--gfx950"
  std::vector<uint8_t> elf;
  /// By dispatch key (GpuDispatchLowering::key), the launches' binaries.
  std::map<std::string, std::vector<GpuLaunchBinary>> dispatches;
};

/// Targets named in kiln-compile's --target list other than cpu; an error
/// for unknown names.
Result<std::vector<rocdl::Chip>> parseGpuTargets(const std::string &targets);

/// A launch's kernel (GpuLaunchSpec::spec, chip-less) specialized for `chip`.
rocdl::KernelSpec specForChip(const rocdl::KernelSpec &launched,
                              rocdl::Chip chip);

/// Generates and compiles, for `chip`, every kernel the dispatches'
/// lowerings (by GpuDispatchLowering::key) launch.
Result<GpuCodeObject>
buildGpuCodeObject(rocdl::Chip chip,
                   const std::map<std::string, GpuDispatchLowering> &lowerings);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_GPUKERNELS_H
