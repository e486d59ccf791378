//===- Avx512Decode.h - Weight decoding into AVX-512 registers --*- C++ -*-===//
//
// Internal to MatmulAvx512.cpp (x86 only). Each decoder's Row::load32(k)
// gives elements [k, k + 32) of one weight row as two FP32 vectors,
// load16(k) one vector, load16Masked(k, m) one vector with lanes outside m
// zero. Values equal dequantizeRow()'s bit for bit. MXFP4 has only load32
// and returns the block's even elements, then its odd ones.
//
// kPanel: rows whose elements [k, k + 32) lie together (support/
// WeightPanels.h; 1 for row-major): rows [n, n + kPanel) of columns
// [k0, k1) are bytes [rowBytes(n) + k0 / 32 * kPanel * bytesPer32(), ...).
// kGemvRows: rows per GEMV group at T = 1 (MXFP4 keeps two pointers per row
// and runs out of registers at 8; measured best 4). kPrefetch: whether the
// GEMV prefetches in software (on for every format streamed from DRAM:
// BF16 rows of 4 KiB end before the hardware prefetcher ramps up, and on a
// 2-vCPU Emerald Rapids even BF16 row panels, one stream, went from 10.7 to
// 13.2 GB/s with it, 1 thread, read floor 15.6).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_AVX512DECODE_H
#define KILN_RUNTIME_CPU_AVX512DECODE_H

#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Types.h"
#include "runtime/cpu/WeightRows.h"

#include <immintrin.h>

#define KILN_AVX512                                                            \
  __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define KILN_AVX512_INLINE KILN_AVX512 inline __attribute__((always_inline))

namespace kiln::cpu::avx512 {

/// For each E8M0 scale byte e, the 16 E2M1 values times 2^(e - 127) (NaN for
/// 0xFF), each product rounded as dequantizeRow() rounds it: one aligned
/// load gives a block's lookup table (16 KiB, mostly a few hot lines).
inline const float *scaledE2m1Tables() {
  static const struct Tables {
    alignas(64) float v[256][16];
    Tables() {
      for (int e = 0; e < 256; ++e)
        for (int c = 0; c < 16; ++c)
          v[e][c] = e2m1ToFloat(uint8_t(c)) * e8m0ToFloat(uint8_t(e));
    }
  } tables;
  return &tables.v[0][0];
}

struct DecF32 {
  static constexpr int kPanel = 1;
  static constexpr int kGemvRows = 8;
  static constexpr bool kPrefetch = false;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const float *p;
    KILN_AVX512_INLINE void load32(int64_t k, __m512 &a, __m512 &b) const {
      a = _mm512_loadu_ps(p + k);
      b = _mm512_loadu_ps(p + k + 16);
    }
    KILN_AVX512_INLINE __m512 load16(int64_t k) const {
      return _mm512_loadu_ps(p + k);
    }
    KILN_AVX512_INLINE __m512 load16Masked(int64_t k, __mmask16 m) const {
      return _mm512_maskz_loadu_ps(m, p + k);
    }
  };
  Row row(int64_t n) const { return {rows::f32(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 128; }
};

KILN_AVX512_INLINE __m512 bf16x16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// BF16 rows, one after another (P = 1) or in row panels of P rows
/// (support/WeightPanels.h: a GEMV group of P rows reads one stream).
template <int P> struct DecBF16Rows {
  static constexpr int kPanel = P;
  static constexpr int kGemvRows = P == 1 ? 8 : P;
  static constexpr bool kPrefetch = true;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint16_t *p;
    /// Elements [k, k + 16) start here (k a multiple of 16).
    KILN_AVX512_INLINE const uint16_t *at(int64_t k) const {
      if constexpr (P == 1)
        return p + k;
      else
        return p + (k / kPanelCols) * kPanelCols * P + k % kPanelCols;
    }
    KILN_AVX512_INLINE __m512 load16(int64_t k) const {
      return bf16x16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(at(k))));
    }
    KILN_AVX512_INLINE void load32(int64_t k, __m512 &a, __m512 &b) const {
      a = load16(k);
      b = load16(k + 16);
    }
    KILN_AVX512_INLINE __m512 load16Masked(int64_t k, __mmask16 m) const {
      return bf16x16(_mm256_maskz_loadu_epi16(m, at(k)));
    }
  };
  Row row(int64_t n) const { return {rows::u16(w, n, P)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 64; }
};
using DecBF16 = DecBF16Rows<1>;
using DecBF16Panels = DecBF16Rows<kPanelRows>;

struct DecF16 {
  static constexpr int kPanel = 1;
  static constexpr int kGemvRows = 8;
  static constexpr bool kPrefetch = false;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint16_t *p;
    KILN_AVX512_INLINE __m512 load16(int64_t k) const {
      return _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + k)));
    }
    KILN_AVX512_INLINE void load32(int64_t k, __m512 &a, __m512 &b) const {
      a = load16(k);
      b = load16(k + 16);
    }
    KILN_AVX512_INLINE __m512 load16Masked(int64_t k, __mmask16 m) const {
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + k));
    }
  };
  Row row(int64_t n) const { return {rows::u16(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 64; }
};

/// E4M3FN bytes (zero-extended to 32 bits) to float, as e4m3ToFloat():
/// the 7 magnitude bits placed at the top of an FP32 mantissa/exponent
/// give the value times 2^-120 exactly, subnormals included.
KILN_AVX512_INLINE __m512 e4m3x16(__m128i bytes) {
  const __m512i v = _mm512_cvtepu8_epi32(bytes);
  const __m512i mag =
      _mm512_and_si512(_mm512_slli_epi32(v, 20), _mm512_set1_epi32(0x07F00000));
  __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(mag),
                           _mm512_set1_ps(1.329227995784916e36f)); // 2^120
  // f | (v << 24 & sign bit)
  f = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(f), _mm512_slli_epi32(v, 24),
      _mm512_set1_epi32(int(0x80000000u)), 0xF8));
  const __mmask16 nan =
      _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x07F00000));
  return _mm512_mask_mov_ps(f, nan,
                            _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

struct DecFP8 {
  static constexpr int kPanel = 1;
  static constexpr int kGemvRows = 8;
  static constexpr bool kPrefetch = true;
  static constexpr bool kPacked = false;
  const WeightView &w;
  struct Row {
    const uint8_t *p;
    const float *scales; // this row's 128-row block, one per 128 columns
    KILN_AVX512_INLINE __m512 load16(int64_t k) const {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + k));
      return _mm512_mul_ps(e4m3x16(b), _mm512_set1_ps(scales[k / 128]));
    }
    KILN_AVX512_INLINE void load32(int64_t k, __m512 &a, __m512 &b) const {
      a = load16(k);
      b = load16(k + 16);
    }
    KILN_AVX512_INLINE __m512 load16Masked(int64_t k, __mmask16 m) const {
      return _mm512_maskz_mul_ps(m, e4m3x16(_mm_maskz_loadu_epi8(m, p + k)),
                                 _mm512_set1_ps(scales[k / 128]));
    }
  };
  Row row(int64_t n) const { return {rows::fp8(w, n), rows::fp8Scales(w, n)}; }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 32; }
};

/// MXFP4 rows (P = 1) or row panels of P rows (support/WeightPanels.h:
/// values and scales each one stream per panel).
template <int P> struct DecMXFP4Rows {
  static constexpr int kPanel = P;
  static constexpr int kGemvRows = 4;
  static constexpr bool kPrefetch = true;
  static constexpr bool kPacked = true;
  const WeightView &w;
  const float *tables = scaledE2m1Tables();
  struct Row {
    const uint8_t *p;      // the row's first 16 bytes (32 values)
    const uint8_t *scales; // the row's first scale
    const float *tables;
    /// Even elements of the block to `a`, odd ones to `b`.
    KILN_AVX512_INLINE void load32(int64_t k, __m512 &a, __m512 &b) const {
      const int64_t block = k / 32;
      const __m512 table = _mm512_load_ps(tables + 16 * scales[block * P]);
      const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(
          reinterpret_cast<const __m128i *>(p + block * 16 * P)));
      a = _mm512_permutexvar_ps(codes, table); // uses the low 4 bits
      b = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), table);
    }
    __m512 load16(int64_t) const = delete;
    __m512 load16Masked(int64_t, __mmask16) const = delete;
  };
  Row row(int64_t n) const {
    return {rows::mxfp4(w, n, P), rows::mxfp4Scales(w, n, P), tables};
  }
  const void *rowBytes(int64_t n) const { return row(n).p; }
  static constexpr int64_t bytesPer32() { return 16; }
};
using DecMXFP4 = DecMXFP4Rows<1>;
using DecMXFP4Panels = DecMXFP4Rows<kPanelRows>;

/// The family rows::withDecoder() picks from.
using Decoders =
    rows::Family<DecF32, DecBF16Rows, DecF16, DecFP8, DecMXFP4Rows>;

/// The tree of Matmul.h: i + (i + 8), + 4, + 2, + 1.
KILN_AVX512_INLINE float treeSum(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 =
      _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

/// Lane k of the result is treeSum(v[k]), for 16 vectors at once: each sum
/// makes treeSum's additions in its order (lane i plus lane i + 8, + 4, + 2,
/// + 1), with pairs of vectors folded together at each level (15 additions
/// and 30 permutes instead of 16 x 4 additions and their extractions).
KILN_AVX512_INLINE __m512 treeSum16(const __m512 (&v)[16]) {
  const __m512i lo8 =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i hi8 = _mm512_add_epi32(lo8, _mm512_set1_epi32(8));
  const __m512i lo4 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18,
                                        19, 24, 25, 26, 27);
  const __m512i hi4 = _mm512_add_epi32(lo4, _mm512_set1_epi32(4));
  const __m512i lo2 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20,
                                        21, 24, 25, 28, 29);
  const __m512i hi2 = _mm512_add_epi32(lo2, _mm512_set1_epi32(2));
  const __m512i lo1 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                        22, 24, 26, 28, 30);
  const __m512i hi1 = _mm512_add_epi32(lo1, _mm512_set1_epi32(1));
  __m512 r[8], s[4], t[2];
  for (int k = 0; k < 8; ++k)
    r[k] = _mm512_add_ps(_mm512_permutex2var_ps(v[2 * k], lo8, v[2 * k + 1]),
                         _mm512_permutex2var_ps(v[2 * k], hi8, v[2 * k + 1]));
  for (int k = 0; k < 4; ++k)
    s[k] = _mm512_add_ps(_mm512_permutex2var_ps(r[2 * k], lo4, r[2 * k + 1]),
                         _mm512_permutex2var_ps(r[2 * k], hi4, r[2 * k + 1]));
  for (int k = 0; k < 2; ++k)
    t[k] = _mm512_add_ps(_mm512_permutex2var_ps(s[2 * k], lo2, s[2 * k + 1]),
                         _mm512_permutex2var_ps(s[2 * k], hi2, s[2 * k + 1]));
  return _mm512_add_ps(_mm512_permutex2var_ps(t[0], lo1, t[1]),
                       _mm512_permutex2var_ps(t[0], hi1, t[1]));
}

} // namespace kiln::cpu::avx512

#endif // KILN_RUNTIME_CPU_AVX512DECODE_H
