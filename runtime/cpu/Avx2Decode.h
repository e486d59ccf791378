//===- Avx2Decode.h - Weight decoding into AVX2 registers -------*- C++ -*-===//
//
// Internal to MatmulAvx2.cpp and MatmulAvx2Gemm.cpp (x86 only; the code
// carries target attributes and runs only when cpuPath() is Avx2).
//
// The 16 lanes of Matmul.h's order live in two 8-float registers (lanes 0-7
// and 8-15). Each decoder's Row::load32(k, v) writes elements [k, k + 32)
// of one weight row as four registers: [k, k + 8), [k + 8, k + 16),
// [k + 16, k + 24), [k + 24, k + 32), i.e. lanes 0-7, 8-15, 0-7, 8-15;
// Row::tail(k, n, out) writes elements [k, k + n) (n < 32, formats other
// than MXFP4) as floats. kPanel, rowBytes() and bytesPer32() as in
// Avx512Decode.h. Values equal dequantizeRow()'s bit for bit. MXFP4
// gives a block's even elements then its odd ones (the activations are
// permuted the same way by the matmul), which is its pairing lane(k) =
// (k mod 32) / 2.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_AVX2DECODE_H
#define KILN_RUNTIME_CPU_AVX2DECODE_H

#include "runtime/cpu/Avx512Decode.h" // scaledE2m1Tables
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/WeightRows.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define KILN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KILN_AVX2_INLINE KILN_AVX2 inline __attribute__((always_inline))

namespace kiln::cpu::avx2 {

/// Lane i plus lane i + 8, then + 4, + 2, + 1 (Matmul.h).
KILN_AVX2_INLINE float treeSum(__m256 lo, __m256 hi) {
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 =
      _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

KILN_AVX2_INLINE __m256 bf16x8(const uint16_t *p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/// E4M3FN bytes as e4m3ToFloat() gives them (the AVX-512 decoder's
/// construction on 8 lanes).
KILN_AVX2_INLINE __m256 e4m3x8(const uint8_t *p) {
  const __m256i v = _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
  const __m256i mag =
      _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(0x07F00000));
  __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(mag),
                           _mm256_set1_ps(1.329227995784916e36f)); // 2^120
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(v, 24),
                                        _mm256_set1_epi32(int(0x80000000u)));
  f = _mm256_or_ps(f, _mm256_castsi256_ps(sign));
  const __m256 nan = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x07F00000)));
  return _mm256_blendv_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                          nan);
}

/// Entries `codes` (each 0..15) of a 16-float table.
KILN_AVX2_INLINE __m256 lookup16(__m256i codes, __m256 lo, __m256 hi) {
  const __m256 high = _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, codes),
                          _mm256_permutevar8x32_ps(hi, codes), high);
}

// Decoders: Row::load32(k, w) writes the four registers of elements [k, k +
// 32) described above; Row::tail(k, n, out) writes elements [k, k + n) (n <
// 32, formats other than MXFP4) as floats.

struct DecF32 {
  static constexpr int kPanel = 1;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const float *p;
    KILN_AVX2_INLINE void load32(int64_t k, __m256 (&v)[4]) const {
      for (int i = 0; i < 4; ++i)
        v[i] = _mm256_loadu_ps(p + k + 8 * i);
    }
    void tail(int64_t k, int64_t n, float *out) const {
      std::copy_n(p + k, n, out);
    }
  };
  Row row(int64_t n) const { return {rows::f32(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 128; }
};

template <int P> struct DecBF16Rows {
  static constexpr int kPanel = P;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint16_t *p;
    const uint16_t *at(int64_t k) const {
      if constexpr (P == 1)
        return p + k;
      else
        return p + (k / kPanelCols) * kPanelCols * P + k % kPanelCols;
    }
    KILN_AVX2_INLINE void load32(int64_t k, __m256 (&v)[4]) const {
      const uint16_t *a = at(k), *b = at(k + 16);
      v[0] = bf16x8(a);
      v[1] = bf16x8(a + 8);
      v[2] = bf16x8(b);
      v[3] = bf16x8(b + 8);
    }
    void tail(int64_t k, int64_t n, float *out) const {
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = uint32_t(*at(k + i)) << 16;
        std::memcpy(out + i, &bits, 4);
      }
    }
  };
  Row row(int64_t n) const { return {rows::u16(w, n, P)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 64; }
};

struct DecF16 {
  static constexpr int kPanel = 1;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint16_t *p;
    KILN_AVX2_INLINE void load32(int64_t k, __m256 (&v)[4]) const {
      for (int i = 0; i < 4; ++i)
        v[i] = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + k + 8 * i)));
    }
    void tail(int64_t k, int64_t n, float *out) const {
      for (int64_t i = 0; i < n; ++i)
        out[i] = f16ToFloat(p[k + i]);
    }
  };
  Row row(int64_t n) const { return {rows::u16(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 64; }
};

struct DecFP8 {
  static constexpr int kPanel = 1;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint8_t *p;
    const float *scales; // this row's 128-row block, one per 128 columns
    KILN_AVX2_INLINE void load32(int64_t k, __m256 (&v)[4]) const {
      const __m256 s = _mm256_set1_ps(scales[k / 128]);
      for (int i = 0; i < 4; ++i)
        v[i] = _mm256_mul_ps(e4m3x8(p + k + 8 * i), s);
    }
    void tail(int64_t k, int64_t n, float *out) const {
      for (int64_t i = 0; i < n; ++i)
        out[i] = e4m3ToFloat(p[k + i]) * scales[(k + i) / 128];
    }
  };
  Row row(int64_t n) const { return {rows::fp8(w, n), rows::fp8Scales(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 32; }
};

template <int P> struct DecMXFP4Rows {
  static constexpr int kPanel = P;
  static constexpr bool kPacked = true;
  const WeightView &w;
  const float *tables = avx512::scaledE2m1Tables();
  struct Row {
    const uint8_t *p;
    const uint8_t *scales;
    const float *tables;
    KILN_AVX2_INLINE void load32(int64_t k, __m256 (&v)[4]) const {
      const int64_t block = k / 32;
      const float *table = tables + 16 * scales[block * P];
      const __m256 lo = _mm256_load_ps(table), hi = _mm256_load_ps(table + 8);
      const uint8_t *bytes = p + block * 16 * P;
      for (int half = 0; half < 2; ++half) {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i *>(bytes + 8 * half)));
        const __m256i even = _mm256_and_si256(b, _mm256_set1_epi32(15));
        v[half] = lookup16(even, lo, hi);
        v[2 + half] = lookup16(_mm256_srli_epi32(b, 4), lo, hi);
      }
    }
    void tail(int64_t, int64_t, float *) const {} // K % 32 == 0 always
  };
  Row row(int64_t n) const {
    return {rows::mxfp4(w, n, P), rows::mxfp4Scales(w, n, P), tables};
  }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 16; }
};

/// The family rows::withDecoder() picks from.
using Decoders =
    rows::Family<DecF32, DecBF16Rows, DecF16, DecFP8, DecMXFP4Rows>;

} // namespace kiln::cpu::avx2

#endif // KILN_RUNTIME_CPU_AVX2DECODE_H
