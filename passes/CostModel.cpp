//===- CostModel.cpp - Chip peaks and the roofline ------------------------===//
//
// Peaks are the vendors' published dense figures (docs/cost-model.md):
//  * MI355X (gfx950): 8.0 TB/s HBM3E, 288 GB; 2.5 PFLOP/s BF16, 5.0 FP8,
//    10.05 MXFP4 (20.1 with sparsity), 157.3 TFLOP/s FP32 vector.
//  * MI300X (gfx942): 5.3 TB/s HBM3, 192 GB; 1307.4 TFLOP/s BF16, 2614.9
//    FP8, no MXFP4, 163.4 FP32 vector.
// Launch cost: 5 us per kernel, a typical HIP launch without graphs.
// Compute units: MI355X 256 (8 XCDs x 32), MI300X 304 (8 x 38).
//
//===----------------------------------------------------------------------===//

#include "passes/CostModel.h"

using namespace kiln::cost;

namespace {

constexpr double kT = 1e12;

constexpr Chip kChips[] = {
    {"gfx950",
     "MI355X",
     8.0e12,
     {2500 * kT, 5000 * kT, 10050 * kT, 157.3 * kT},
     5e-6,
     288e9,
     256},
    {"gfx942",
     "MI300X",
     5.3e12,
     {1307.4 * kT, 2614.9 * kT, 0, 163.4 * kT},
     5e-6,
     192e9,
     304},
};

} // namespace

const char *kiln::cost::unitName(Unit unit) {
  switch (unit) {
  case Unit::Bf16Mfma:
    return "bf16-mfma";
  case Unit::Fp8Mfma:
    return "fp8-mfma";
  case Unit::Mxfp4Mfma:
    return "mxfp4-mfma";
  case Unit::Vector:
    return "vector";
  }
  return "?";
}

const Chip *kiln::cost::chipNamed(std::string_view name) {
  for (const Chip &c : kChips)
    if (c.name == name)
      return &c;
  return nullptr;
}

Time kiln::cost::predict(const Chip &chip, const Work &work, double occupancy) {
  if (!(occupancy > 0) || occupancy > 1)
    occupancy = 1;
  Time t;
  t.memoryS = work.bytes / chip.hbmBytesPerS / occupancy;
  for (int u = 0; u < kUnits; ++u) {
    if (work.flops[u] == 0)
      continue;
    // A chip without the unit runs the work on BF16 matrix cores.
    double peak = chip.flopsPerS[u] > 0 ? chip.flopsPerS[u]
                                        : chip.flopsPerS[int(Unit::Bf16Mfma)];
    t.computeS += work.flops[u] / peak / occupancy;
  }
  t.launchS = chip.launchS;
  return t;
}
