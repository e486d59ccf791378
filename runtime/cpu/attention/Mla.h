//===- Mla.h - Multi-head latent attention (GLM-5.x) ------------*- C++ -*-===//
//
// GLM.md section 3.4. The cache holds one latent row per token,
// [c_kv (L) | k_pe (Dr)], after kv_a_layernorm and RoPE. mlaAttention uses
// the absorbed form: per head, q_abs = W_UK^T q_nope (an L-vector), scores
// (q_abs . c_kv + q_pe . k_pe) * scale, an FP32 softmax, o_lat = sum p c_kv,
// out = W_UV o_lat. mlaAttentionReference decompresses k_nope and v per key
// instead and is what the absorbed kernel is tested against.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_MLA_H
#define KILN_RUNTIME_CPU_ATTENTION_MLA_H

#include "runtime/cpu/ThreadPool.h"
#include "runtime/cpu/Types.h"
#include "runtime/cpu/attention/Workspace.h"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

struct MlaDims {
  int64_t heads = 0;     // H (GLM-5: 64)
  int64_t nopeDim = 0;   // Dn, qk_nope_head_dim (192)
  int64_t ropeDim = 0;   // Dr, qk_rope_head_dim (64)
  int64_t valueDim = 0;  // Dv, v_head_dim (256)
  int64_t latentDim = 0; // L, kv_lora_rank (512)
};

struct MlaArgs {
  MlaDims dims;
  int64_t tokens = 0;                 // T; tokens may mix sequences
  const int32_t *seqIds = nullptr;    // [T]
  const int32_t *positions = nullptr; // [T]; rows 0..positions[t] cached
  const float *qNope = nullptr;       // [T, H, Dn]
  const float *qPe = nullptr;         // [T, H, Dr], RoPE applied
  /// kv_b_proj [H * (Dn + Dv), L], any WeightFormat: for head h, rows
  /// [h(Dn+Dv), +Dn) are W_UK_h [Dn, L] and the next Dv rows W_UV_h [Dv, L].
  WeightView kvB;
  KvView latent; // width L + Dr: [c_kv | k_pe]
  /// Optional DSA selection [T, topkWidth]: attend only these key positions
  /// (each <= positions[t]; -1 = unused slot). Null: all keys 0..pos.
  const int32_t *topk = nullptr;
  int64_t topkWidth = 0;
  float scale = 1.0f; // (Dn + Dr)^-0.5 for GLM-5
};

/// Workspace mlaAttention needs for `tokens` tokens on `threads` threads.
size_t mlaWorkspaceBytes(const MlaDims &dims, int64_t tokens, int threads);

/// out [T, H, Dv]. A token with no key to attend gets zeros. Results do not
/// depend on pool.size().
void mlaAttention(ThreadPool &pool, const MlaArgs &args, float *out,
                  Workspace &workspace);

/// Unabsorbed reference: per key k_nope = W_UK c_kv and v = W_UV c_kv, then
/// plain softmax attention, accumulated in double. Single-threaded and slow;
/// for tests.
void mlaAttentionReference(const MlaArgs &args, float *out);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_MLA_H
