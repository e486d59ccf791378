//===- MemoryBandwidth.h - The machine's memory bandwidth floors -*- C++
//-*-===//
//
// Two probes over 1 GiB buffers, run on the same ThreadPool the kernels use:
// read bandwidth (every byte loaded once, summed so nothing is optimized
// away), the floor a decode step that streams its weights can reach; and the
// STREAM copy figure (2 x bytes copied per second). Best of five passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_BENCH_MEMORYBANDWIDTH_H
#define KILN_TOOLS_KILN_BENCH_MEMORYBANDWIDTH_H

#include "runtime/cpu/ThreadPool.h"

namespace kiln::bench {

struct Bandwidth {
  double readGBs = 0;
  double copyGBs = 0;
};

Bandwidth measureBandwidth(cpu::ThreadPool &pool);

} // namespace kiln::bench

#endif // KILN_TOOLS_KILN_BENCH_MEMORYBANDWIDTH_H
