//===- MatmulBf16Avx512.cpp - BF16 dot products with vdpbf16ps ------------===//
//
// The order of MatmulBf16.h with AVX-512 BF16: one vdpbf16ps adds 32
// products (16 lanes of pairs) from one 64-byte load of weights as stored,
// so nothing is decoded. Compiled for baseline x86-64 with target
// attributes; runs only when useAvx512Bf16() says so.
//
// GEMV (few tokens): R rows x T tokens of accumulators in registers, each
// weight row read once. GEMM (more tokens): per block of kTokenBlock
// tokens (their rounded rows stay in L2), each group of kRows rows (one row
// panel, its bytes in L1) is swept by a kTokens x kRows register kernel
// over the whole of K, so the lanes never leave the registers.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulBf16.h"
#include "runtime/cpu/MatmulKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include "runtime/cpu/Avx512Bf16.h"
#include "runtime/cpu/Avx512Decode.h"
#include "support/WeightPanels.h"

#include <algorithm>

using namespace kiln::cpu;

namespace {

constexpr int64_t kTokenBlock = 64;         // tokens whose rows stay in L2
constexpr int kTokens = 4;                  // GEMM register block: tokens
constexpr int kRows = 4;                    // ... and weight rows (one panel)
constexpr int64_t kPrefetchMaxBytes = 8192; // see gemm()

/// Where the 32-value chunks of weight rows are: chunk j of row n at
/// row(n) + j * step (rows one after another, or row panels).
struct Bf16Weights {
  const uint16_t *data;
  int64_t K, panelRows, step, fullChunks;
  __mmask32 tail; // lanes of the last, partial chunk (0: none)

  explicit Bf16Weights(const WeightView &w)
      : data(static_cast<const uint16_t *>(w.data)), K(w.cols),
        panelRows(w.panelRows), step(32 * w.panelRows), fullChunks(w.cols / 32),
        tail(w.cols % 32 ? __mmask32((1u << (w.cols % 32)) - 1) : 0) {}
  const uint16_t *row(int64_t n) const {
    return data + kiln::panelOffset(n, 0, K, panelRows);
  }
};

KILN_AVX512_BF16_INLINE __m512 dot(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
}

KILN_AVX512_BF16_INLINE void store(const MatmulRows &io, int64_t t, int64_t n,
                                   __m512 acc) {
  const float sum = avx512::treeSum(acc);
  float *out = io.yRow(t) + n;
  *out = io.accumulate ? *out + sum : sum;
}

/// acc[t][r] over all of K for tokens x[0..T) and rows w[0..R). With
/// `prefetch`, asks for R cache lines from there on per chunk, into L2.
template <int T, int R>
KILN_AVX512_BF16_INLINE void
sweep(const Bf16Weights &wt, const uint16_t *const *x, const uint16_t *const *w,
      __m512 (&acc)[T][R], const char *prefetch = nullptr) {
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r)
      acc[t][r] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < wt.fullChunks; ++j) {
    if (prefetch) {
      for (int r = 0; r < R; ++r)
        _mm_prefetch(prefetch + 64 * r, _MM_HINT_T1);
      prefetch += 64 * R;
    }
    __m512i xv[T];
    for (int t = 0; t < T; ++t)
      xv[t] = _mm512_loadu_si512(x[t] + 32 * j);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = _mm512_loadu_si512(w[r] + j * wt.step);
      for (int t = 0; t < T; ++t)
        acc[t][r] = dot(acc[t][r], wv, xv[t]);
    }
  }
  if (wt.tail) {
    __m512i xv[T];
    for (int t = 0; t < T; ++t)
      xv[t] = _mm512_loadu_si512(x[t] + 32 * j);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = _mm512_maskz_loadu_epi16(wt.tail, w[r] + j * wt.step);
      for (int t = 0; t < T; ++t)
        acc[t][r] = dot(acc[t][r], wv, xv[t]);
    }
  }
}

/// Rows [n, n + R) for T tokens.
template <int T, int R>
KILN_AVX512_BF16 void gemvRows(const Bf16Weights &wt, const uint16_t *const *x,
                               const MatmulRows &io, int64_t n) {
  const uint16_t *w[R];
  for (int r = 0; r < R; ++r)
    w[r] = wt.row(n + r);
  // The rows kGemvPrefetchGroups groups on (contiguous in either layout,
  // one linear stream), fetched at the pace this group is read: on a 2-vCPU
  // Emerald Rapids this GEMV went from 11.2-12.0 to 14.5-14.9 GB/s from
  // DRAM with it (1 thread; read floor 15.6).
  const char *prefetch =
      reinterpret_cast<const char *>(wt.row(n + kGemvPrefetchGroups * R));
  __m512 acc[T][R];
  sweep<T, R>(wt, x, w, acc, prefetch);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r)
      store(io, t, n + r, acc[t][r]);
}

template <int T, int R>
KILN_AVX512_BF16 void gemvRange(const Bf16Weights &wt, const uint16_t *const *x,
                                const MatmulRows &io, int64_t nBegin,
                                int64_t nEnd) {
  int64_t n = nBegin;
  for (; n + R <= nEnd; n += R)
    gemvRows<T, R>(wt, x, io, n);
  for (; n < nEnd; ++n)
    gemvRows<T, 1>(wt, x, io, n);
}

KILN_AVX512_BF16 void gemv(const Bf16Weights &wt, const uint16_t *const *x,
                           const MatmulRows &io, int64_t nBegin, int64_t nEnd) {
  switch (io.tokens) {
  case 1: // one panel (one stream) at a time; 8 separate rows
    if (wt.panelRows == kRows)
      return gemvRange<1, kRows>(wt, x, io, nBegin, nEnd);
    return gemvRange<1, 8>(wt, x, io, nBegin, nEnd);
  case 2:
    return gemvRange<2, 4>(wt, x, io, nBegin, nEnd);
  case 3:
    return gemvRange<3, 4>(wt, x, io, nBegin, nEnd);
  default:
    return gemvRange<4, 4>(wt, x, io, nBegin, nEnd);
  }
}

KILN_AVX512_BF16 void gemm(const Bf16Weights &wt, const uint16_t *const *x,
                           const MatmulRows &io, int64_t nBegin, int64_t nEnd) {
  for (int64_t b0 = 0; b0 < io.tokens; b0 += kTokenBlock) {
    const int64_t bEnd = std::min(io.tokens, b0 + kTokenBlock);
    for (int64_t n0 = nBegin; n0 < nEnd; n0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, nEnd - n0);
      const uint16_t *w[kRows];
      for (int r = 0; r < kRows; ++r) // padding rows repeat a valid one
        w[r] = wt.row(n0 + (r < rows ? r : 0));
      // The next group's rows (one contiguous range in either layout), into
      // L2 a share per token group, so DRAM latency hides behind this
      // group's products. Only for groups of up to kPrefetchMaxBytes:
      // measured, it gains 12-18% on experts' down projections (K = 768)
      // and loses 5-12% at K = 2048, whose 16 KiB panels crowd L1.
      const char *next =
          kRows * wt.K * 2 <= kPrefetchMaxBytes && n0 + 2 * kRows <= nEnd
              ? reinterpret_cast<const char *>(wt.row(n0 + kRows))
              : nullptr;
      const int64_t nextBytes = next ? kRows * wt.K * 2 : 0;
      const int64_t groups = (bEnd - b0 + kTokens - 1) / kTokens;
      const int64_t share = (nextBytes / 64 + groups - 1) / groups * 64;
      int64_t fetched = 0;
      for (int64_t t0 = b0; t0 < bEnd; t0 += kTokens) {
        for (int64_t end = std::min(nextBytes, fetched + share); fetched < end;
             fetched += 64)
          _mm_prefetch(next + fetched, _MM_HINT_T1);
        const int64_t tokens = std::min<int64_t>(kTokens, bEnd - t0);
        const uint16_t *xt[kTokens];
        for (int t = 0; t < kTokens; ++t)
          xt[t] = x[t0 + (t < tokens ? t : 0)];
        __m512 acc[kTokens][kRows];
        sweep<kTokens, kRows>(wt, xt, w, acc);
        for (int t = 0; t < tokens; ++t)
          for (int r = 0; r < rows; ++r)
            store(io, t0 + t, n0 + r, acc[t][r]);
      }
    }
  }
}

} // namespace

/// vcvtne2ps2bf16 rounds as the contract does (MatmulBf16.h): nearest even,
/// a subnormal to zero of its sign, a NaN quiet with its sign and top bits
/// (Intel SDM; RoundsAsTheContractSays and RandomBitsRoundAsTheScalar check
/// it on every CPU that has the instruction). 32 values an instruction.
KILN_AVX512_BF16 void kiln::cpu::roundRowBf16Avx512(const float *x, int64_t K,
                                                    uint16_t *out) {
  const int64_t padded = bf16RowLength(K);
  for (int64_t k = 0; k < padded; k += 32) {
    const int64_t valid = std::clamp<int64_t>(K - k, 0, 32);
    const __mmask16 lo = __mmask16((1u << std::min<int64_t>(valid, 16)) - 1);
    const __mmask16 hi =
        __mmask16((1u << std::max<int64_t>(valid - 16, 0)) - 1);
    const __m512bh v =
        _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + k + 16),
                            _mm512_maskz_loadu_ps(lo, x + k));
    _mm512_storeu_si512(out + k, (__m512i)v);
  }
}

void kiln::cpu::matmulBf16Avx512Bf16(const MatmulRows &io,
                                     const uint16_t *const *x,
                                     const WeightView &w, int64_t nBegin,
                                     int64_t nEnd) {
  const Bf16Weights wt(w);
  if (io.tokens <= kGemvMaxTokens)
    gemv(wt, x, io, nBegin, nEnd);
  else
    gemm(wt, x, io, nBegin, nEnd);
}

#else // not x86: never selected (useAvx512Bf16() is false), kept for linking.

void kiln::cpu::roundRowBf16Avx512(const float *x, int64_t K, uint16_t *out) {
  roundRowBf16Scalar(x, K, out);
}

void kiln::cpu::matmulBf16Avx512Bf16(const MatmulRows &io,
                                     const uint16_t *const *x,
                                     const WeightView &w, int64_t nBegin,
                                     int64_t nEnd) {
  matmulBf16Scalar(io, x, w, nBegin, nEnd);
}

#endif
