//===- CostModel.h - Predicted time of a plan dispatch on a GPU -*- C++ -*-===//
//
// A roofline per dispatch: the bytes it moves through HBM and the FLOPs it
// runs on each unit, against a chip's published peaks. The predicted time
// of a dispatch is max(bytes / bandwidth, sum over units of flops / peak),
// divided by the share of the chip's compute units its widest launch
// occupies, plus a fixed launch cost: what a kernel at the roofline would take,
// not what today's kernels take. It is a prediction and says so
// (docs/cost-model.md has the sources and the assumptions).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_COSTMODEL_H
#define KILN_PASSES_COSTMODEL_H

#include <array>
#include <string>
#include <string_view>

namespace kiln::cost {

/// The units a dispatch's arithmetic runs on.
enum class Unit {
  Bf16Mfma,  // BF16 matrix cores (also MXFP4 dequantized to BF16)
  Fp8Mfma,   // FP8 matrix cores
  Mxfp4Mfma, // scaled MFMA on MXFP4 operands (gfx950)
  Vector,    // FP32 vector ALUs (attention and row kernels today)
};
inline constexpr int kUnits = 4;
const char *unitName(Unit unit);

/// A chip's peaks: dense (no sparsity) FLOP/s per unit, HBM bytes/s.
struct Chip {
  std::string_view name, product;
  double hbmBytesPerS;
  std::array<double, kUnits> flopsPerS; // by Unit; 0: the unit is absent
  double launchS;                       // per kernel launch
  double hbmBytes;                      // memory per GPU
  int computeUnits;                     // CUs: a launch of fewer
                                        // workgroups leaves some idle
};

/// gfx950 (MI355X) or gfx942 (MI300X); null for another name.
const Chip *chipNamed(std::string_view name);

/// What one dispatch does.
struct Work {
  double bytes = 0;
  std::array<double, kUnits> flops = {};
  void add(Unit unit, double f) { flops[int(unit)] += f; }
};

struct Time {
  double memoryS = 0, computeS = 0, launchS = 0;
  double totalS() const {
    return (memoryS > computeS ? memoryS : computeS) + launchS;
  }
  bool memoryBound() const { return memoryS >= computeS; }
};

/// The roofline time of `work` on `chip`. Work on a unit the chip lacks
/// runs on the next one down (MXFP4 on gfx942: dequantized to BF16).
/// `occupancy` in (0, 1]: the share of the chip the work can use (a
/// launch of W workgroups on C compute units: min(1, W / C)); bandwidth and
/// throughput scale with it.
Time predict(const Chip &chip, const Work &work, double occupancy = 1.0);

} // namespace kiln::cost

#endif // KILN_PASSES_COSTMODEL_H
