//===- Bf16PairsAvx512.cpp - The BF16 pair form with vdpbf16ps ------------===//
//
// The pair form of MatmulBf16.h with AVX-512 BF16. A tile of R rows x C
// 16-column vectors of y stays in registers while every pair is added: one
// 64-byte load of packed rows feeds R vdpbf16ps, each against its row's
// coefficient pair broadcast. Packing interleaves two rows with one
// vpermt2w per 16 pairs. Compiled for baseline x86-64 with target
// attributes; runs only when useAvx512Bf16() says so.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulBf16.h"

#if defined(__x86_64__) || defined(__i386__)

#include "runtime/cpu/Avx512Bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

using namespace kiln::cpu;

namespace {

constexpr int kRows = 4; // register tile: rows of y
constexpr int kCols = 4; // ... and 16-column vectors

/// 16 lanes of y from p, subnormals flushed to zero of their sign: the
/// contract's ftz(y).
KILN_AVX512_BF16_INLINE __m512 loadFlushed(const float *p, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, p));
  const __mmask16 tiny =
      _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000));
  return _mm512_castsi512_ps(
      _mm512_mask_and_epi32(u, tiny, u, _mm512_set1_epi32(int(0x80000000))));
}

/// The coefficient pair (a[0], a[1]) in every 32-bit element.
KILN_AVX512_BF16_INLINE __m512i pairOf(const uint16_t *a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}

/// Rows [r0, r0 + R), columns [l0, l0 + 16 C) (the last vector masked by
/// `last`), over every pair.
template <int R, int C>
KILN_AVX512_BF16_INLINE void tile(float *const *y, int64_t r0,
                                  const uint16_t *a, int64_t lda,
                                  const uint16_t *packed, int64_t pairs,
                                  int64_t n, int64_t l0, __mmask16 last) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      acc[r][c] = loadFlushed(y[r0 + r] + l0 + 16 * c,
                              c == C - 1 ? last : __mmask16(0xFFFF));
  for (int64_t p = 0; p < pairs; ++p) {
    const uint16_t *row = packed + p * 2 * n + 2 * l0;
    __m512i xv[C];
    for (int c = 0; c < C; ++c)
      xv[c] = _mm512_maskz_loadu_epi32(c == C - 1 ? last : __mmask16(0xFFFF),
                                       row + 32 * c);
    for (int r = 0; r < R; ++r) {
      const __m512i av = pairOf(a + (r0 + r) * lda + 2 * p);
      for (int c = 0; c < C; ++c)
        acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)av, (__m512bh)xv[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(y[r0 + r] + l0 + 16 * c,
                            c == C - 1 ? last : __mmask16(0xFFFF), acc[r][c]);
}

template <int C>
KILN_AVX512_BF16_INLINE void rowsOf(float *const *y, int64_t rows,
                                    const uint16_t *a, int64_t lda,
                                    const uint16_t *packed, int64_t pairs,
                                    int64_t n, int64_t l0, __mmask16 last) {
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows)
    tile<kRows, C>(y, r, a, lda, packed, pairs, n, l0, last);
  for (; r < rows; ++r)
    tile<1, C>(y, r, a, lda, packed, pairs, n, l0, last);
}

} // namespace

KILN_AVX512_BF16 void kiln::cpu::axpyPairsBf16Avx512Bf16(
    float *const *y, int64_t rows, const uint16_t *a, int64_t lda,
    const uint16_t *packed, int64_t pairs, int64_t n) {
  int64_t l0 = 0;
  for (; l0 + 16 * kCols <= n; l0 += 16 * kCols)
    rowsOf<kCols>(y, rows, a, lda, packed, pairs, n, l0, 0xFFFF);
  for (; l0 < n; l0 += 16) {
    const int64_t valid = std::min<int64_t>(16, n - l0);
    rowsOf<1>(y, rows, a, lda, packed, pairs, n, l0,
              __mmask16((1u << valid) - 1));
  }
}

KILN_AVX512_BF16 void kiln::cpu::packPairsBf16Avx512(const uint16_t *const *x,
                                                     int64_t count, int64_t n,
                                                     uint16_t *out) {
  // Element 2i of the result is even[i], element 2i + 1 is odd[i]: the
  // columns [0, 16) of two rows, then [16, 32).
  alignas(64) uint16_t lo[32], hi[32];
  for (int i = 0; i < 16; ++i) {
    lo[2 * i] = uint16_t(i), lo[2 * i + 1] = uint16_t(32 + i);
    hi[2 * i] = uint16_t(16 + i), hi[2 * i + 1] = uint16_t(48 + i);
  }
  const __m512i idxLo = _mm512_load_si512(lo), idxHi = _mm512_load_si512(hi);
  for (int64_t p = 0; p < bf16Pairs(count); ++p, out += 2 * n) {
    const uint16_t *even = x[2 * p];
    const uint16_t *odd = 2 * p + 1 < count ? x[2 * p + 1] : nullptr;
    for (int64_t l = 0; l < n; l += 32) {
      const int64_t valid = std::min<int64_t>(32, n - l);
      const __mmask32 m =
          valid == 32 ? ~__mmask32(0) : __mmask32((1u << valid) - 1);
      const __m512i e = _mm512_maskz_loadu_epi16(m, even + l);
      const __m512i o =
          odd ? _mm512_maskz_loadu_epi16(m, odd + l) : _mm512_setzero_si512();
      const int64_t first = std::min<int64_t>(16, valid),
                    second = valid - first;
      _mm512_mask_storeu_epi16(out + 2 * l,
                               first == 16 ? ~__mmask32(0)
                                           : __mmask32((1u << (2 * first)) - 1),
                               _mm512_permutex2var_epi16(e, idxLo, o));
      if (second > 0)
        _mm512_mask_storeu_epi16(
            out + 2 * l + 32,
            second == 16 ? ~__mmask32(0) : __mmask32((1u << (2 * second)) - 1),
            _mm512_permutex2var_epi16(e, idxHi, o));
    }
  }
}

#else // not x86: never selected (useAvx512Bf16() is false), kept for linking.

void kiln::cpu::axpyPairsBf16Avx512Bf16(float *const *y, int64_t rows,
                                        const uint16_t *a, int64_t lda,
                                        const uint16_t *packed, int64_t pairs,
                                        int64_t n) {
  axpyPairsBf16Scalar(y, rows, a, lda, packed, pairs, n);
}

void kiln::cpu::packPairsBf16Avx512(const uint16_t *const *x, int64_t count,
                                    int64_t n, uint16_t *out) {
  packPairsBf16Scalar(x, count, n, out);
}

#endif
