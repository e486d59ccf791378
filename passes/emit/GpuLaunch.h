//===- GpuLaunch.h - How one plan dispatch runs on a GPU -----------------===//
//
// A dispatch of a plan (Kernels.td) runs on a GPU as one or more kernel
// launches. The compiler decides them here, once per dispatch shape
// (kiln-lower-gpu-launches records them in the plan IR), and writes them
// into the artifact's KernelSymbol.launches; the runtime's HIP
// plan device (runtime/hip/HipPlanDevice) then only binds pointers and
// evaluates grids. Conventions every GPU kernel follows:
//
//  * Rows. A dispatch's row count R is the row count of its first Buffer
//    argument (tokens T for most kernels, selected rows for the logits).
//  * Grid. Each axis is ceil((R * mul + add) / div) workgroups; a launch
//    whose grid has a zero axis is skipped (R = 0).
//  * Arguments. Each kernel argument is a GpuArgRef: a dispatch argument's
//    device data (an activation buffer; a weight's values, f32 for 1-D
//    weights, the GPU layout for matrices; a cache), a weight's scales, a
//    scratch buffer of this dispatch, or an i32 scalar (R, or the cache
//    capacity in positions).
//  * Caches on the device are [slots, capacity, width] (f32 or bf16, as the
//    Cache table says); the runner writes slot numbers, not sequence ids,
//    into the seq_ids input before a plan runs.
//  * Scratch buffers are per dispatch, sized by GpuScratchSpec, and hold
//    nothing between launches of different dispatches (contents undefined
//    at the first launch: a kernel that accumulates must clear first).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_GPULAUNCH_H
#define KILN_PASSES_EMIT_GPULAUNCH_H

#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/emit/ProgramSpec.h"
#include "passes/emit/WeightStreamer.h"
#include "runtime/artifact/kiln_artifact_generated.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace kiln::emit {

/// A GPU kernel argument: the artifact's GpuArg (kiln_artifact.fbs documents
/// the parts; RawData of an MXFP4 weight is the checkpoint layout, row-major
/// [.., N, K/2], and RawScales [.., N, K/32] E8M0).
struct GpuArgRef {
  using Part = fb::GpuArgPart;
  Part part = Part::Data;
  uint32_t index = 0;
  fb::GpuArg toArtifact() const { return fb::GpuArg(part, index); }
};

/// Convenience constructors for the lowering functions.
inline GpuArgRef argData(uint32_t i) { return {GpuArgRef::Part::Data, i}; }
inline GpuArgRef argScales(uint32_t i) { return {GpuArgRef::Part::Scales, i}; }
inline GpuArgRef argScratch(uint32_t i) {
  return {GpuArgRef::Part::Scratch, i};
}
inline GpuArgRef argRows() { return {GpuArgRef::Part::Rows, 0}; }
inline GpuArgRef argCacheCapacity() {
  return {GpuArgRef::Part::CacheCapacity, 0};
}
/// The paged addressing every cache kernel ends its arguments with
/// (passes/codegen/rocdl/AttentionKernels.cpp): capacity, page table, page
/// rows.
inline void appendPaging(std::vector<GpuArgRef> &args) {
  args.push_back(argCacheCapacity());
  args.push_back({GpuArgRef::Part::PageTable, 0});
  args.push_back({GpuArgRef::Part::PageRows, 0});
}
inline GpuArgRef argRawData(uint32_t i) {
  return {GpuArgRef::Part::RawData, i};
}
inline GpuArgRef argRawScales(uint32_t i) {
  return {GpuArgRef::Part::RawScales, i};
}
inline GpuArgRef argRowsOf(uint32_t i) { return {GpuArgRef::Part::RowsOf, i}; }

/// One grid axis: ceil((R * mul + add) / div), R the dispatch's rows or,
/// when rowsOf >= 0, the row count of dispatch argument `rowsOf`.
struct GpuGridAxis {
  int64_t mul = 0, add = 1, div = 1;
  int32_t rowsOf = -1;
  int64_t evaluate(int64_t rows) const {
    return (rows * mul + add + div - 1) / div;
  }
};
inline GpuGridAxis gridFixed(int64_t n) { return {0, n, 1}; }
inline GpuGridAxis gridPerRow(int64_t perRow = 1) { return {perRow, 0, 1}; }

struct GpuLaunchSpec {
  rocdl::KernelSpec spec; // chip set by the code-object builder
  std::array<GpuGridAxis, 3> grid = {gridFixed(1), gridFixed(1), gridFixed(1)};
  std::vector<GpuArgRef> args;
};

/// perRow * R + perPosition * R * capacity + fixed bytes (capacity: the
/// cache positions per slot, known at run time).
struct GpuScratchSpec {
  int64_t perRow = 0, fixed = 0, perPosition = 0;
};

/// How a dispatch runs on a GPU.
struct GpuDispatchLowering {
  std::vector<GpuLaunchSpec> launches;
  std::vector<GpuScratchSpec> scratch;
  /// The device communicator runs the whole dispatch, with no launch
  /// (all_gather_rows: RCCL's all-gather-v, runtime/hip/HipCollectives.cpp).
  bool communicatorOnly = false;
  /// Chip-independent identity of the whole sequence (kernel symbols
  /// without their chip, grids, arguments, scratch).
  std::string key() const;
};

/// What a lowering function sees of one dispatch.
struct GpuDispatchContext {
  const PlanSpec &plan;
  const DispatchSpec &dispatch;
  const ProgramSpec &program;
  /// Each program weight's form (storedForm).
  const std::vector<StoredForm> &weights;
  /// MLA attention of decode plans on the matrix units (16 heads a
  /// workgroup) where its shape allows; kiln-lower-gpu-launches
  /// decode-attention=mfma.
  bool mfmaDecodeAttention = false;
  /// GEMMs over Fp8Block128 weights on the FP8 MFMAs with FP8 activations
  /// (the kernels' qa = 1); kiln-lower-gpu-launches fp8-gemm=fp8.
  bool fp8Activations = false;

  size_t argCount() const { return dispatch.args.size(); }
  bool isBuffer(size_t i) const;
  bool isWeight(size_t i) const;
  bool isCache(size_t i) const;
  bool isNone(size_t i) const;
  const BufferSpec &buffer(size_t i) const;
  int64_t bufferElems(size_t i) const { return buffer(i).rowElems(); }
  const WeightSpec &weight(size_t i) const;
  const StoredForm &stored(size_t i) const;
  const CacheSpec &cache(size_t i) const;
};

// Per family; nullopt when the dispatch's shape has no GPU kernel. Basic:
// matmul (2-D MXFP4 or BF16 weight), rms_norm, rope, argmax
// (GpuLowerBasic.cpp); the others in GpuLower{Data,Moe,Attention}.cpp.
std::optional<GpuDispatchLowering>
lowerBasicDispatch(const GpuDispatchContext &);
std::optional<GpuDispatchLowering>
lowerDataDispatch(const GpuDispatchContext &);
std::optional<GpuDispatchLowering> lowerMoeDispatch(const GpuDispatchContext &);
std::optional<GpuDispatchLowering>
lowerAttentionDispatch(const GpuDispatchContext &);

/// The fp8_gemm with the tiling of `bf16Gemm` (a Bf16Gemm spec whose tiling
/// is chosen): one wave per workgroup, 128 VGPRs (GpuLowerData.cpp); with
/// `fp8Activations` the native FP8 recipe (qa = 1).
rocdl::Fp8GemmParams fp8GemmParams(const rocdl::KernelSpec &bf16Gemm,
                                   bool fp8Activations);

/// All of them: the lowering of any dispatch, or nullopt.
std::optional<GpuDispatchLowering>
lowerGpuDispatch(const GpuDispatchContext &context);

/// The lowerings kiln-lower-gpu-launches recorded (LowerGpuLaunches.cpp),
/// per plan and dispatch in the order of the ops; nullopt for a dispatch
/// without launches. An error names a launch whose kernel symbol does not
/// parse or validate.
Result<std::vector<std::vector<std::optional<GpuDispatchLowering>>>>
readGpuLaunches(mlir::ModuleOp module);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_GPULAUNCH_H
