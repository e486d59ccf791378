//===- ProgramSpec.h - A module's plans, read for the artifact --*- C++ -*-===//
//
// What the artifact writer needs from the IR, read from the kiln_plan level
// (dialects/plan): the weights to stream, the caches, and each plan's
// buffers and kernel dispatches (support/abi/Kernels.td), naming weights,
// caches and buffers by index. buildPrograms gets there from a fused module
// by running the plan passes (passes/Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_PROGRAMSPEC_H
#define KILN_PASSES_EMIT_PROGRAMSPEC_H

#include "support/Status.h"
#include "support/abi/KernelAbi.h"
#include "support/abi/Program.h"
#include "support/abi/Signature.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::emit {

/// How an artifact weight is produced from the checkpoint.
enum class WeightKind {
  Dense,        // a float tensor copied (rank-1 ones upcast to f32), or
                // an FP8 / Quark MXFP4 source with scaleName dequantized
  Fp8Block,     // F8_E4M3 values + F32 128x128 block scales, copied
  Mxfp4Raw,     // Quark MXFP4: packed values + E8M0 scales, copied
  Mxfp4Quant,   // quantized by Kiln from a float (or FP8) source tensor
  Mxfp4Dequant, // Mxfp4Quant, stored as F32 values x their block scales
};

enum class ElemType { F32, BF16, F16, F8E4M3, F4E2M1, E8M0 };

struct WeightSpec {
  WeightKind kind = WeightKind::Dense;
  std::string name;                // checkpoint tensor name; `{e}` for stacks
  std::string scaleName;           // Fp8Block / Mxfp4Raw scales; Mxfp4Quant and
                                   // Mxfp4Dequant: the FP8 source's block
                                   // scales, if any; Dense: the scales of the
                                   // FP8 or MXFP4 source it dequantizes
  std::vector<int64_t> shape;      // logical, [E,] N, K
  ElemType dtype = ElemType::BF16; // stored element type of the values
  bool evenRule = true;            // Mxfp4Quant/Mxfp4Dequant scale rule
  int64_t experts = 0;             // > 0 for `{e}` stacks
  int64_t firstExpert = 0;         // the stack holds experts from this one
  int64_t sliceAxis = -1;          // 0 rows, 1 columns of each matrix: the
  int64_t sliceFirst = 0;          // source's [first, first + shape[axis])
  /// Store a BF16 or MXFP4 matrix in the CPU matmul's row panels
  /// (DensePanel4, Mxfp4Panel4) where its shape allows: set for weights
  /// that only `MatWeight` arguments read.
  bool panels = false;
  /// GPU targets: where an MXFP4 weight's copy in the GPU matmul layout
  /// (fb::WeightLayout::Mxfp4Gpu) goes. None: no GPU matmul reads it (or
  /// no GPU target). Beside: next to the checkpoint layout, which the CPU
  /// or another GPU kernel reads. Instead: the only copy (a GPU-only
  /// artifact whose every reader of it is a GPU matmul).
  enum class GpuCopy { None, Beside, Instead };
  GpuCopy gpuCopy = GpuCopy::None;
};

// The plan level's structs, shared with the runtime's tests (one
// declaration, support/abi/Program.h).
using abi::BufferSpec;
using abi::CacheSpec;
using abi::DispatchSpec;
using abi::PlanSpec;
using ArgKind = abi::RefKind;
using ArgSpec = abi::ArgRef;

/// Everything the artifact needs from the IR.
struct ProgramSpec {
  std::vector<WeightSpec> weights;
  std::vector<CacheSpec> caches;
  std::vector<PlanSpec> plans;
  /// Kernels compiled into the x86-64 code object (the module's
  /// kiln_plan.host_kernels).
  std::vector<std::string> hostKernels;
};

/// The program of a module at the kiln_plan level (the final translation's
/// input): weights, caches and plans in the order of their ops.
Result<ProgramSpec> readPrograms(mlir::ModuleOp module);

/// Runs kiln-build-plan, kiln-reuse-buffers, with `hostKernels`
/// kiln-select-host-kernels and, when `gpuTargets` (kiln-compile's
/// --target list) names a GPU, kiln-lower-gpu-launches on a fused module
/// (which they rewrite) and reads the result. Errors name the op and its
/// location. `decodeAttention`, `fp8Gemm`: kiln-lower-gpu-launches'
/// options.
Result<ProgramSpec> buildPrograms(mlir::ModuleOp module,
                                  bool hostKernels = false,
                                  const std::string &gpuTargets = "",
                                  const std::string &decodeAttention = "vector",
                                  const std::string &fp8Gemm = "bf16");

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_PROGRAMSPEC_H
