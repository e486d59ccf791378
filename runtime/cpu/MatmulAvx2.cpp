//===- MatmulAvx2.cpp - AVX2 + FMA matmul for CPUs without AVX-512 --------===//
//
// Compiled for baseline x86-64; the functions here carry target attributes
// and only run when cpuPath() is Avx2 (a CPU with AVX2, FMA and F16C but not
// AVX-512, or a forced lower path).
//
// The 16 lanes of Matmul.h's order live in two 8-float registers
// (Avx2Decode.h), so each lane sees the same fused multiply-adds in the same
// k order as on the AVX-512 and scalar paths and every output has the same
// bits.
//
// GEMV (up to kGemvMaxTokens tokens): each group of R rows streams its
// weight bytes once, decoding them in registers (R rows x T tokens of
// accumulators), with the rows two groups ahead prefetched into L2 as the
// AVX-512 GEMV does. More tokens take the tiled GEMM (MatmulAvx2Gemm.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include "runtime/cpu/Avx2Decode.h"

using namespace kiln;
using namespace kiln::cpu;
using namespace kiln::cpu::avx2;

namespace {

/// Rows [0, T) of `io` permuted within each 32-block to evens then odds
/// (MXFP4's lane pairing), into `out` [T, K].
void packPairs(const MatmulRows &io, int64_t T, int64_t K, float *out) {
  for (int64_t t = 0; t < T; ++t) {
    const float *x = io.xRow(t);
    float *o = out + t * K;
    for (int64_t k = 0; k < K; k += 32)
      for (int i = 0; i < 16; ++i) {
        o[k + i] = x[k + 2 * i];
        o[k + 16 + i] = x[k + 2 * i + 1];
      }
  }
}

/// Rows [n, n + R) for the T tokens whose (possibly packed) rows are `x`.
template <class Dec, int T, int R>
KILN_AVX2 void gemvRows(const Dec &dec, const float *const *x,
                        const MatmulRows &io, int64_t n) {
  const int64_t K = dec.w.cols;
  typename Dec::Row rows[R];
  for (int r = 0; r < R; ++r)
    rows[r] = dec.row(n + r);
  __m256 lo[R][T], hi[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      lo[r][t] = hi[r][t] = _mm256_setzero_ps();
  const char *prefetch =
      static_cast<const char *>(dec.rowBytes(n + kGemvPrefetchGroups * R));
  const int64_t prefetchStep = R * dec.bytesPer32();

  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    for (int64_t off = 0; off < prefetchStep; off += 64)
      _mm_prefetch(prefetch + off, _MM_HINT_T1);
    prefetch += prefetchStep;
    for (int r = 0; r < R; ++r) {
      __m256 w[4];
      rows[r].load32(k, w);
      for (int t = 0; t < T; ++t) {
        const float *xt = x[t] + k;
        lo[r][t] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xt), lo[r][t]);
        hi[r][t] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xt + 8), hi[r][t]);
        lo[r][t] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xt + 16), lo[r][t]);
        hi[r][t] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xt + 24), hi[r][t]);
      }
    }
  }
  // Past the last whole 32: whole 16s, then the rest zero-padded to 16
  // (Matmul.h: positions past K up to a multiple of 16 are x = w = 0).
  for (; k < K; k += 16) {
    const int64_t n16 = std::min<int64_t>(16, K - k);
    for (int r = 0; r < R; ++r) {
      alignas(32) float wt[16] = {};
      rows[r].tail(k, n16, wt);
      const __m256 w0 = _mm256_load_ps(wt), w1 = _mm256_load_ps(wt + 8);
      for (int t = 0; t < T; ++t) {
        alignas(32) float xt[16] = {};
        std::copy_n(x[t] + k, n16, xt);
        lo[r][t] = _mm256_fmadd_ps(w0, _mm256_load_ps(xt), lo[r][t]);
        hi[r][t] = _mm256_fmadd_ps(w1, _mm256_load_ps(xt + 8), hi[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      const float sum = treeSum(lo[r][t], hi[r][t]);
      float *out = io.yRow(t) + n + r;
      *out = io.accumulate ? *out + sum : sum;
    }
}

template <class Dec, int T, int R>
KILN_AVX2 void gemvRange(const Dec &dec, const float *const *x,
                         const MatmulRows &io, int64_t nBegin, int64_t nEnd) {
  int64_t n = nBegin;
  for (; n + R <= nEnd; n += R)
    gemvRows<Dec, T, R>(dec, x, io, n);
  for (; n < nEnd; ++n)
    gemvRows<Dec, T, 1>(dec, x, io, n);
}

template <class Dec>
KILN_AVX2 void gemv(const Dec &dec, const MatmulRows &io, int64_t nBegin,
                    int64_t nEnd) {
  const int64_t K = dec.w.cols;
  const int64_t T = io.tokens;
  float *packed = Dec::kPacked ? threadScratch(1, size_t(T * K)) : nullptr;
  const float *x[kGemvMaxTokens];
  if (packed)
    packPairs(io, T, K, packed);
  for (int64_t t = 0; t < T; ++t)
    x[t] = packed ? packed + t * K : io.xRow(t);
  switch (T) {
  case 1:
    return gemvRange<Dec, 1, 4>(dec, x, io, nBegin, nEnd);
  case 2:
    return gemvRange<Dec, 2, 2>(dec, x, io, nBegin, nEnd);
  case 3:
    return gemvRange<Dec, 3, 1>(dec, x, io, nBegin, nEnd);
  default:
    return gemvRange<Dec, 4, 1>(dec, x, io, nBegin, nEnd);
  }
}

} // namespace

void kiln::cpu::matmulRowsAvx2(const MatmulRows &io, const WeightView &w,
                               int64_t nBegin, int64_t nEnd) {
  if (io.tokens > kGemvMaxTokens)
    return matmulRowsAvx2Gemm(io, w, nBegin, nEnd);
  rows::withDecoder<Decoders>(
      w, [&](const auto &dec) { gemv(dec, io, nBegin, nEnd); });
}

#else // not x86: never selected, kept for linking.

void kiln::cpu::matmulRowsAvx2(const MatmulRows &io, const WeightView &w,
                               int64_t nBegin, int64_t nEnd) {
  matmulRowsScalar(io, w, nBegin, nEnd);
}

#endif
