//===- MatmulBf16.h - BF16 weights times BF16 activations -------*- C++ -*-===//
//
// Internal to KilnCpu and its attention kernels: the matmul of a BF16
// weight when bf16Activations() is BF16, and the pair form below that MLA
// and the attention core use under the same mode. The weights are used as
// stored, the activations are rounded to BF16, and each pair of products enters
// the sum the way AVX-512 BF16's vdpbf16ps adds it, so that instruction does
// the whole inner loop with no decoding. The order below is the contract; the
// scalar reference and the AVX-512 BF16 kernel follow it bit for bit, so
// results do not depend on the instruction set, the thread count or the batch.
//
// Activations: x becomes bf16(x): an FP32 subnormal reads as zero (sign
// kept), a NaN stays a quiet NaN, anything else rounds to nearest even
// (overflowing to infinity). Rows are padded with zeros to a multiple of
// 32 values.
//
// One output y[t, n]: 16 lanes; lane i takes the pairs (k, k + 1) with
// k = 32 j + 2 i, j increasing, and adds each pair as
//   lane = ftz(fma(x[k + 1], w[k + 1], lane));
//   lane = ftz(fma(x[k], w[k], lane));
// where BF16 subnormals (of x or w) read as zero and ftz() flushes an FP32
// subnormal result to zero of the same sign. This is vdpbf16ps as the Intel
// SDM defines it (odd element first, each step rounded once, DAZ and FTZ);
// on the Zen 5 of bench/RESULTS.md it matched this formula on 4 million
// random cases, subnormals included. Then the lanes are summed as a tree, as
// in Matmul.h.
//
// The pair form, y[r] += sum_j a[r][j] x[j] (rows x[j] scaled and summed, as
// attention sums value rows by their weights): one lane per output column
// l, the terms taken in pairs (j, j + 1) for j = 0, 2, 4, ...:
//   acc = ftz(fma(a[r][j + 1], x[j + 1][l], acc));
//   acc = ftz(fma(a[r][j], x[j][l], acc));
// starting from acc = ftz(y[r][l]) (flushes as above; a count that is odd gets
// a last pair whose second term is zero). That is vdpbf16ps again, with the
// pair (a[r][j], a[r][j + 1]) broadcast and the rows packed so that each
// 32-bit element holds (x[j][l], x[j + 1][l]) (packPairsBf16).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_MATMULBF16_H
#define KILN_RUNTIME_CPU_MATMULBF16_H

#include "runtime/cpu/Matmul.h"

namespace kiln::cpu {

/// bf16(x) as the contract defines it, as BF16 bits.
uint16_t roundToBf16(float x);

/// Rounds x [K] into out [bf16RowLength(K)], zero padded.
void roundRowBf16Scalar(const float *x, int64_t K, uint16_t *out);
void roundRowBf16Avx512(const float *x, int64_t K, uint16_t *out);

/// roundRowBf16Avx512 where useAvx512Bf16(), else the scalar one.
void roundRowBf16(const float *x, int64_t K, uint16_t *out);

/// y rows [nBegin, nEnd) of `io` for the BF16 weight `w`, from the rounded
/// activations: token t's bf16RowLength(w.cols) values at x[t].
void matmulBf16Scalar(const MatmulRows &io, const uint16_t *const *x,
                      const WeightView &w, int64_t nBegin, int64_t nEnd);
void matmulBf16Avx512Bf16(const MatmulRows &io, const uint16_t *const *x,
                          const WeightView &w, int64_t nBegin, int64_t nEnd);

/// matmulRows() for a BF16 weight under Bf16Activations::BF16: rounds the
/// rows of `io` (per call, on the calling thread) unless io.xBf16 holds
/// them, then multiplies.
void matmulRowsBf16(const MatmulRows &io, const WeightView &w, int64_t nBegin,
                    int64_t nEnd);

/// Pairs of a pair-form product: pairs(count) = ceil(count / 2).
inline int64_t bf16Pairs(int64_t count) { return (count + 1) / 2; }

/// Packs rows x[0..count) (n values each) for axpyPairsBf16: pair p at
/// out + p * 2n holds (x[2p][l], x[2p + 1][l]) at 2l and 2l + 1, zero where
/// 2p + 1 == count.
void packPairsBf16(const uint16_t *const *x, int64_t count, int64_t n,
                   uint16_t *out);
void packPairsBf16Scalar(const uint16_t *const *x, int64_t count, int64_t n,
                         uint16_t *out);
void packPairsBf16Avx512(const uint16_t *const *x, int64_t count, int64_t n,
                         uint16_t *out);

/// The pair form: y[r][0..n) for r < rows, terms j < 2 * pairs with
/// coefficient a[r * lda + j] (BF16 bits, zero past the last term) and row
/// x[j] packed at `packed` by packPairsBf16. Picks the kernel as
/// matmulRowsBf16 does.
void axpyPairsBf16(float *const *y, int64_t rows, const uint16_t *a,
                   int64_t lda, const uint16_t *packed, int64_t pairs,
                   int64_t n);
void axpyPairsBf16Scalar(float *const *y, int64_t rows, const uint16_t *a,
                         int64_t lda, const uint16_t *packed, int64_t pairs,
                         int64_t n);
void axpyPairsBf16Avx512Bf16(float *const *y, int64_t rows, const uint16_t *a,
                             int64_t lda, const uint16_t *packed, int64_t pairs,
                             int64_t n);

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_MATMULBF16_H
