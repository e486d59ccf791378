//===- Rope.h - Rotary position embedding, in place -------------*- C++ -*-===//
//
// GLM.md section 3.6. GLM-5.x rotates q_pe/k_pe and the indexer's first 64
// dims interleaved (GPT-J pairs); GLM-4.x rotates dims 0-63 NeoX style.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_ROPE_H
#define KILN_RUNTIME_CPU_ATTENTION_ROPE_H

#include <cstdint>

namespace kiln::cpu {

enum class RopeStyle : uint8_t {
  Interleaved, // pairs (2i, 2i+1)
  Neox,        // pairs (i, i + rotaryDim/2), "rotate half"
};

/// Rotates dims [offset, offset + rotaryDim) of every head of `x`
/// [tokens, heads, dim] in place; the other dims pass through. Pair i of
/// token t turns by positions[t] * theta^(-2i / rotaryDim). Angles, cosines
/// and sines are computed in double so that long positions stay accurate.
/// rotaryDim must be even.
void rope(float *x, int64_t tokens, int64_t heads, int64_t dim,
          const int32_t *positions, RopeStyle style, float theta,
          int64_t offset, int64_t rotaryDim);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_ROPE_H
