//===- KernelProperties.h - What the AMDGPU backend made of a kernel -----===//
//
// Resource use read back from the code object metadata (.amdgpu_metadata in
// the ISA text: the same notes llvm-readelf --notes prints) plus instruction
// counts from the ISA, and the occupancy they allow. Quality gates check
// these: no scratch, no spills, LDS within the chip, registers within the
// occupancy the kernel was compiled for.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_KERNELPROPERTIES_H
#define KILN_PASSES_CODEGEN_ROCDL_KERNELPROPERTIES_H

#include "passes/codegen/rocdl/KernelSpec.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rocdl {

struct KernelProperties {
  std::string name;
  int64_t vgprs = 0;        // .vgpr_count (arch + accumulation, unified file)
  int64_t agprs = 0;        // .agpr_count
  int64_t sgprs = 0;        // .sgpr_count
  int64_t ldsBytes = 0;     // .group_segment_fixed_size
  int64_t scratchBytes = 0; // .private_segment_fixed_size
  int64_t vgprSpills = 0, sgprSpills = 0;
  int64_t kernargBytes = 0;
  int64_t maxWorkgroupSize = 0;
  // Instruction counts in the kernel's ISA.
  int64_t instructions = 0, mfma = 0, valu = 0, salu = 0, vmem = 0, lds = 0;

  /// Waves per SIMD the registers allow: 512 unified VGPRs per lane,
  /// allocated in granules of 8, at most 8 waves.
  int64_t wavesByRegisters() const;
  /// Waves per SIMD the LDS allows for `workgroupSize` threads (4 SIMDs
  /// per CU); 8 when the kernel uses none.
  int64_t wavesByLds(const ChipInfo &chip, int64_t workgroupSize) const;
};

/// Fills one entry per kernel from assembly produced by the AMDGPU backend.
/// Returns an error message, empty on success.
std::string parseKernelProperties(std::string_view assembly,
                                  std::vector<KernelProperties> &out);

/// The quality gates for one kernel; returns the violations, one per line
/// (empty when all hold).
std::string checkKernelProperties(const KernelProperties &props,
                                  const KernelSpec &spec);

/// Human- and FileCheck-readable summary, one `key: value` per line.
std::string formatKernelProperties(const KernelProperties &props,
                                   const KernelSpec &spec);

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_KERNELPROPERTIES_H
