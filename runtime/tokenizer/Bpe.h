//===- Bpe.h - Byte-level BPE merge engine ----------------------*- C++ -*-===//
//
// Encodes one pre-tokenized word (raw bytes) into vocabulary ids by applying
// the merges in rank order, leftmost first among equal ranks, exactly like
// Hugging Face's BPE model: a min-heap of candidate merges over a linked list
// of symbols, O(n log n) per word.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOKENIZER_BPE_H
#define KILN_RUNTIME_TOKENIZER_BPE_H

#include "support/tokenizer/TokenizerData.h"

#include <array>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

/// Reusable per-call buffers for Bpe::encodeWord.
struct BpeScratch {
  struct Symbol {
    int32_t id;   // -1 once merged into its left neighbour
    int32_t prev; // index of the previous live symbol, -1 for none
    int32_t next; // index of the next live symbol, -1 for none
  };
  struct Candidate {
    int32_t rank;
    int32_t pos; // left symbol of the pair
    int32_t newId;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<Candidate> pairs; // short words: the merge of (i, next(i))
  std::string byteLevel;
};

class Bpe {
public:
  /// `modelIndex` maps byte-level model-vocabulary strings to ids. Fails if
  /// a merge names a token (or produces one) missing from the vocabulary.
  static Result<Bpe>
  create(const TokenizerData &data,
         const std::unordered_map<std::string, int32_t> &modelIndex);

  /// Appends the ids of `word` (raw bytes, non-empty) to `out`.
  Status encodeWord(std::string_view word, BpeScratch &scratch,
                    std::vector<int32_t> &out) const;

private:
  /// Words up to this many bytes are merged by scanning for the lowest rank
  /// (O(n^2), no heap); longer ones use the heap.
  static constexpr size_t kShortWord = 32;

  void mergeShort(BpeScratch &scratch) const;
  void mergeLong(BpeScratch &scratch) const;

  struct MergeValue {
    int32_t rank;
    int32_t newId;
  };
  /// Open-addressing hash map from an id pair to its merge.
  class MergeTable {
  public:
    void reserve(size_t count);
    /// Inserts or overwrites (a later duplicate merge wins, as in HF).
    void insert(int32_t left, int32_t right, MergeValue value);
    const MergeValue *find(int32_t left, int32_t right) const;

  private:
    static uint64_t key(int32_t left, int32_t right) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
             static_cast<uint32_t>(right);
    }
    size_t slot(uint64_t k) const {
      return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    std::vector<uint64_t> keys_;
    std::vector<MergeValue> values_;
    size_t mask_ = 0;
    unsigned shift_ = 60;
  };

  std::array<int32_t, 256> byteIds_{};
  MergeTable merges_;
  int32_t unkId_ = -1;
  bool ignoreMerges_ = false;
  std::unordered_map<std::string, int32_t> wordIndex_; // ignore_merges only
};

} // namespace kiln

#endif // KILN_RUNTIME_TOKENIZER_BPE_H
