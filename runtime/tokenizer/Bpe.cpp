//===- Bpe.cpp - Byte-level BPE merge engine ------------------------------===//

#include "runtime/tokenizer/Bpe.h"

#include "support/tokenizer/ByteLevel.h"

#include <algorithm>

namespace kiln {

void Bpe::MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < count * 2) {
    capacity *= 2;
    --shift_;
  }
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, MergeValue{0, 0});
  mask_ = capacity - 1;
}

void Bpe::MergeTable::insert(int32_t left, int32_t right, MergeValue value) {
  uint64_t k = key(left, right);
  size_t i = slot(k);
  while (keys_[i] != kEmpty && keys_[i] != k)
    i = (i + 1) & mask_;
  keys_[i] = k;
  values_[i] = value;
}

const Bpe::MergeValue *Bpe::MergeTable::find(int32_t left,
                                             int32_t right) const {
  uint64_t k = key(left, right);
  size_t i = slot(k);
  while (true) {
    uint64_t found = keys_[i];
    if (found == k)
      return &values_[i];
    if (found == kEmpty)
      return nullptr;
    i = (i + 1) & mask_;
  }
}

Result<Bpe>
Bpe::create(const TokenizerData &data,
            const std::unordered_map<std::string, int32_t> &modelIndex) {
  Bpe bpe;
  auto lookup = [&](const std::string &token) -> int32_t {
    auto it = modelIndex.find(token);
    return it == modelIndex.end() ? -1 : it->second;
  };
  std::string single;
  for (int b = 0; b < 256; ++b) {
    single.clear();
    appendByteLevel(std::string_view(reinterpret_cast<const char *>(&b), 1),
                    single);
    bpe.byteIds_[b] = lookup(single);
  }
  if (!data.unkToken.empty()) {
    bpe.unkId_ = lookup(data.unkToken);
    if (bpe.unkId_ < 0)
      return makeError(StatusCode::InvalidArgument, "model.unk_token '",
                       data.unkToken, "' is not in the vocabulary");
  }
  if (data.merges.size() > static_cast<size_t>(kMaxVocabSize))
    return makeError(StatusCode::ResourceExhausted,
                     "model.merges: ", data.merges.size(),
                     " merges exceed the limit of ", kMaxVocabSize);
  bpe.merges_.reserve(data.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const auto &[left, right] = data.merges[rank];
    int32_t leftId = lookup(left), rightId = lookup(right);
    joined = left + right;
    int32_t newId = lookup(joined);
    const std::string *missing = leftId < 0    ? &left
                                 : rightId < 0 ? &right
                                 : newId < 0   ? &joined
                                               : nullptr;
    if (missing)
      return makeError(StatusCode::InvalidArgument, "model.merges[", rank,
                       "] ('", left, "', '", right, "'): token '", *missing,
                       "' is not in the vocabulary");
    bpe.merges_.insert(leftId, rightId,
                       MergeValue{static_cast<int32_t>(rank), newId});
  }
  bpe.ignoreMerges_ = data.ignoreMerges;
  if (bpe.ignoreMerges_)
    bpe.wordIndex_ = modelIndex;
  return bpe;
}

void Bpe::mergeLong(BpeScratch &scratch) const {
  auto &symbols = scratch.symbols;
  size_t n = symbols.size();
  using Candidate = BpeScratch::Candidate;
  auto later = [](const Candidate &a, const Candidate &b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto &heap = scratch.heap;
  heap.clear();
  for (size_t i = 0; i + 1 < n; ++i)
    if (const MergeValue *m = merges_.find(symbols[i].id, symbols[i + 1].id))
      heap.push_back({m->rank, static_cast<int32_t>(i), m->newId});
  std::make_heap(heap.begin(), heap.end(), later);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol &left = symbols[static_cast<size_t>(top.pos)];
    if (left.id < 0 || left.next < 0)
      continue;
    BpeScratch::Symbol &right = symbols[static_cast<size_t>(left.next)];
    const MergeValue *m = merges_.find(left.id, right.id);
    if (!m || m->newId != top.newId)
      continue; // stale: a neighbour changed since this was queued
    left.id = top.newId;
    left.next = right.next;
    if (right.next >= 0)
      symbols[static_cast<size_t>(right.next)].prev = top.pos;
    right.id = -1;
    if (left.prev >= 0) {
      int32_t prevId = symbols[static_cast<size_t>(left.prev)].id;
      if (const MergeValue *pm = merges_.find(prevId, left.id)) {
        heap.push_back({pm->rank, left.prev, pm->newId});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (left.next >= 0) {
      int32_t nextId = symbols[static_cast<size_t>(left.next)].id;
      if (const MergeValue *nm = merges_.find(left.id, nextId)) {
        heap.push_back({nm->rank, top.pos, nm->newId});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
}

void Bpe::mergeShort(BpeScratch &scratch) const {
  using Candidate = BpeScratch::Candidate;
  constexpr int32_t kNone = INT32_MAX;
  auto &symbols = scratch.symbols;
  auto &pairs = scratch.pairs;
  size_t n = symbols.size();
  pairs.resize(n);
  auto pairAt = [&](int32_t i) -> Candidate {
    int32_t next = symbols[static_cast<size_t>(i)].next;
    if (next >= 0)
      if (const MergeValue *m =
              merges_.find(symbols[static_cast<size_t>(i)].id,
                           symbols[static_cast<size_t>(next)].id))
        return {m->rank, i, m->newId};
    return {kNone, i, -1};
  };
  for (size_t i = 0; i < n; ++i)
    pairs[i] = pairAt(static_cast<int32_t>(i));
  while (true) {
    // The lowest rank, leftmost on ties (as the heap orders (rank, pos)).
    int32_t best = -1, bestRank = kNone;
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
      if (pairs[static_cast<size_t>(i)].rank < bestRank) {
        bestRank = pairs[static_cast<size_t>(i)].rank;
        best = i;
      }
    if (best < 0)
      return;
    BpeScratch::Symbol &left = symbols[static_cast<size_t>(best)];
    BpeScratch::Symbol &right = symbols[static_cast<size_t>(left.next)];
    left.id = pairs[static_cast<size_t>(best)].newId;
    left.next = right.next;
    if (right.next >= 0)
      symbols[static_cast<size_t>(right.next)].prev = best;
    right.id = -1;
    pairs[static_cast<size_t>(best)] = pairAt(best);
    if (left.prev >= 0)
      pairs[static_cast<size_t>(left.prev)] = pairAt(left.prev);
  }
}

Status Bpe::encodeWord(std::string_view word, BpeScratch &scratch,
                       std::vector<int32_t> &out) const {
  size_t n = word.size();
  if (n == 0)
    return Status::ok();
  if (n > static_cast<size_t>(INT32_MAX))
    return makeError(StatusCode::ResourceExhausted, "a pre-tokenized word of ",
                     n, " bytes is too long for BPE");
  if (ignoreMerges_) {
    scratch.byteLevel.clear();
    appendByteLevel(word, scratch.byteLevel);
    auto it = wordIndex_.find(scratch.byteLevel);
    if (it != wordIndex_.end()) {
      out.push_back(it->second);
      return Status::ok();
    }
  }

  auto &symbols = scratch.symbols;
  symbols.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t id = byteIds_[static_cast<uint8_t>(word[i])];
    if (id < 0) {
      if (unkId_ < 0)
        return makeError(StatusCode::InvalidArgument, "byte 0x", std::hex,
                         int(static_cast<uint8_t>(word[i])),
                         " has no byte-level token in the vocabulary and "
                         "there is no unk_token");
      id = unkId_;
    }
    symbols[i] = {id, static_cast<int32_t>(i) - 1,
                  i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  if (n == 1) {
    out.push_back(symbols[0].id);
    return Status::ok();
  }

  if (n <= kShortWord)
    mergeShort(scratch);
  else
    mergeLong(scratch);
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
  return Status::ok();
}

} // namespace kiln
