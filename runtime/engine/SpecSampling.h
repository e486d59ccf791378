//===- SpecSampling.h - Verification rules of speculative decoding -*- C++ -*-//
//
// One speculative round: the draft model proposed tokens x_1..x_k with
// distributions q_1..q_k; one target forward over the k+1 positions gives
// p_1..p_{k+1}. The round emits the accepted prefix plus one more token:
//
//  * greedy: x_i is accepted while it equals argmax p_i; the first mismatch
//    emits argmax p_i instead; if all k agree, argmax p_{k+1} is the bonus.
//    The output is therefore exactly greedy decoding of the target.
//  * sampling (Leviathan et al. 2023, Chen et al. 2023): x_i is accepted with
//    probability min(1, p_i(x_i) / q_i(x_i)); on rejection the emitted token
//    is drawn from norm(max(0, p_i - q_i)) and the round ends; if all k are
//    accepted the bonus is drawn from p_{k+1}. Each emitted token is then
//    distributed exactly as p_i: the output distribution equals the
//    target's (p and q must be the distributions after the same
//    temperature / top-k / top-p processing).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_SPECSAMPLING_H
#define KILN_RUNTIME_ENGINE_SPECSAMPLING_H

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::engine {

struct SpecRound {
  /// Drafted tokens accepted (0..k), not counting the token the target adds.
  int accepted = 0;
  /// Tokens to emit: the accepted drafts, then the correction or bonus.
  std::vector<int32_t> tokens;
};

/// Index of the largest value; ties go to the lower index.
int32_t argmaxRow(const float *row, int64_t n);

/// Greedy verification. `targetLogits` holds k+1 rows of `vocab` values.
SpecRound verifyGreedy(const int32_t *drafts, int k, const float *targetLogits,
                       int64_t vocab);

/// Sampling verification. `p` holds k+1 rows, `q` k rows, each a
/// probability distribution over `vocab`.
SpecRound verifySampled(const int32_t *drafts, int k, const float *p,
                        const float *q, int64_t vocab, std::mt19937_64 &rng);

/// Draws an index from an (unnormalized, non-negative) weight vector.
int32_t sampleIndex(const float *weights, int64_t n, std::mt19937_64 &rng);

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_SPECSAMPLING_H
