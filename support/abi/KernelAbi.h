//===- KernelAbi.h - The contract between plans and kernels ----*- C++ -*-===//
//
// Every kernel a plan can dispatch, with its arguments in order. The
// compiler writes dispatches by this table (passes/emit/PlanBuilder.cpp);
// the runtime checks every dispatch against it once at load and then runs
// it without further checks. Header-only, no LLVM.
//
// Argument kinds: B = activation buffer, W = weight, C = cache, B? / W? =
// optional (ArgKind None when absent). Activations are f32 unless noted;
// ids, positions and indices are i32.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_KERNELABI_H
#define KILN_SUPPORT_ABI_KERNELABI_H

#include <cstdint>
#include <string_view>

namespace kiln::abi {

enum class Kernel : uint8_t {
  Embedding,    // B ids, W table, B out
  RmsNorm,      // B x, W weight(f32 [D]), B out           floats: eps
  LayerNorm,    // B x, W weight, W bias, B out             floats: eps
  Matmul,       // B x, W weight(any layout), B out        (y = x W^T)
  Rope,         // B x, B positions, B out                  ints: style
                //   (0 interleaved, 1 neox), offset, rotary_dim, heads
                //   floats: theta
  Sigmoid,      // B x, B out
  Silu,         // B x, B out
  Relu,         // B x, B out
  Add,          // B|W lhs, B|W rhs, B out  (rhs may be 1-D: broadcast)
  Mul,          // B|W lhs, B|W rhs, B out
  Scale,        // B x, B out                               floats: factor
  Softmax,      // B x, B out
  Normalize,    // B x, B out                               floats: eps
  TopK,         // B x, B values, B indices                 ints: k
  GroupLimit,   // B x, B out                               ints: n_group,
                //                                            topk_group
  Gather,       // B x, B indices, B out
  Argmax,       // B x, B out(i32)
  Split,        // B x, B out... (>= 1)                     ints: axis,
                //   outer (product of the row dims before the axis)
  Concat,       // B in... (>= 1), B out                    ints: axis, outer
  TakeRows,     // B x, B rows, B out
  KvAppend,     // C cache, B seq, B pos, B values
  MlaAttention, // B q_nope, B q_pe, W kv_b, C latent, B seq, B pos,
                //   B? top_k, B out                         floats: scale
                //   ints: heads
  IndexerTopK,  // B q, B weights, C keys, B seq, B pos, B out(i32)
                //   ints: k, heads                          floats: scale
  GqaAttention, // B q, C k, C v, B seq, B pos, B out
                //   ints: q_heads                           floats: scale
  Moe,          // B x, W router, W bias, W gate, W up, W down,
                //   W? shared_gate, W? shared_up, W? shared_down, B out
                //   ints: top_k, n_group, topk_group, norm_topk_prob,
                //         block_size                        floats: scale
  Count,
};

/// Names as stored in the artifact's kernel table.
inline constexpr std::string_view kKernelNames[] = {
    "embedding", "rms_norm",      "layer_norm",    "matmul",
    "rope",      "sigmoid",       "silu",          "relu",
    "add",       "mul",           "scale",         "softmax",
    "normalize", "top_k",         "group_limit",   "gather",
    "argmax",    "split",         "concat",        "take_rows",
    "kv_append", "mla_attention", "indexer_top_k", "gqa_attention",
    "moe",
};
static_assert(sizeof(kKernelNames) / sizeof(kKernelNames[0]) ==
                  size_t(Kernel::Count),
              "one name per kernel");

inline bool kernelFromName(std::string_view name, Kernel &out) {
  for (size_t i = 0; i < size_t(Kernel::Count); ++i)
    if (kKernelNames[i] == name) {
      out = Kernel(i);
      return true;
    }
  return false;
}

/// Plan input and output positions (Plan.inputs / Plan.outputs).
enum PlanInput : uint32_t {
  kInputTokenIds = 0,
  kInputSeqIds = 1,
  kInputPositions = 2,
  kInputLogitRows = 3,
  kInputHidden = 4, // draft plan only
};
enum PlanOutput : uint32_t { kOutputLogits = 0, kOutputHidden = 1 };

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_KERNELABI_H
