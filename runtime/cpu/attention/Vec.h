//===- Vec.h - Small vector loops shared by the attention kernels -*- C++ -*-//
//
// Internal. Written with GCC/Clang vector extensions on 16-float vectors, so
// one source serves every ISA; KILN_ATTN_PATHS compiles a hot function for
// AVX-512, AVX2 and baseline x86-64 and runs the one the kernel path
// (cpu::cpuPath(): the CPU's best, or --cpu-path / $KILN_CPU_PATH) names, so
// forcing a lower path tests the lower attention code too. The loops are
// register-tiled (several queries x several keys per pass) but every dot
// product sums in one fixed order whatever its tile, and the library is
// built without floating-point contraction (no fused multiply-add where the
// source has a multiply and an add), so results depend neither on how work
// is split across threads nor on the path.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_VEC_H
#define KILN_RUNTIME_CPU_ATTENTION_VEC_H

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Types.h"

#include <cstdint>
#include <cstring>

/// Defines `void name params` running `name##Body args` (an always-inline
/// function with those parameters) compiled for the kernel path: AVX-512,
/// AVX2 or baseline x86-64. One compilation where the build targets
/// AVX-512 already or the compiler is not GCC/Clang on x86-64.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&        \
    !defined(__AVX512F__)
#define KILN_ATTN_PATHS(name, params, args)                                    \
  __attribute__((                                                              \
      target("avx512f,avx512bw,avx512vl"))) void name##Avx512 params {         \
    name##Body args;                                                           \
  }                                                                            \
  __attribute__((target("avx2"))) void name##Avx2 params { name##Body args; }  \
  void name##Baseline params { name##Body args; }                              \
  void name params {                                                           \
    switch (::kiln::cpu::cpuPath()) {                                          \
    case ::kiln::cpu::CpuPath::Avx512:                                         \
      return name##Avx512 args;                                                \
    case ::kiln::cpu::CpuPath::Avx2:                                           \
      return name##Avx2 args;                                                  \
    case ::kiln::cpu::CpuPath::Scalar:                                         \
      break;                                                                   \
    }                                                                          \
    name##Baseline args;                                                       \
  }
#else
#define KILN_ATTN_PATHS(name, params, args)                                    \
  void name params { name##Body args; }
#endif

#define KILN_ATTN_INLINE inline __attribute__((always_inline))

namespace kiln::cpu::vec {

/// 16 floats: one AVX-512 register, two AVX2 or four SSE registers.
typedef float F16x __attribute__((vector_size(64), aligned(4)));

KILN_ATTN_INLINE F16x load(const float *p) {
  F16x v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
KILN_ATTN_INLINE void store(float *p, F16x v) { std::memcpy(p, &v, sizeof(v)); }
/// The first n < 16 floats of p, zero padded.
KILN_ATTN_INLINE F16x loadPartial(const float *p, int64_t n) {
  float tmp[16] = {};
  std::memcpy(tmp, p, size_t(n) * sizeof(float));
  return load(tmp);
}
/// 16 BF16 values (raw bits) widened to floats: exact, so a tile that reads
/// BF16 rows this way computes what it computes on their float copies.
KILN_ATTN_INLINE F16x load(const uint16_t *p) {
  typedef uint16_t H16x __attribute__((vector_size(32), aligned(2)));
  typedef uint32_t W16x __attribute__((vector_size(64)));
  H16x h;
  std::memcpy(&h, p, sizeof(h));
  const W16x w = __builtin_convertvector(h, W16x) << 16;
  F16x v;
  std::memcpy(&v, &w, sizeof(v));
  return v;
}
KILN_ATTN_INLINE F16x loadPartial(const uint16_t *p, int64_t n) {
  uint16_t tmp[16] = {};
  std::memcpy(tmp, p, size_t(n) * sizeof(uint16_t));
  return load(tmp);
}
KILN_ATTN_INLINE float element(const float *p) { return *p; }
KILN_ATTN_INLINE float element(const uint16_t *p) { return bf16ToFloat(*p); }

/// Lane sum, halving: the same order for every caller.
KILN_ATTN_INLINE float sum(F16x v) {
  float lanes[16];
  store(lanes, v);
  for (int w = 8; w; w >>= 1)
    for (int j = 0; j < w; ++j)
      lanes[j] += lanes[j + w];
  return lanes[0];
}

/// Lanes of two vectors, a's numbered 0-15 and b's 16-31, in mask order.
typedef int32_t I16x __attribute__((vector_size(64)));
#if defined(__clang__)
#define KILN_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define KILN_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, I16x{__VA_ARGS__})
#endif

/// Lane k of the result is sum(v[k]), for 16 vectors at once: every sum
/// makes the additions sum() makes, in its order (lane j plus lane j + w,
/// w = 8, 4, 2, 1), so the bits are sum()'s, at a fraction of the
/// instructions (pairs of vectors are folded together at each step).
KILN_ATTN_INLINE F16x sum16(const F16x v[16]) {
  F16x r[8], s[4], t[2];
  for (int k = 0; k < 8; ++k)
    r[k] = KILN_SHUFFLE(v[2 * k], v[2 * k + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17,
                        18, 19, 20, 21, 22, 23) +
           KILN_SHUFFLE(v[2 * k], v[2 * k + 1], 8, 9, 10, 11, 12, 13, 14, 15,
                        24, 25, 26, 27, 28, 29, 30, 31);
  for (int k = 0; k < 4; ++k)
    s[k] = KILN_SHUFFLE(r[2 * k], r[2 * k + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16,
                        17, 18, 19, 24, 25, 26, 27) +
           KILN_SHUFFLE(r[2 * k], r[2 * k + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20,
                        21, 22, 23, 28, 29, 30, 31);
  for (int k = 0; k < 2; ++k)
    t[k] = KILN_SHUFFLE(s[2 * k], s[2 * k + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16,
                        17, 20, 21, 24, 25, 28, 29) +
           KILN_SHUFFLE(s[2 * k], s[2 * k + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18,
                        19, 22, 23, 26, 27, 30, 31);
  return KILN_SHUFFLE(t[0], t[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
                      26, 28, 30) +
         KILN_SHUFFLE(t[0], t[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25,
                      27, 29, 31);
}

/// With ahead > 0, asks for the cache line `ahead` elements on from p into
/// L2: the weight panels of Mla.cpp are read once per step in decode, and
/// their rows' successors are `ahead` elements on. Changes no value.
template <class E>
KILN_ATTN_INLINE void prefetchAhead(const E *p, int64_t ahead) {
  if (ahead > 0)
    __builtin_prefetch(p + ahead, 0, 2);
}

/// out[x * ldOut + y] = a[x] . b[y] (n long) for x < A, y < B: A + B loads
/// feed A * B multiply-adds. Every dot in this file sums the same way
/// (16 lanes over the columns, then sum()), so a dot's value does not depend
/// on the tile it was computed in. `b` rows are floats or BF16 bits; `ahead`
/// as for prefetchAhead, on the b rows.
template <int A, int B, class E>
KILN_ATTN_INLINE void dotTile(const float *const *a, const E *const *b,
                              int64_t n, float *out, int64_t ldOut,
                              int64_t ahead = 0) {
  constexpr int64_t kLine = 64 / sizeof(E);
  F16x acc[A][B] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    F16x bv[B];
    for (int y = 0; y < B; ++y) {
      if (i % kLine == 0)
        prefetchAhead(b[y] + i, ahead);
      bv[y] = load(b[y] + i);
    }
    for (int x = 0; x < A; ++x) {
      const F16x av = load(a[x] + i);
      for (int y = 0; y < B; ++y)
        acc[x][y] += av * bv[y];
    }
  }
  if (i < n) {
    F16x bv[B];
    for (int y = 0; y < B; ++y)
      bv[y] = loadPartial(b[y] + i, n - i);
    for (int x = 0; x < A; ++x) {
      const F16x av = loadPartial(a[x] + i, n - i);
      for (int y = 0; y < B; ++y)
        acc[x][y] += av * bv[y];
    }
  }
  if constexpr (A * B == 16) {
    float lanes[16];
    store(lanes, sum16(&acc[0][0]));
    for (int x = 0; x < A; ++x)
      for (int y = 0; y < B; ++y)
        out[x * ldOut + y] = lanes[x * B + y];
  } else {
    for (int x = 0; x < A; ++x)
      for (int y = 0; y < B; ++y)
        out[x * ldOut + y] = sum(acc[x][y]);
  }
}

template <int A, class E>
KILN_ATTN_INLINE void dotRow(const float *const *a, const E *const *b,
                             int64_t nb, int64_t n, float *out, int64_t ldOut,
                             int64_t ahead) {
  int64_t y = 0;
  for (; y + 4 <= nb; y += 4)
    dotTile<A, 4>(a, b + y, n, out + y, ldOut, ahead);
  for (; y < nb; ++y)
    dotTile<A, 1>(a, b + y, n, out + y, ldOut, ahead);
}

/// out[x * ldOut + y] = a[x] . b[y] for x < na, y < nb, in 4 x 4 tiles;
/// `ahead` as for dotTile (only the first 4 rows of a prefetch: the rest
/// find the lines in L2).
template <class E>
KILN_ATTN_INLINE void dotGrid(const float *const *a, int64_t na,
                              const E *const *b, int64_t nb, int64_t n,
                              float *out, int64_t ldOut, int64_t ahead = 0) {
  int64_t x = 0;
  for (; x + 4 <= na; x += 4)
    dotRow<4>(a + x, b, nb, n, out + x * ldOut, ldOut, x == 0 ? ahead : 0);
  for (; x < na; ++x)
    dotRow<1>(a + x, b, nb, n, out + x * ldOut, ldOut, x == 0 ? ahead : 0);
}

KILN_ATTN_INLINE float dot(const float *a, const float *b, int64_t n) {
  float out;
  dotTile<1, 1>(&a, &b, n, &out, 1);
  return out;
}

/// y += a * x
KILN_ATTN_INLINE void axpy(float *y, float a, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

/// y[r] += sum_j a[r * lda + j] * x[j] for r < R, j < count: per element the
/// terms are added in order j = 0, 1, ... (as repeated axpy would), while
/// 64 columns of R rows of y stay in registers. `x` rows are floats or BF16
/// bits; `ahead` as for prefetchAhead, on the x rows.
template <int R, class E>
KILN_ATTN_INLINE void axpyTile(float *const *y, const float *a, int64_t lda,
                               const E *const *x, int64_t count, int64_t n,
                               int64_t ahead = 0) {
  constexpr int64_t kLine = 64 / sizeof(E);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    F16x acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k)
        acc[r][k] = load(y[r] + i + 16 * k);
    for (int64_t j = 0; j < count; ++j) {
      for (int64_t l = 0; l < 64; l += kLine)
        prefetchAhead(x[j] + i + l, ahead);
      F16x xv[4];
      for (int k = 0; k < 4; ++k)
        xv[k] = load(x[j] + i + 16 * k);
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < 4; ++k)
          acc[r][k] += a[r * lda + j] * xv[k];
    }
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k)
        store(y[r] + i + 16 * k, acc[r][k]);
  }
  for (; i + 16 <= n; i += 16) {
    F16x acc[R];
    for (int r = 0; r < R; ++r)
      acc[r] = load(y[r] + i);
    for (int64_t j = 0; j < count; ++j) {
      const F16x xv = load(x[j] + i);
      for (int r = 0; r < R; ++r)
        acc[r] += a[r * lda + j] * xv;
    }
    for (int r = 0; r < R; ++r)
      store(y[r] + i, acc[r]);
  }
  for (; i < n; ++i)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < count; ++j)
        y[r][i] += a[r * lda + j] * element(x[j] + i);
}

/// axpyTile over `rows` rows of y, four at a time; `ahead` as for
/// axpyTile (only the first pass prefetches).
template <class E>
KILN_ATTN_INLINE void axpyGrid(float *const *y, int64_t rows, const float *a,
                               int64_t lda, const E *const *x, int64_t count,
                               int64_t n, int64_t ahead = 0) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    axpyTile<4>(y + r, a + r * lda, lda, x, count, n, r == 0 ? ahead : 0);
  for (; r < rows; ++r)
    axpyTile<1>(y + r, a + r * lda, lda, x, count, n, r == 0 ? ahead : 0);
}

KILN_ATTN_INLINE void scale(float *y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] *= a;
}

KILN_ATTN_INLINE void bf16ToF32(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}

/// Columns [col, col + n) of a cache row as floats: a pointer into the cache
/// for F32 rows, else converted into `buffer`.
KILN_ATTN_INLINE const float *cacheColumns(const KvView &view,
                                           const uint8_t *row, int64_t col,
                                           int64_t n, float *buffer) {
  if (view.elem == CacheElem::F32)
    return reinterpret_cast<const float *>(row) + col;
  bf16ToF32(reinterpret_cast<const uint16_t *>(row) + col, buffer, n);
  return buffer;
}

} // namespace kiln::cpu::vec

#endif // KILN_RUNTIME_CPU_ATTENTION_VEC_H
