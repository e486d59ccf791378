//===- WeightTraffic.h - Weight bytes a plan reads per step -----*- C++ -*-===//
//
// The memory-bound floor of decode: bytes of weights one step of a plan
// touches for a batch of B sequences, from the artifact alone. Dense kernels
// read their whole weight; an embedding reads B rows; a fused MoE reads its
// router and shared expert plus, per routed-expert stack, the expected
// number of distinct experts B tokens select: E * (1 - (1 - k/E)^B) (exactly
// k for B = 1). The same walk counts a token's matmul FLOPs, for prefill's
// fraction of the compute peak.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H
#define KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H

#include "runtime/artifact/Artifact.h"

namespace kiln::bench {

double planWeightBytes(const artifact::Artifact &artifact, const fb::Plan &plan,
                       int64_t batch);

/// FLOPs of one token's matmuls in `plan` (2 per multiply-add with a weight
/// element: dense matrices, the MoE's router, shared expert and its top-k
/// routed experts, MLA's kv_b). Attention over the context is not counted;
/// the output head is, for every token, though a plan may compute logits
/// for its last rows only (under 1% of mid's matmul FLOPs, about 2% of
/// GLM-5.2's).
double planMatmulFlopsPerToken(const artifact::Artifact &artifact,
                               const fb::Plan &plan);

} // namespace kiln::bench

#endif // KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H
