//===- MfmaLayout.h - Index math shared by the GPU GEMMs and their model --===//
//
// Every address and lane assignment the gfx950/gfx942 GEMM kernels use,
// written once as templates over the index type `I`. The MLIR kernel
// generator instantiates them with IrIndex (each operator emits an arith op),
// the weight pre-shuffle and the CPU emulator of the kernels with int64_t, so
// the kernels, the artifact layout and the emulation cannot drift apart.
// Header-only and free of LLVM.
//
// One wave (64 lanes) computes 16x16 output tiles with MFMA instructions.
// For every 16x16 MFMA used here, lane l supplies row l % 16 of A (an
// activation row) and row l % 16 of B (a weight row, i.e. an output column:
// B is read N-major) and a contiguous run of `laneK` elements along K; the
// four lane groups g = l / 16 cover the step's K = 4 * laneK. The result
// lane l holds C[4 * (l / 16) + i][l % 16], i < 4 (AMDGPU.md section 3).
//
// The kernels rely on three facts about the instructions, nothing else:
//  1. A and B use the same lane -> K assignment, so any fixed permutation of
//     K inside one step leaves the dot products unchanged. The bf16 paths
//     use this to feed a lane's contiguous run to K=16/K=32 MFMAs in pieces.
//  2. The C layout above.
//  3. 16x16x128 FP4 scaled MFMA: lane l's 32 elements form one MX block,
//     K [32 * (l / 16), +32) of the step, and its scale byte applies to them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_MFMALAYOUT_H
#define KILN_PASSES_CODEGEN_ROCDL_MFMALAYOUT_H

#include <cstdint>

namespace kiln::rocdl {

inline constexpr int64_t kWaveSize = 64;
/// Output tile side of every MFMA the kernels use (16x16).
inline constexpr int64_t kTile = 16;
/// Lane groups per tile: lanes [16g, 16g + 16) share K run g.
inline constexpr int64_t kLaneGroups = kWaveSize / kTile;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Row of A and of B (weight row within the tile) that `lane` supplies.
template <typename I> I operandRow(I lane) { return lane % kTile; }
/// K run (0..3) of the step that `lane` supplies.
template <typename I> I operandKGroup(I lane) { return lane / kTile; }
/// Output row (along M) of accumulator element `i` of `lane`.
template <typename I> I resultRow(I lane, int64_t i) {
  return lane / kTile * 4 + i;
}
/// Output column (along N) of every accumulator element of `lane`.
template <typename I> I resultCol(I lane) { return lane % kTile; }

//===----------------------------------------------------------------------===//
// MXFP4 GEMM: y[M, N] = x[M, K] * W^T, W as MXFP4 [N, K/2] + E8M0 [N, K/32]
//===----------------------------------------------------------------------===//

/// K per step: one 16x16x128 scaled MFMA (gfx950), or eight 16x16x16 bf16
/// MFMAs (gfx942) over the same registers.
inline constexpr int64_t kMxStepK = 128;
/// K elements each lane supplies per step: exactly one MX block.
inline constexpr int64_t kMxLaneK = 32;
/// Bytes of packed FP4 each lane loads per step (one global_load_dwordx4).
inline constexpr int64_t kMxLaneBytes = kMxLaneK / 2;
/// Scale bytes per 32-bit scale word: consecutive K steps of one lane.
inline constexpr int64_t kMxStepsPerScaleWord = 4;

/// The pre-shuffled weight layout the MXFP4 kernels read.
///
/// data:   [nTiles][kSteps][64 lanes][16 B]. Lane l of (nTile, kStep) holds
///         the 32 FP4 of weight row 16 * nTile + l % 16, K [128 * kStep +
///         32 * (l / 16), +32), packed as in the checkpoint (low nibble =
///         even element). A wave reads one contiguous KiB per step. This is
///         AITER's shuffle_weight(layout=(16, 16)) for FP4.
/// scales: [nTiles][kWords][64 lanes] 32-bit words. Byte j of lane l's word
///         kWord is the E8M0 scale of the block lane l covers in K step
///         4 * kWord + j; the kernel selects it with the MFMA's op_sel.
/// Rows past N and K past the checkpoint's K are zero (scale 127 = 1.0), so
/// every load stays in bounds for any tile.
struct MxWeightLayout {
  int64_t n = 0, k = 0; // logical [N, K]
  int64_t nTiles = 0;   // ceil(N / 16)
  int64_t kSteps = 0;   // ceil(K / 128)
  int64_t kWords = 0;   // ceil(kSteps / 4)

  static MxWeightLayout forShape(int64_t n, int64_t k) {
    MxWeightLayout l;
    l.n = n;
    l.k = k;
    l.nTiles = ceilDiv(n, kTile);
    l.kSteps = ceilDiv(k, kMxStepK);
    l.kWords = ceilDiv(l.kSteps, kMxStepsPerScaleWord);
    return l;
  }
  int64_t dataBytes() const { return nTiles * kSteps * kWaveSize * 16; }
  int64_t scaleBytes() const { return nTiles * kWords * kWaveSize * 4; }

  /// Index of lane's 16-byte chunk in `data` (units of 16 B).
  template <typename I> I dataChunk(I nTile, I kStep, I lane) const {
    return (nTile * kSteps + kStep) * kWaveSize + lane;
  }
  /// Index of lane's 32-bit word in `scales`.
  template <typename I> I scaleWord(I nTile, I kWord, I lane) const {
    return (nTile * kWords + kWord) * kWaveSize + lane;
  }
  /// Byte of the scale word (= MFMA op_sel scale index) for K step `kStep`.
  static int64_t scaleByte(int64_t kStep) {
    return kStep % kMxStepsPerScaleWord;
  }
};

/// First K element of the block lane supplies in step `kStep`.
template <typename I> I mxLaneK(I kStep, I lane) {
  return kStep * kMxStepK + operandKGroup(lane) * kMxLaneK;
}

/// gfx942: the bf16 16x16x16 MFMA `j` (0..7) of a step takes elements
/// [4j, 4j + 4) of each lane's 32-element run.
inline constexpr int64_t kBf16K16 = 16;
inline constexpr int64_t kBf16K16LaneK = 4;

//===----------------------------------------------------------------------===//
// Dense BF16 GEMM: y[M, N] = x[M, K] * W^T, W bf16 [N, K] row-major
//===----------------------------------------------------------------------===//

/// K per step: one 16x16x32 bf16 MFMA (gfx950) or two 16x16x16 (gfx942).
inline constexpr int64_t kBf16StepK = 32;
/// K elements per lane per step (16 bytes of bf16, one dwordx4 load).
inline constexpr int64_t kBf16LaneK = 8;

/// Element offset in W [N, K] of the 8 bf16 lane supplies in step kStep for
/// weight row `row`.
template <typename I> I bf16WeightOffset(I row, I kStep, I lane, int64_t k) {
  return row * k + kStep * kBf16StepK + operandKGroup(lane) * kBf16LaneK;
}

//===----------------------------------------------------------------------===//
// Tiling shared by both GEMMs
//===----------------------------------------------------------------------===//

/// A workgroup is one wave computing mTiles x nTiles MFMA tiles: rows
/// [16 * mTiles * blockY, +16 * mTiles), columns [16 * nTiles * blockX, ...).
struct GemmTiling {
  int64_t mTiles = 1;
  int64_t nTiles = 4;

  int64_t gridX(int64_t n) const { return ceilDiv(n, kTile * nTiles); }
  int64_t gridY(int64_t m) const { return ceilDiv(m, kTile * mTiles); }

  /// First output row of M tile `mt` in workgroup row `blockY`.
  template <typename I> I tileRow(I blockY, int64_t mt) const {
    return blockY * (kTile * mTiles) + mt * kTile;
  }
  /// Weight tile (16 rows) of N tile `nt` in workgroup column `blockX`.
  template <typename I> I tileCol(I blockX, int64_t nt) const {
    return blockX * nTiles + nt;
  }
};

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_MFMALAYOUT_H
