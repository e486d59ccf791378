//===- ComputePeak.h - The machine's FP32 multiply-add peak -----*- C++ -*-===//
//
// The compute ceiling prefill is held against: FP32 multiply-adds per second
// on the kernel path the matmuls take (cpuPath(): AVX-512 FMAs on 16 lanes, or
// the scalar path's multiply-adds as the compiler builds them for baseline
// x86-64), on every thread of the pool the kernels use. Register-only loops
// with 12 independent accumulators, enough to hide the FMA latency. Best of
// five passes. Reported as GFLOP/s, a multiply-add counting two.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_BENCH_COMPUTEPEAK_H
#define KILN_TOOLS_KILN_BENCH_COMPUTEPEAK_H

#include "runtime/cpu/ThreadPool.h"

namespace kiln::bench {

double measureFmaPeakGflops(cpu::ThreadPool &pool);

/// The int8 multiply-add peak of the int8 MXFP4 path (docs/cpu.md): AVX-512
/// VNNI vpdpbusd chains, a multiply-add counting two operations. 0 where
/// that path does not run (no VNNI, or a forced lower path).
double measureInt8PeakGops(cpu::ThreadPool &pool);

/// The BF16 multiply-add peak of the BF16-activation path (docs/cpu.md):
/// AVX-512 BF16 vdpbf16ps chains, a multiply-add counting two operations.
/// 0 where that path does not run (no AVX-512 BF16, or a forced lower path).
double measureBf16PeakGflops(cpu::ThreadPool &pool);

} // namespace kiln::bench

#endif // KILN_TOOLS_KILN_BENCH_COMPUTEPEAK_H
