//===- MatmulAvx2Gemm.cpp - Tiled AVX2 GEMM for prefill
//--------------------===//
//
// The AVX2 path's GEMM (more than kGemvMaxTokens tokens), in Matmul.h's
// order. Per thread, for each block of up to kTokenBlock tokens, each
// kRowTile x kColChunk tile of W is decoded to FP32 once and swept by a
// 3 x 3 (tokens x rows) register kernel; partial lanes persist between
// column chunks.
//
// An output's 16 lanes take two 8-float registers, so a 3 x 3 block of
// outputs would need 18 accumulators, more than AVX2's 16 registers. Lanes
// 0-7 and 8-15 never meet before the final tree sum, so the decoded tile
// and the token rows are stored half-major: of every 16 columns, elements
// 0-7 go to the row's low half and 8-15 to its high half, each half
// contiguous. The kernel runs the low halves, then the high halves, with 9
// accumulators, 3 weight and 3 activation registers: 9 fused multiply-adds
// per 6 loads, each lane's products still added in increasing k. While a
// tile is swept, the next one's lines are asked for into L2 (TilePrefetch).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/MatmulKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include "runtime/cpu/Avx2Decode.h"
#include "runtime/cpu/TilePrefetch.h"

using namespace kiln;
using namespace kiln::cpu;
using namespace kiln::cpu::avx2;

namespace {

constexpr int64_t kTile = 3;        // tokens and rows of the register kernel
constexpr int64_t kTokenBlock = 96; // tokens per block at most (x kTile)
constexpr int64_t kRowTile = 24;    // weight rows per decoded tile (x kTile)
constexpr int64_t kColChunk = 256;  // columns per decoded tile (x 16)
constexpr int64_t kHalf = kColChunk / 2;

/// Where column c of a half-major row goes, its halves `halfLen` apart.
inline int64_t halfMajor(int64_t c, int64_t halfLen) {
  return (c & 8 ? halfLen : 0) + (c >> 4) * 8 + (c & 7);
}

/// Tokens [t0, t0 + T) of `io` as half-major rows of kPadded columns
/// (zero past K) into out[t * kPadded]; MXFP4 (`pairs`) first permuted
/// within each 32-block to evens then odds, as its decoder gives weights.
void packHalves(const MatmulRows &io, int64_t t0, int64_t T, int64_t K,
                int64_t kPadded, bool pairs, float *out) {
  const int64_t halfLen = kPadded / 2;
  for (int64_t t = 0; t < T; ++t) {
    const float *x = io.xRow(t0 + t);
    float *lo = out + t * kPadded, *hi = lo + halfLen;
    if (pairs) { // K is whole 32s; block b is groups 2b and 2b + 1
      for (int64_t b = 0; b < K / 32; ++b) {
        const float *s = x + 32 * b;
        float *l = lo + 16 * b, *h = hi + 16 * b;
        for (int i = 0; i < 8; ++i) {
          l[i] = s[2 * i];          // permuted 0-7: evens of [0, 16)
          h[i] = s[16 + 2 * i];     // 8-15: evens of [16, 32)
          l[8 + i] = s[2 * i + 1];  // 16-23: odds of [0, 16)
          h[8 + i] = s[17 + 2 * i]; // 24-31: odds of [16, 32)
        }
      }
      continue;
    }
    int64_t g = 0;
    for (; 16 * g + 16 <= K; ++g) {
      std::memcpy(lo + 8 * g, x + 16 * g, 8 * sizeof(float));
      std::memcpy(hi + 8 * g, x + 16 * g + 8, 8 * sizeof(float));
    }
    if (16 * g < K) { // the last, partial group, zero padded
      float buf[16] = {};
      std::copy_n(x + 16 * g, K - 16 * g, buf);
      std::memcpy(lo + 8 * g, buf, 8 * sizeof(float));
      std::memcpy(hi + 8 * g, buf + 8, 8 * sizeof(float));
    }
  }
}

/// Decodes rows [n, n + rows) of W, columns [c0, c0 + len) (len a multiple
/// of 16; columns >= K become 0), into half-major tile rows of kColChunk.
template <class Dec>
KILN_AVX2 void decodeTile(const Dec &dec, int64_t n, int64_t rows, int64_t c0,
                          int64_t len, float *tile) {
  const int64_t K = dec.w.cols;
  const int64_t kEnd = std::min(K, c0 + len);
  for (int64_t r = 0; r < rows; ++r) {
    const typename Dec::Row row = dec.row(n + r);
    float *lo = tile + r * kColChunk, *hi = lo + kHalf;
    int64_t k = c0;
    for (; k + 32 <= kEnd; k += 32) {
      __m256 v[4];
      row.load32(k, v);
      const int64_t at = (k - c0) / 2;
      _mm256_store_ps(lo + at, v[0]);
      _mm256_store_ps(hi + at, v[1]);
      _mm256_store_ps(lo + at + 8, v[2]);
      _mm256_store_ps(hi + at + 8, v[3]);
    }
    for (; k < c0 + len; k += 32) { // not MXFP4: its K is whole 32s
      alignas(32) float buf[32] = {};
      if (k < kEnd)
        row.tail(k, std::min<int64_t>(32, kEnd - k), buf);
      const int64_t count = std::min<int64_t>(32, c0 + len - k);
      for (int64_t i = 0; i < count; ++i)
        lo[halfMajor(k - c0 + i, kHalf)] = buf[i];
    }
  }
}

/// acc[t][r] += x_t · w_r over `count` (a multiple of 8) contiguous floats.
KILN_AVX2_INLINE void kernel3x3(const float *const *x, const float *const *w,
                                int64_t count, __m256 (&out)[kTile][kTile]) {
  // A local copy keeps the accumulators in registers (see MatmulAvx512.cpp's
  // kernel4x4).
  __m256 acc[kTile][kTile];
  for (int t = 0; t < kTile; ++t)
    for (int r = 0; r < kTile; ++r)
      acc[t][r] = out[t][r];
  const float *x0 = x[0], *x1 = x[1], *x2 = x[2];
  const float *w0 = w[0], *w1 = w[1], *w2 = w[2];
  for (int64_t i = 0; i < count; i += 8) {
    const __m256 xv[kTile] = {_mm256_loadu_ps(x0 + i), _mm256_loadu_ps(x1 + i),
                              _mm256_loadu_ps(x2 + i)};
    const __m256 wv[kTile] = {_mm256_load_ps(w0 + i), _mm256_load_ps(w1 + i),
                              _mm256_load_ps(w2 + i)};
    for (int t = 0; t < kTile; ++t)
      for (int r = 0; r < kTile; ++r)
        acc[t][r] = _mm256_fmadd_ps(wv[r], xv[t], acc[t][r]);
  }
  for (int t = 0; t < kTile; ++t)
    for (int r = 0; r < kTile; ++r)
      out[t][r] = acc[t][r];
}

template <class Dec>
KILN_AVX2 void gemm(const Dec &dec, const MatmulRows &io, int64_t nBegin,
                    int64_t nEnd) {
  const int64_t K = dec.w.cols;
  const int64_t kPadded = (K + kLanes - 1) / kLanes * kLanes;
  const int64_t halfK = kPadded / 2;
  const bool chunked = kPadded > kColChunk;
  float *tile = threadScratch(2, size_t(kRowTile * kColChunk));
  float *lanes = chunked
                     ? threadScratch(3, size_t(kTokenBlock * kRowTile * kLanes))
                     : nullptr;
  float *packed = threadScratch(1, size_t(kTokenBlock * kPadded));

  const int64_t block = tokenBlockSize(io.tokens, kTokenBlock, kTile);
  for (int64_t t0 = 0; t0 < io.tokens; t0 += block) {
    const int64_t tokens = std::min(block, io.tokens - t0);
    packHalves(io, t0, tokens, K, kPadded, Dec::kPacked, packed);
    const float *x[kTokenBlock];
    for (int64_t t = 0; t < kTokenBlock; ++t) // padding reuses a valid row
      x[t] = packed + (t < tokens ? t : 0) * kPadded;

    for (int64_t n0 = nBegin; n0 < nEnd; n0 += kRowTile) {
      const int64_t rows = std::min(kRowTile, nEnd - n0);
      for (int64_t c0 = 0; c0 < kPadded; c0 += kColChunk) {
        const int64_t len = std::min(kColChunk, kPadded - c0);
        const bool first = c0 == 0, last = c0 + len == kPadded;
        decodeTile(dec, n0, rows, c0, len, tile);
        // The next tile's lines, spread over this one's sweep.
        TilePrefetch ahead = TilePrefetch::next(dec, n0, c0, len, nEnd, kPadded,
                                                kRowTile, kColChunk);
        const int64_t perKernel = ahead.perCall((tokens + kTile - 1) / kTile *
                                                ((rows + kTile - 1) / kTile));
        for (int64_t tb = 0; tb < tokens; tb += kTile) {
          for (int64_t rb = 0; rb < rows; rb += kTile) {
            ahead.issue(perKernel);
            __m256 low[kTile][kTile];
            for (int half = 0; half < 2; ++half) {
              const float *xs[kTile], *ws[kTile];
              for (int i = 0; i < kTile; ++i) {
                xs[i] = x[tb + i] + half * halfK + c0 / 2;
                ws[i] = tile + (rb + i < rows ? rb + i : 0) * kColChunk +
                        half * kHalf;
              }
              __m256 acc[kTile][kTile];
              for (int t = 0; t < kTile; ++t)
                for (int r = 0; r < kTile; ++r)
                  acc[t][r] =
                      first ? _mm256_setzero_ps()
                            : _mm256_load_ps(lanes +
                                             ((tb + t) * kRowTile + rb + r) *
                                                 kLanes +
                                             half * 8);
              kernel3x3(xs, ws, len / 2, acc);
              for (int t = 0; t < kTile; ++t)
                for (int r = 0; r < kTile; ++r) {
                  if (!last)
                    _mm256_store_ps(
                        lanes + ((tb + t) * kRowTile + rb + r) * kLanes +
                            half * 8,
                        acc[t][r]);
                  else if (half == 0)
                    low[t][r] = acc[t][r];
                  else if (tb + t < tokens && rb + r < rows) {
                    const float sum = treeSum(low[t][r], acc[t][r]);
                    float *out = io.yRow(t0 + tb + t) + n0 + rb + r;
                    *out = io.accumulate ? *out + sum : sum;
                  }
                }
            }
          }
        }
      }
    }
  }
}

} // namespace

void kiln::cpu::matmulRowsAvx2Gemm(const MatmulRows &io, const WeightView &w,
                                   int64_t nBegin, int64_t nEnd) {
  rows::withDecoder<Decoders>(
      w, [&](const auto &dec) { gemm(dec, io, nBegin, nEnd); });
}

#else // not x86: never selected, kept for linking.

void kiln::cpu::matmulRowsAvx2Gemm(const MatmulRows &io, const WeightView &w,
                                   int64_t nBegin, int64_t nEnd) {
  matmulRowsScalar(io, w, nBegin, nEnd);
}

#endif
