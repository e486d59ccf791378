//===- GpuKernels.h - GPU code objects for the plans' dispatches ---------===//
//
// For each GPU target (gfx950, gfx942), finds the dispatches the generated
// kernels implement (passes/codegen/rocdl): matmul with a 2-D MXFP4 or BF16
// weight, rms_norm, add of two same-shaped buffers, rope and argmax; builds
// one specialized kernel per distinct shape and compiles them into one HSA
// code object per target. Other dispatches have no GPU symbol yet.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_GPUKERNELS_H
#define KILN_PASSES_EMIT_GPUKERNELS_H

#include "passes/codegen/rocdl/KernelSpec.h"
#include "passes/emit/PlanBuilder.h"
#include "passes/emit/WeightStreamer.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::emit {

/// One GPU kernel a dispatch uses, on one target.
struct GpuSymbol {
  std::string symbol;
  uint32_t workgroupSize = 0;
  uint32_t ldsBytes = 0;
};

struct GpuCodeObject {
  std::string target; // "gfx950"
  std::string triple; // "amdgcn-amd-amdhsa--gfx950"
  std::vector<uint8_t> elf;
  /// By specialization key (see gpuKernelKey), this target's symbol.
  std::map<std::string, GpuSymbol> symbols;
};

/// Targets named in kiln-compile's --target list other than cpu; an error
/// for unknown names.
Result<std::vector<rocdl::Chip>> parseGpuTargets(const std::string &targets);

/// The kernel a dispatch of `plan` maps to (chip-independent key, e.g.
/// "kiln_mx_gemm_n256_k512_t1x4"), or "" when no GPU kernel implements it.
/// `weights` are the streamed weights (their stored layout decides the
/// GEMM).
std::string gpuKernelKey(const PlanSpec &plan, const DispatchSpec &dispatch,
                         const ProgramSpec &program,
                         const std::vector<StreamedWeight> &weights);

/// Generates and compiles every kernel the plans use for `chip`.
Result<GpuCodeObject>
buildGpuCodeObject(rocdl::Chip chip, const ProgramSpec &program,
                   const std::vector<StreamedWeight> &weights);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_GPUKERNELS_H
