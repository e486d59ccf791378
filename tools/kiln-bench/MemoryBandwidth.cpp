//===- MemoryBandwidth.cpp ------------------------------------------------===//

#include "tools/kiln-bench/MemoryBandwidth.h"

#include "runtime/cpu/CpuFeatures.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace kiln;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Sums [p, p + bytes) as 64-bit words, one cache line per iteration.
uint64_t sumScalar(const uint64_t *p, size_t bytes) {
  uint64_t a[8] = {};
  for (size_t i = 0; i < bytes / 8; i += 8)
    for (int j = 0; j < 8; ++j)
      a[j] += p[i + j];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t sumAvx512(const uint64_t *p,
                                                      size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < bytes / 8; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
  }
  return uint64_t(_mm512_reduce_add_epi64(
      _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3))));
}
#endif

uint64_t sumBytes(const uint64_t *p, size_t bytes) {
#if defined(__x86_64__)
  if (cpu::cpuHasAvx512())
    return sumAvx512(p, bytes);
#endif
  return sumScalar(p, bytes);
}

struct AlignedDelete {
  void operator()(uint64_t *p) const {
    ::operator delete[](p, std::align_val_t(4096));
  }
};
using Buffer = std::unique_ptr<uint64_t[], AlignedDelete>;

Buffer allocate(size_t bytes) {
  return Buffer(
      static_cast<uint64_t *>(::operator new[](bytes, std::align_val_t(4096))));
}

template <typename Pass> double best(const Pass &pass, double bytesMoved) {
  pass(); // warm: page tables, caches, the pool's threads
  double bestRate = 0;
  for (int r = 0; r < 5; ++r) {
    double t0 = now();
    pass();
    bestRate = std::max(bestRate, bytesMoved / (now() - t0));
  }
  return bestRate / 1e9;
}

} // namespace

bench::Bandwidth bench::measureBandwidth(cpu::ThreadPool &pool) {
  const size_t bytes = size_t(1) << 30;
  const int64_t chunk = int64_t(1) << 20; // multiple of 256 bytes
  Buffer src = allocate(bytes), dst = allocate(bytes);
  std::memset(src.get(), 1, bytes); // fault in
  std::memset(dst.get(), 0, bytes);
  char *s = reinterpret_cast<char *>(src.get());
  char *d = reinterpret_cast<char *>(dst.get());

  Bandwidth out;
  std::vector<uint64_t> sums(size_t(pool.size()));
  out.readGBs = best(
      [&] {
        pool.parallelFor(
            int64_t(bytes),
            [&](int64_t b, int64_t e, int w) {
              sums[size_t(w)] += sumBytes(
                  reinterpret_cast<const uint64_t *>(s + b), size_t(e - b));
            },
            chunk);
      },
      double(bytes));
  out.copyGBs = best(
      [&] {
        pool.parallelFor(
            int64_t(bytes),
            [&](int64_t b, int64_t e, int) {
              std::memcpy(d + b, s + b, size_t(e - b));
            },
            chunk);
      },
      2.0 * double(bytes));
  // Keep the sums observable so the reads are not removed.
  static volatile uint64_t sink;
  for (uint64_t v : sums)
    sink = sink + v;
  return out;
}
