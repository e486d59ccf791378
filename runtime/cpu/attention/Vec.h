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
#include <type_traits>

/// Defines `void name params` running `name##Body<W> args` (an always-inline
/// function template with those parameters) compiled for the kernel path:
/// AVX-512, AVX2 or baseline x86-64. W is the register tiles' width the
/// Body passes to dotGrid and axpyGrid: vec::kTileWide (4) where 32 vector
/// registers hold 16 floats each, vec::kTileNarrow (2) where 16 registers
/// hold 8 or 4 (a 4 x 4 tile of 16-float sums needs 32 AVX2 registers and
/// spilled: the mid model's prefill spent 2.7x as long in mla_attention).
/// Tiles change no value. One compilation where the build targets AVX-512
/// already or the compiler is not GCC/Clang on x86-64.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&        \
    !defined(__AVX512F__)
#define KILN_ATTN_PATHS(name, params, args)                                    \
  __attribute__((                                                              \
      target("avx512f,avx512bw,avx512vl"))) void name##Avx512 params {         \
    name##Body<::kiln::cpu::vec::kTileWide> args;                              \
  }                                                                            \
  __attribute__((target("avx2"))) void name##Avx2 params {                     \
    name##Body<::kiln::cpu::vec::kTileNarrow> args;                            \
  }                                                                            \
  void name##Baseline params {                                                 \
    name##Body<::kiln::cpu::vec::kTileNarrow> args;                            \
  }                                                                            \
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
#elif defined(__AVX512F__)
#define KILN_ATTN_PATHS(name, params, args)                                    \
  void name params { name##Body<::kiln::cpu::vec::kTileWide> args; }
#else
#define KILN_ATTN_PATHS(name, params, args)                                    \
  void name params { name##Body<::kiln::cpu::vec::kTileNarrow> args; }
#endif

#define KILN_ATTN_INLINE inline __attribute__((always_inline))

namespace kiln::cpu::vec {

/// Register tile widths of KILN_ATTN_PATHS.
constexpr int kTileWide = 4;
constexpr int kTileNarrow = 2;

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

/// 16 floats as two 8-float vectors, lanes 0-7 and 8-15: the narrow tiles'
/// (kTileNarrow) vector. GCC lowers F16x arithmetic for AVX2 through the
/// stack (scalars broadcast by stores, accumulators spilled: most of
/// absorbQuery's time on a Zen 3); two 32-byte halves stay in registers.
/// Same lanes, same operations, same bits as F16x.
typedef float F8x __attribute__((vector_size(32), aligned(4)));
struct F8x2 {
  F8x lo, hi;
};
KILN_ATTN_INLINE F8x2 operator*(F8x2 a, F8x2 b) {
  return {a.lo * b.lo, a.hi * b.hi};
}
KILN_ATTN_INLINE F8x2 operator*(float s, F8x2 b) {
  return {s * b.lo, s * b.hi};
}
KILN_ATTN_INLINE F8x2 &operator+=(F8x2 &a, F8x2 b) {
  a.lo += b.lo;
  a.hi += b.hi;
  return a;
}
KILN_ATTN_INLINE void store(float *p, F8x2 v) {
  std::memcpy(p, &v.lo, sizeof(v.lo));
  std::memcpy(p + 8, &v.hi, sizeof(v.hi));
}
KILN_ATTN_INLINE F8x load8(const float *p) {
  F8x v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
/// 8 BF16 values widened to floats, as load() widens 16.
KILN_ATTN_INLINE F8x load8(const uint16_t *p) {
  typedef uint16_t H8x __attribute__((vector_size(16), aligned(2)));
  typedef uint32_t W8x __attribute__((vector_size(32)));
  H8x h;
  std::memcpy(&h, p, sizeof(h));
  const W8x w = __builtin_convertvector(h, W8x) << 16;
  F8x v;
  std::memcpy(&v, &w, sizeof(v));
  return v;
}

/// The tiles of width W compute with this vector type.
template <int W> struct TileVecOf {
  using type = F8x2;
};
template <> struct TileVecOf<kTileWide> {
  using type = F16x;
};
template <int W> using TileVec = typename TileVecOf<W>::type;

/// 16 floats (or BF16 bits, widened) from p as vector type V.
template <class V, class E> KILN_ATTN_INLINE V loadAs(const E *p) {
  if constexpr (!std::is_same_v<V, F8x2>)
    return load(p);
  else
    return V{load8(p), load8(p + 8)};
}
/// The first n < 16 values of p, zero padded, as vector type V.
template <class V, class E>
KILN_ATTN_INLINE V loadPartialAs(const E *p, int64_t n) {
  E tmp[16] = {};
  std::memcpy(tmp, p, size_t(n) * sizeof(E));
  return loadAs<V>(tmp);
}

/// Lane sum, halving: the same order for every caller (F16x or F8x2).
template <class V> KILN_ATTN_INLINE float sum(V v) {
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
template <int A, int B, class V = F16x, class E>
KILN_ATTN_INLINE void dotTile(const float *const *a, const E *const *b,
                              int64_t n, float *out, int64_t ldOut,
                              int64_t ahead = 0) {
  constexpr int64_t kLine = 64 / sizeof(E);
  V acc[A][B] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    V bv[B];
    for (int y = 0; y < B; ++y) {
      if (i % kLine == 0)
        prefetchAhead(b[y] + i, ahead);
      bv[y] = loadAs<V>(b[y] + i);
    }
    for (int x = 0; x < A; ++x) {
      const V av = loadAs<V>(a[x] + i);
      for (int y = 0; y < B; ++y)
        acc[x][y] += av * bv[y];
    }
  }
  if (i < n) {
    V bv[B];
    for (int y = 0; y < B; ++y)
      bv[y] = loadPartialAs<V>(b[y] + i, n - i);
    for (int x = 0; x < A; ++x) {
      const V av = loadPartialAs<V>(a[x] + i, n - i);
      for (int y = 0; y < B; ++y)
        acc[x][y] += av * bv[y];
    }
  }
  if constexpr (A * B == 16 && !std::is_same_v<V, F8x2>) {
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

template <int A, int W, class E>
KILN_ATTN_INLINE void dotRow(const float *const *a, const E *const *b,
                             int64_t nb, int64_t n, float *out, int64_t ldOut,
                             int64_t ahead) {
  int64_t y = 0;
  for (; y + W <= nb; y += W)
    dotTile<A, W, TileVec<W>>(a, b + y, n, out + y, ldOut, ahead);
  for (; y < nb; ++y)
    dotTile<A, 1, TileVec<W>>(a, b + y, n, out + y, ldOut, ahead);
}

/// out[x * ldOut + y] = a[x] . b[y] for x < na, y < nb, in W x W tiles
/// (kTileWide or kTileNarrow, KILN_ATTN_PATHS); `ahead` as for dotTile (only
/// the first W rows of a prefetch: the rest find the lines in L2).
template <int W, class E>
KILN_ATTN_INLINE void dotGrid(const float *const *a, int64_t na,
                              const E *const *b, int64_t nb, int64_t n,
                              float *out, int64_t ldOut, int64_t ahead = 0) {
  int64_t x = 0;
  for (; x + W <= na; x += W)
    dotRow<W, W>(a + x, b, nb, n, out + x * ldOut, ldOut, x == 0 ? ahead : 0);
  for (; x < na; ++x)
    dotRow<1, W>(a + x, b, nb, n, out + x * ldOut, ldOut, x == 0 ? ahead : 0);
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
/// 16 x C columns of R rows of y stay in registers, as vectors of type V.
/// `x` rows are floats or BF16 bits; `ahead` as for prefetchAhead, on the
/// x rows.
template <int R, int C, class V, class E>
KILN_ATTN_INLINE void axpyTile(float *const *y, const float *a, int64_t lda,
                               const E *const *x, int64_t count, int64_t n,
                               int64_t ahead = 0) {
  constexpr int64_t kLine = 64 / sizeof(E);
  int64_t i = 0;
  for (; i + 16 * C <= n; i += 16 * C) {
    V acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < C; ++k)
        acc[r][k] = loadAs<V>(y[r] + i + 16 * k);
    for (int64_t j = 0; j < count; ++j) {
      for (int64_t l = 0; l < 16 * C; l += kLine)
        prefetchAhead(x[j] + i + l, ahead);
      V xv[C];
      for (int k = 0; k < C; ++k)
        xv[k] = loadAs<V>(x[j] + i + 16 * k);
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < C; ++k)
          acc[r][k] += a[r * lda + j] * xv[k];
    }
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < C; ++k)
        store(y[r] + i + 16 * k, acc[r][k]);
  }
  for (; i + 16 <= n; i += 16) {
    V acc[R];
    for (int r = 0; r < R; ++r)
      acc[r] = loadAs<V>(y[r] + i);
    for (int64_t j = 0; j < count; ++j) {
      const V xv = loadAs<V>(x[j] + i);
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

/// axpyTile over `rows` rows of y, W rows of 16 x W columns at a time (W:
/// kTileWide or kTileNarrow, KILN_ATTN_PATHS); `ahead` as for axpyTile (only
/// the first pass prefetches).
template <int W, class E>
KILN_ATTN_INLINE void axpyGrid(float *const *y, int64_t rows, const float *a,
                               int64_t lda, const E *const *x, int64_t count,
                               int64_t n, int64_t ahead = 0) {
  int64_t r = 0;
  for (; r + W <= rows; r += W)
    axpyTile<W, W, TileVec<W>>(y + r, a + r * lda, lda, x, count, n,
                               r == 0 ? ahead : 0);
  for (; r < rows; ++r)
    axpyTile<1, W, TileVec<W>>(y + r, a + r * lda, lda, x, count, n,
                               r == 0 ? ahead : 0);
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
