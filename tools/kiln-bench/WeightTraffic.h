//===- WeightTraffic.h - Weight bytes a plan reads per step -----*- C++ -*-===//
//
// The memory-bound floor of decode: bytes of weights one step of a plan
// touches for a batch of B sequences, from the artifact alone. Dense kernels
// read their whole weight; an embedding reads B rows; a fused MoE reads its
// router and shared expert plus, per routed-expert stack, the expected
// number of distinct experts B tokens select: E * (1 - (1 - k/E)^B) (exactly
// k for B = 1).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H
#define KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H

#include "runtime/artifact/Artifact.h"

namespace kiln::bench {

double planWeightBytes(const artifact::Artifact &artifact, const fb::Plan &plan,
                       int64_t batch);

} // namespace kiln::bench

#endif // KILN_TOOLS_KILN_BENCH_WEIGHTTRAFFIC_H
