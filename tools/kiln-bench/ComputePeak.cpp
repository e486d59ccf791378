//===- ComputePeak.cpp ----------------------------------------------------===//

#include "tools/kiln-bench/ComputePeak.h"

#include "runtime/cpu/CpuFeatures.h"

#include <algorithm>
#include <chrono>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace kiln;

namespace {

constexpr int kChains = 12;
constexpr int64_t kIterations = 20'000'000;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// kIterations x kChains multiply-adds on 16 lanes, as the scalar path's
/// code is built (no FMA on baseline x86-64: a multiply and an add).
/// Returns flops done and a value that depends on every chain.
double chainsScalar(float &sink) {
  typedef float F16x __attribute__((vector_size(64), aligned(4)));
  F16x a[kChains];
  for (int j = 0; j < kChains; ++j)
    for (int l = 0; l < 16; ++l)
      a[j][l] = float(j + l) * 1e-3f;
  const F16x m = F16x{} + 0.999999f, c = F16x{} + 1e-7f;
  for (int64_t i = 0; i < kIterations; ++i)
    for (int j = 0; j < kChains; ++j)
      a[j] = a[j] * m + c;
  for (int j = 0; j < kChains; ++j)
    sink += a[j][0] + a[j][15];
  return 2.0 * 16 * kChains * double(kIterations);
}

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"))) double chainsAvx512(float &sink) {
  __m512 a[kChains];
  for (int j = 0; j < kChains; ++j)
    a[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i)
    for (int j = 0; j < kChains; ++j)
      a[j] = _mm512_fmadd_ps(a[j], m, c);
  for (int j = 0; j < kChains; ++j)
    sink += _mm512_reduce_add_ps(a[j]);
  return 2.0 * 16 * kChains * double(kIterations);
}
/// The AVX2 path's FMAs: 8 lanes a register.
__attribute__((target("avx2,fma"))) double chainsAvx2(float &sink) {
  __m256 a[kChains];
  for (int j = 0; j < kChains; ++j)
    a[j] = _mm256_set1_ps(float(j) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i)
    for (int j = 0; j < kChains; ++j)
      a[j] = _mm256_fmadd_ps(a[j], m, c);
  for (int j = 0; j < kChains; ++j) {
    alignas(32) float v[8];
    _mm256_store_ps(v, a[j]);
    sink += v[0] + v[7];
  }
  return 2.0 * 8 * kChains * double(kIterations);
}
/// kIterations x kChains vpdpbusd on 64 byte pairs each: int8 multiply-
/// adds, two operations each, as the int8 MXFP4 path issues them.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double
chainsVnni(float &sink) {
  __m512i a[kChains];
  for (int j = 0; j < kChains; ++j)
    a[j] = _mm512_set1_epi32(j);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < kIterations; ++i)
    for (int j = 0; j < kChains; ++j)
      a[j] = _mm512_dpbusd_epi32(a[j], u, s);
  for (int j = 0; j < kChains; ++j)
    sink += float(_mm512_reduce_add_epi32(a[j]));
  return 2.0 * 64 * kChains * double(kIterations);
}
/// kIterations x kChains vdpbf16ps on 32 BF16 pairs each: BF16 multiply-
/// adds, two operations each, as the BF16-activation path issues them.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) double
chainsBf16(float &sink) {
  __m512 a[kChains];
  for (int j = 0; j < kChains; ++j)
    a[j] = _mm512_set1_ps(float(j) * 1e-3f);
  const __m512bh u = (__m512bh)_mm512_set1_epi16(0x3F80), // 1.0
      v = (__m512bh)_mm512_set1_epi16(0x3380);            // 2^-24
  for (int64_t i = 0; i < kIterations; ++i)
    for (int j = 0; j < kChains; ++j)
      a[j] = _mm512_dpbf16_ps(a[j], u, v);
  for (int j = 0; j < kChains; ++j)
    sink += _mm512_reduce_add_ps(a[j]);
  return 2.0 * 32 * kChains * double(kIterations);
}
#endif

double chains(float &sink) {
#if defined(__x86_64__)
  if (cpu::useAvx512())
    return chainsAvx512(sink);
  if (cpu::useAvx2())
    return chainsAvx2(sink);
#endif
  return chainsScalar(sink);
}

/// Best rate over five timed passes (after one warm-up) of `run` on every
/// thread of the pool, in G operations per second.
template <class Chains> double measurePeak(cpu::ThreadPool &pool, Chains run) {
  const int threads = pool.size();
  std::vector<float> sinks(size_t(threads), 0.0f);
  std::vector<double> flops(size_t(threads), 0.0);
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) { // the first warms up
    std::fill(flops.begin(), flops.end(), 0.0);
    const double t0 = now();
    pool.parallelFor(
        threads,
        [&](int64_t b, int64_t e, int w) {
          for (int64_t i = b; i < e; ++i)
            flops[size_t(w)] += run(sinks[size_t(w)]);
        },
        1);
    const double dt = now() - t0;
    double total = 0;
    for (double f : flops)
      total += f;
    if (pass > 0)
      best = std::max(best, total / dt / 1e9);
  }
  static volatile float keep;
  for (float s : sinks)
    keep = keep + s;
  return best;
}

} // namespace

double bench::measureFmaPeakGflops(cpu::ThreadPool &pool) {
  return measurePeak(pool, chains);
}

double bench::measureInt8PeakGops(cpu::ThreadPool &pool) {
#if defined(__x86_64__)
  if (cpu::useAvx512Vnni())
    return measurePeak(pool, chainsVnni);
#endif
  (void)pool;
  return 0;
}

double bench::measureBf16PeakGflops(cpu::ThreadPool &pool) {
#if defined(__x86_64__)
  if (cpu::useAvx512Bf16())
    return measurePeak(pool, chainsBf16);
#endif
  (void)pool;
  return 0;
}
