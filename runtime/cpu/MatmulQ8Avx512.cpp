//===- MatmulQ8Avx512.cpp - Int8-activation MXFP4 matmul, AVX-512 VNNI ----===//
//
// Compiled for baseline x86-64; the functions carry target attributes and
// run only when useAvx512Vnni() says so. The order is MatmulQ8.h's.
//
// Four rows of a row panel share one 64-byte load per block (row r's 16
// bytes in 128-bit lane r). The nibbles become unsigned weight bytes with
// one in-lane table shuffle each (vpshufb); vpdpbusd multiplies them with
// the block's int8 activations, broadcast to the four lanes, starting from
// negCorr, so int32 lane 4r + j holds row r's lane j exactly. A single row
// (panel edges, row-major weights) does the same on 128-bit vectors. Each
// group of rows (one panel, or two when there are 4 tokens or more) is
// swept by up to 8 tokens at a time, its weights decoded once per sweep.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulQ8.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define KILN_Q8                                                                \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define KILN_Q8_INLINE KILN_Q8 inline __attribute__((always_inline))

using namespace kiln::cpu;

namespace {

constexpr int kTokenSweep = 8;
constexpr int64_t kPanelPairTokens = 4;
constexpr int64_t kPrefetchBytes = 2048;

KILN_Q8_INLINE __m128i load128(const void *p) {
  return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

KILN_Q8_INLINE __m512i weightTable512() {
  return _mm512_broadcast_i32x4(load128(kQ8WeightTable));
}

/// Rows n .. n + 4G - 1, G whole panels one after another, for tokens
/// [0, T): out[t][4g + r]. Two panels share each token's activation loads.
template <int T, int G>
KILN_Q8 void panelRows(const uint8_t *codes, const uint8_t *scales,
                       const Q8Block *const *q, int64_t blocks,
                       float (*out)[4 * G]) {
  const __m512i table = weightTable512();
  const __m512i low = _mm512_set1_epi8(0x0F);
  // Lane 4r + j takes scale byte r.
  const __m512i scaleIndex = _mm512_set_epi32(
      0x80808003, 0x80808003, 0x80808003, 0x80808003, 0x80808002, 0x80808002,
      0x80808002, 0x80808002, 0x80808001, 0x80808001, 0x80808001, 0x80808001,
      0x80808000, 0x80808000, 0x80808000, 0x80808000);
  const __m512 bias = _mm512_set1_ps(127.0f);
  const int64_t panelBytes = 64 * blocks, panelScales = 4 * blocks;
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g)
      acc[t][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i wLo[G], wHi[G];
    __m512 exponent[G];
    for (int g = 0; g < G; ++g) {
      const uint8_t *c = codes + g * panelBytes + 64 * b;
      _mm_prefetch(reinterpret_cast<const char *>(c + kPrefetchBytes),
                   _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(c);
      wLo[g] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, low));
      wHi[g] = _mm512_shuffle_epi8(
          table, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
      int32_t four;
      std::memcpy(&four, scales + g * panelScales + 4 * b, 4);
      exponent[g] = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_shuffle_epi8(
                                      _mm512_set1_epi32(four), scaleIndex)),
                                  bias);
    }
    for (int t = 0; t < T; ++t) {
      const Q8Block &blk = q[t][b];
      const __m512i corr = _mm512_broadcast_i32x4(load128(blk.negCorr));
      const __m512i even = _mm512_broadcast_i32x4(load128(blk.even));
      const __m512i odd = _mm512_broadcast_i32x4(load128(blk.odd));
      const __m512 half = _mm512_set1_ps(blk.halfScale);
      for (int g = 0; g < G; ++g) {
        __m512i s = _mm512_dpbusd_epi32(corr, wLo[g], even);
        s = _mm512_dpbusd_epi32(s, wHi[g], odd);
        const __m512 m = _mm512_scalef_ps(half, exponent[g]);
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), m, acc[t][g]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int g = 0; g < G; ++g) {
      // (lane 0 + lane 1) + (lane 2 + lane 3) in each 128-bit lane.
      const __m512 a = acc[t][g];
      const __m512 pairs =
          _mm512_add_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(2, 3, 0, 1)));
      const __m512 sums = _mm512_add_ps(
          pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(1, 0, 3, 2)));
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, sums);
      for (int r = 0; r < 4; ++r)
        out[t][4 * g + r] = lanes[4 * r];
    }
  }
}

/// One row (block b at codes + b * codeStride) for tokens [0, T): out[t].
template <int T>
KILN_Q8 void oneRow(const uint8_t *codes, int64_t codeStride,
                    const uint8_t *scales, int64_t scaleStride,
                    const Q8Block *const *q, int64_t blocks, float *out) {
  const __m128i table = load128(kQ8WeightTable);
  const __m128i low = _mm_set1_epi8(0x0F);
  __m128 acc[T];
  for (int t = 0; t < T; ++t)
    acc[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const __m128i v = load128(codes + b * codeStride);
    const __m128i wLo = _mm_shuffle_epi8(table, _mm_and_si128(v, low));
    const __m128i wHi =
        _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), low));
    const __m128 exponent =
        _mm_set1_ps(float(int(scales[b * scaleStride]) - 127));
    for (int t = 0; t < T; ++t) {
      const Q8Block &blk = q[t][b];
      __m128i s = load128(blk.negCorr);
      s = _mm_dpbusd_epi32(s, wLo, load128(blk.even));
      s = _mm_dpbusd_epi32(s, wHi, load128(blk.odd));
      const __m128 m = _mm_scalef_ps(_mm_set1_ps(blk.halfScale), exponent);
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(s), m, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, acc[t]);
    out[t] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
}

KILN_Q8_INLINE void store(const MatmulRows &io, int64_t t, int64_t n,
                          float sum) {
  float *out = io.yRow(t) + n;
  *out = io.accumulate ? *out + sum : sum;
}

/// Tokens [t0, t0 + T) of rows [n, n + rows): 4 x G rows of G whole panels
/// (rows = 4G), or row n alone (rows = 1).
template <int T, int G>
KILN_Q8 void sweep(const MatmulRows &io, const Q8Block *const *q,
                   const WeightView &w, int64_t n, int64_t t0) {
  const int64_t blocks = w.cols / 32;
  const Q8Block *const *qt = q + t0;
  const uint8_t *codes = static_cast<const uint8_t *>(w.data) +
                         kiln::panelOffset(n, 0, w.cols / 2, w.panelRows, 16);
  const uint8_t *scales = static_cast<const uint8_t *>(w.scales) +
                          kiln::panelOffset(n, 0, blocks, w.panelRows, 1);
  if constexpr (G > 0) {
    float out[T][4 * G];
    panelRows<T, G>(codes, scales, qt, blocks, out);
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < 4 * G; ++r)
        store(io, t0 + t, n + r, out[t][r]);
  } else {
    float out[T];
    oneRow<T>(codes, 16 * w.panelRows, scales, w.panelRows, qt, blocks, out);
    for (int t = 0; t < T; ++t)
      store(io, t0 + t, n, out[t]);
  }
}

/// Every token of rows [n, n + max(1, 4G)), kTokenSweep tokens at a time.
template <int G>
KILN_Q8 void sweepTokens(const MatmulRows &io, const Q8Block *const *q,
                         const WeightView &w, int64_t n) {
  int64_t t0 = 0;
  for (; t0 + kTokenSweep <= io.tokens; t0 += kTokenSweep)
    sweep<kTokenSweep, G>(io, q, w, n, t0);
  switch (io.tokens - t0) {
  case 1:
    return sweep<1, G>(io, q, w, n, t0);
  case 2:
    return sweep<2, G>(io, q, w, n, t0);
  case 3:
    return sweep<3, G>(io, q, w, n, t0);
  case 4:
    return sweep<4, G>(io, q, w, n, t0);
  case 5:
    return sweep<5, G>(io, q, w, n, t0);
  case 6:
    return sweep<6, G>(io, q, w, n, t0);
  case 7:
    return sweep<7, G>(io, q, w, n, t0);
  default:
    return;
  }
}

/// round-to-nearest-even(v * scale), clamped to [-127, 127].
KILN_Q8_INLINE __m512i roundClamp(__m512 v, __m512 scale) {
  const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(v, scale));
  return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)),
                          _mm512_set1_epi32(127));
}

} // namespace

KILN_Q8 void kiln::cpu::quantizeQ8Avx512(const float *x, int64_t K,
                                         Q8Block *out) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                         22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512 inf = _mm512_set1_ps(__builtin_inff());
  for (int64_t b = 0; b < K / 32; ++b) {
    const __m512 a = _mm512_loadu_ps(x + 32 * b);
    const __m512 c = _mm512_loadu_ps(x + 32 * b + 16);
    const __m512 absA = _mm512_abs_ps(a), absC = _mm512_abs_ps(c);
    // Not less than infinity: an infinity or a NaN.
    const bool finite = !(_mm512_cmp_ps_mask(absA, inf, _CMP_NLT_UQ) |
                          _mm512_cmp_ps_mask(absC, inf, _CMP_NLT_UQ));
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(absA, absC));
    const float d = finite ? amax / 127.0f : __builtin_nanf("");
    const float inv = finite && d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 scale = _mm512_set1_ps(inv);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i qa = finite ? roundClamp(a, scale) : zero;
    const __m512i qc = finite ? roundClamp(c, scale) : zero;
    Q8Block &blk = out[b];
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(blk.even),
        _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(qa, even, qc)));
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(blk.odd),
        _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(qa, odd, qc)));
    const int32_t bias = kQ8WeightBias;
    blk.negCorr[0] = -bias * _mm512_mask_reduce_add_epi32(0x00FF, qa);
    blk.negCorr[1] = -bias * _mm512_mask_reduce_add_epi32(0xFF00, qa);
    blk.negCorr[2] = -bias * _mm512_mask_reduce_add_epi32(0x00FF, qc);
    blk.negCorr[3] = -bias * _mm512_mask_reduce_add_epi32(0xFF00, qc);
    blk.halfScale = d * 0.5f;
  }
}

KILN_Q8 void kiln::cpu::matmulQ8Avx512Vnni(const MatmulRows &io,
                                           const Q8Block *const *q,
                                           const WeightView &w, int64_t nBegin,
                                           int64_t nEnd) {
  const bool panels = w.panelRows == kiln::kPanelRows;
  // Two panels at once halve the activation loads per multiply-add, which
  // bound the sweep with many tokens (measured: a 64-token 768 x 2048
  // matmul 1.02-1.11 -> 0.73-0.85 ms); with few tokens the second weight
  // stream costs more than it saves (GEMV from DRAM 16-22 -> 10-13 GB/s).
  const bool pairs = io.tokens >= kPanelPairTokens;
  int64_t n = nBegin;
  while (n < nEnd) {
    const bool atPanel = panels && n % kiln::kPanelRows == 0;
    if (pairs && atPanel && n + 2 * kiln::kPanelRows <= nEnd) {
      sweepTokens<2>(io, q, w, n);
      n += 2 * kiln::kPanelRows;
    } else if (atPanel && n + kiln::kPanelRows <= nEnd) {
      sweepTokens<1>(io, q, w, n);
      n += kiln::kPanelRows;
    } else {
      sweepTokens<0>(io, q, w, n);
      n += 1;
    }
  }
}

#else // not x86: never selected (useAvx512Vnni() is false), kept for linking.

void kiln::cpu::quantizeQ8Avx512(const float *x, int64_t K, Q8Block *out) {
  quantizeQ8Scalar(x, K, out);
}

void kiln::cpu::matmulQ8Avx512Vnni(const MatmulRows &io,
                                   const Q8Block *const *q, const WeightView &w,
                                   int64_t nBegin, int64_t nEnd) {
  matmulQ8Scalar(io, q, w, nBegin, nEnd);
}

#endif
