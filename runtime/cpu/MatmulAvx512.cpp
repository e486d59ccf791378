//===- MatmulAvx512.cpp - AVX-512 matmul with in-register decoding --------===//
//
// Compiled for baseline x86-64; the functions here carry target attributes
// and only run when useAvx512() says so.
//
// GEMV (few tokens): each group of R rows streams its weight bytes once,
// decoding 32 elements at a time into two vectors (Avx512Decode.h), and
// keeps R x T accumulators in registers. For BF16, FP8 and MXFP4 it
// prefetches the rows two groups ahead into L2 in software (measured:
// +15-30% from DRAM).
// GEMM (more tokens): per thread, for each block of up to 128 tokens, each
// 32-row x 512-column tile of W is decoded to FP32 once and swept by a 4x4
// (tokens x rows) register kernel; partial lanes persist between column
// chunks, so the order of Matmul.h holds. While a tile is swept, the next
// one's lines are asked for into L2 (TilePrefetch).
//
// MXFP4 decodes as even elements then odd elements of each 32-block (two
// vpermps from one vector of bytes); the activations are permuted the same
// way once per call, which is the pairing lane(k) = (k mod 32) / 2.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include "runtime/cpu/Avx512Decode.h"
#include "runtime/cpu/TilePrefetch.h"

#include <algorithm>

using namespace kiln::cpu;
using namespace kiln::cpu::avx512;

namespace {

KILN_AVX512_INLINE void store(const MatmulRows &io, int64_t t, int64_t n,
                              __m512 acc) {
  float sum = treeSum(acc);
  float *out = io.yRow(t) + n;
  *out = io.accumulate ? *out + sum : sum;
}

/// The outputs of a 4 x 4 (tokens x rows) tile, t < T and r < R of them,
/// their lanes summed 16 at a time (treeSum16: treeSum's bits).
KILN_AVX512_INLINE void storeTile(const MatmulRows &io, int64_t t0, int64_t T,
                                  int64_t n0, int64_t R,
                                  const __m512 (&acc)[4][4]) {
  alignas(64) float sums[16];
  _mm512_store_ps(sums, treeSum16(reinterpret_cast<const __m512(&)[16]>(acc)));
  for (int64_t t = 0; t < T; ++t) {
    float *out = io.yRow(t0 + t) + n0;
    for (int64_t r = 0; r < R; ++r)
      out[r] = io.accumulate ? out[r] + sums[t * 4 + r] : sums[t * 4 + r];
  }
}

KILN_AVX512_INLINE __mmask16 tailMask(int64_t count) {
  return __mmask16((1u << count) - 1);
}

/// Rows [0, T) of `io` permuted within each 32-block to evens then odds,
/// into `out` [T, K].
KILN_AVX512 void packPairs(const MatmulRows &io, int64_t t0, int64_t T,
                           int64_t K, float *out) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                         22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t t = 0; t < T; ++t) {
    const float *x = io.xRow(t0 + t);
    float *o = out + t * K;
    for (int64_t k = 0; k < K; k += 32) {
      __m512 a = _mm512_loadu_ps(x + k), b = _mm512_loadu_ps(x + k + 16);
      _mm512_storeu_ps(o + k, _mm512_permutex2var_ps(a, even, b));
      _mm512_storeu_ps(o + k + 16, _mm512_permutex2var_ps(a, odd, b));
    }
  }
}

//===----------------------------------------------------------------------===//
// GEMV
//===----------------------------------------------------------------------===//

/// Rows [n, n + R) for T tokens whose (possibly packed) rows are `x`.
template <class Dec, int T, int R>
KILN_AVX512 void gemvRows(const Dec &dec, const float *const *x,
                          const MatmulRows &io, int64_t n) {
  const int64_t K = dec.w.cols;
  typename Dec::Row rows[R];
  for (int r = 0; r < R; ++r)
    rows[r] = dec.row(n + r);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      acc[r][t] = _mm512_setzero_ps();

  // Compressed formats spend enough time decoding that the hardware
  // prefetchers fall behind: fetch the next group of rows into L2 at the
  // pace this group is read (rows are contiguous: one linear stream).
  const char *prefetch =
      static_cast<const char *>(dec.rowBytes(n + kGemvPrefetchGroups * R));
  const int64_t prefetchStep = Dec::kPrefetch ? R * dec.bytesPer32() : 0;

  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    for (int64_t off = 0; off < prefetchStep; off += 64)
      _mm_prefetch(prefetch + off, _MM_HINT_T1);
    prefetch += prefetchStep;
    __m512 x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = _mm512_loadu_ps(x[t] + k);
      x1[t] = _mm512_loadu_ps(x[t] + k + 16);
    }
    for (int r = 0; r < R; ++r) {
      __m512 w0, w1;
      rows[r].load32(k, w0, w1);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm512_fmadd_ps(w0, x0[t], acc[r][t]);
        acc[r][t] = _mm512_fmadd_ps(w1, x1[t], acc[r][t]);
      }
    }
  }
  if constexpr (!Dec::kPacked) {
    if (k + 16 <= K) {
      for (int r = 0; r < R; ++r) {
        __m512 w0 = rows[r].load16(k);
        for (int t = 0; t < T; ++t)
          acc[r][t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[t] + k), acc[r][t]);
      }
      k += 16;
    }
    if (k < K) {
      const __mmask16 m = tailMask(K - k);
      for (int r = 0; r < R; ++r) {
        __m512 w0 = rows[r].load16Masked(k, m);
        for (int t = 0; t < T; ++t)
          acc[r][t] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x[t] + k),
                                      acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      store(io, t, n + r, acc[r][t]);
}

template <class Dec, int T, int R>
KILN_AVX512 void gemvRange(const Dec &dec, const float *const *x,
                           const MatmulRows &io, int64_t nBegin, int64_t nEnd) {
  int64_t n = nBegin;
  for (; n + R <= nEnd; n += R)
    gemvRows<Dec, T, R>(dec, x, io, n);
  for (; n < nEnd; ++n)
    gemvRows<Dec, T, 1>(dec, x, io, n);
}

template <class Dec>
KILN_AVX512 void gemv(const Dec &dec, const MatmulRows &io, int64_t nBegin,
                      int64_t nEnd) {
  const int64_t K = dec.w.cols;
  const float *x[kGemvMaxTokens];
  if constexpr (Dec::kPacked) {
    float *packed = threadScratch(1, size_t(io.tokens * K));
    packPairs(io, 0, io.tokens, K, packed);
    for (int64_t t = 0; t < io.tokens; ++t)
      x[t] = packed + t * K;
  } else {
    for (int64_t t = 0; t < io.tokens; ++t)
      x[t] = io.xRow(t);
  }
  switch (io.tokens) {
  case 1:
    return gemvRange<Dec, 1, Dec::kGemvRows>(dec, x, io, nBegin, nEnd);
  case 2:
    return gemvRange<Dec, 2, 4>(dec, x, io, nBegin, nEnd);
  case 3:
    return gemvRange<Dec, 3, 4>(dec, x, io, nBegin, nEnd);
  default:
    return gemvRange<Dec, 4, 4>(dec, x, io, nBegin, nEnd);
  }
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// Tokens per block at most (tokenBlockSize).
constexpr int64_t kTokenBlock = 128;
constexpr int64_t kRowTile = 32;   // weight rows per decoded tile
constexpr int64_t kColChunk = 512; // columns per decoded tile

/// Decodes rows [n, n + rows) of W, columns [k0, k0 + len) (len a multiple
/// of 16; positions >= K become 0) into tile[r * kColChunk + i].
template <class Dec>
KILN_AVX512 void decodeTile(const Dec &dec, int64_t n, int64_t rows, int64_t k0,
                            int64_t len, float *tile) {
  const int64_t K = dec.w.cols;
  const int64_t kEnd = std::min(K, k0 + len);
  for (int64_t r = 0; r < rows; ++r) {
    const typename Dec::Row row = dec.row(n + r);
    float *out = tile + r * kColChunk - k0;
    int64_t k = k0;
    for (; k + 32 <= kEnd; k += 32) {
      __m512 a, b;
      row.load32(k, a, b);
      _mm512_store_ps(out + k, a);
      _mm512_store_ps(out + k + 16, b);
    }
    if constexpr (!Dec::kPacked) {
      for (; k + 16 <= kEnd; k += 16)
        _mm512_store_ps(out + k, row.load16(k));
      if (k < kEnd) {
        _mm512_store_ps(out + k, row.load16Masked(k, tailMask(kEnd - k)));
        k += 16;
      }
    }
    for (; k < k0 + len; k += 16)
      _mm512_store_ps(out + k, _mm512_setzero_ps());
  }
}

/// acc[i][j] += x_i · w_j over [k0, k0 + len): 4 tokens x 4 rows. Columns
/// at or past K read as zero from x (the tile is already zero there).
KILN_AVX512_INLINE void kernel4x4(const float *const *x, const float *const *w,
                                  int64_t k0, int64_t len, int64_t K,
                                  __m512 (&out)[4][4]) {
  // A local copy: GCC 12 keeps `out`, whose address the caller holds, in
  // memory across the loop once the caller's loops do more than call this
  // (each FMA then stored back: half the speed).
  __m512 acc[4][4];
  for (int t = 0; t < 4; ++t)
    for (int r = 0; r < 4; ++r)
      acc[t][r] = out[t][r];
  const int64_t full = std::min(len, std::max<int64_t>(0, K - k0)) / 16 * 16;
  int64_t i = 0;
  for (; i < full; i += 16) {
    __m512 xv[4], wv[4];
    for (int t = 0; t < 4; ++t)
      xv[t] = _mm512_loadu_ps(x[t] + k0 + i);
    for (int r = 0; r < 4; ++r)
      wv[r] = _mm512_load_ps(w[r] + i);
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < 4; ++r)
        acc[t][r] = _mm512_fmadd_ps(wv[r], xv[t], acc[t][r]);
  }
  for (; i < len; i += 16) {
    const int64_t valid =
        std::max<int64_t>(0, std::min<int64_t>(16, K - k0 - i));
    const __mmask16 m = tailMask(valid);
    __m512 xv[4], wv[4];
    for (int t = 0; t < 4; ++t)
      xv[t] = _mm512_maskz_loadu_ps(m, x[t] + k0 + i);
    for (int r = 0; r < 4; ++r)
      wv[r] = _mm512_load_ps(w[r] + i);
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < 4; ++r)
        acc[t][r] = _mm512_fmadd_ps(wv[r], xv[t], acc[t][r]);
  }
  for (int t = 0; t < 4; ++t)
    for (int r = 0; r < 4; ++r)
      out[t][r] = acc[t][r];
}

template <class Dec>
KILN_AVX512 void gemm(const Dec &dec, const MatmulRows &io, int64_t nBegin,
                      int64_t nEnd) {
  const int64_t K = dec.w.cols;
  const int64_t kPadded = (K + kLanes - 1) / kLanes * kLanes;
  const bool chunked = kPadded > kColChunk;
  float *tile = threadScratch(2, size_t(kRowTile * kColChunk));
  float *lanes = chunked
                     ? threadScratch(3, size_t(kTokenBlock * kRowTile * kLanes))
                     : nullptr;
  float *packed =
      Dec::kPacked ? threadScratch(1, size_t(kTokenBlock * K)) : nullptr;

  const int64_t block = tokenBlockSize(io.tokens, kTokenBlock, 4);
  for (int64_t t0 = 0; t0 < io.tokens; t0 += block) {
    const int64_t tokens = std::min(block, io.tokens - t0);
    const float *x[kTokenBlock];
    if (packed)
      packPairs(io, t0, tokens, K, packed);
    for (int64_t t = 0; t < kTokenBlock; ++t) {
      int64_t src = t < tokens ? t : 0; // padding reuses a valid row
      x[t] = packed ? packed + src * K : io.xRow(t0 + src);
    }

    for (int64_t n0 = nBegin; n0 < nEnd; n0 += kRowTile) {
      const int64_t rows = std::min(kRowTile, nEnd - n0);
      for (int64_t k0 = 0; k0 < kPadded; k0 += kColChunk) {
        const int64_t len = std::min(kColChunk, kPadded - k0);
        const bool first = k0 == 0, last = k0 + len == kPadded;
        decodeTile(dec, n0, rows, k0, len, tile);
        // The next tile of this token block, spread over this one's sweep.
        TilePrefetch ahead = TilePrefetch::next(dec, n0, k0, len, nEnd, kPadded,
                                                kRowTile, kColChunk);
        const int64_t perKernel =
            ahead.perCall((tokens + 3) / 4 * ((rows + 3) / 4));

        for (int64_t tb = 0; tb < tokens; tb += 4) {
          for (int64_t rb = 0; rb < rows; rb += 4) {
            ahead.issue(perKernel);
            const float *w[4];
            for (int r = 0; r < 4; ++r)
              w[r] = tile + (rb + r < rows ? rb + r : 0) * kColChunk;
            __m512 acc[4][4];
            for (int t = 0; t < 4; ++t)
              for (int r = 0; r < 4; ++r)
                acc[t][r] =
                    first
                        ? _mm512_setzero_ps()
                        : _mm512_load_ps(
                              lanes + ((tb + t) * kRowTile + rb + r) * kLanes);
            kernel4x4(x + tb, w, k0, len, K, acc);
            if (!last) {
              for (int t = 0; t < 4; ++t)
                for (int r = 0; r < 4; ++r)
                  _mm512_store_ps(lanes +
                                      ((tb + t) * kRowTile + rb + r) * kLanes,
                                  acc[t][r]);
              continue;
            }
            storeTile(io, t0 + tb, std::min<int64_t>(4, tokens - tb), n0 + rb,
                      std::min<int64_t>(4, rows - rb), acc);
          }
        }
      }
    }
  }
}

template <class Dec>
KILN_AVX512 void run(const Dec &dec, const MatmulRows &io, int64_t nBegin,
                     int64_t nEnd) {
  if (io.tokens <= kGemvMaxTokens)
    gemv(dec, io, nBegin, nEnd);
  else
    gemm(dec, io, nBegin, nEnd);
}

} // namespace

void kiln::cpu::matmulRowsAvx512(const MatmulRows &io, const WeightView &w,
                                 int64_t nBegin, int64_t nEnd) {
  rows::withDecoder<Decoders>(
      w, [&](const auto &dec) { run(dec, io, nBegin, nEnd); });
}

#else // not x86: never selected (cpuHasAvx512() is false), kept for linking.

void kiln::cpu::matmulRowsAvx512(const MatmulRows &io, const WeightView &w,
                                 int64_t nBegin, int64_t nEnd) {
  matmulRowsScalar(io, w, nBegin, nEnd);
}

#endif
