//===- PagedKvCache.h - A simple owner of paged KV-cache memory -*- C++ -*-===//
//
// Owns the pages behind a KvView: one page table per sequence, pages of
// `pageRows` rows allocated 64-byte aligned and recycled through a free list.
// truncate() rolls a sequence back (rejected speculative tokens); the rows
// past the new length are simply forgotten and rewritten by later appends.
//
// Pooled mode (usePool) is the serving engine's: the cache holds a fixed
// array of pages addressed by page id, and the engine, which owns the page
// accounting (runtime/serve/KvPool.h), sets each sequence's page table. Then
// ensure() never allocates (a row past the table is an error) and truncate()
// only shortens the length: the pages stay the engine's.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_PAGEDKVCACHE_H
#define KILN_RUNTIME_CPU_ATTENTION_PAGEDKVCACHE_H

#include "runtime/cpu/Types.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::cpu {

class PagedKvCache {
public:
  static constexpr int64_t kUnlimited = 0;
  /// Sequence ids must stay below this (the page table is indexed by id).
  static constexpr int32_t kMaxSequences = 1 << 20;

  /// `maxPages` bounds the pages allocated at once (kUnlimited: no bound).
  PagedKvCache(int64_t width, CacheElem elem, int64_t pageRows,
               int64_t maxPages = kUnlimited);
  ~PagedKvCache();
  // Views point into this object: it neither copies nor moves.
  PagedKvCache(const PagedKvCache &) = delete;
  PagedKvCache &operator=(const PagedKvCache &) = delete;

  /// Makes rows [0, rows) of `seq` writable; the length becomes
  /// max(length, rows). ResourceExhausted past maxPages or when memory runs
  /// out, InvalidArgument/OutOfRange for bad ids, sizes or geometry.
  Status ensure(int32_t seq, int64_t rows);
  /// Shrinks `seq` to `rows` rows (no-op if already shorter), returning
  /// whole pages past the end to the free list.
  void truncate(int32_t seq, int64_t rows);
  /// Rows currently held by `seq` (0 for unknown ids).
  int64_t rows(int32_t seq) const;

  /// Switches to pooled mode with `pages` pages of storage (reserved, not
  /// touched). Only while no sequence holds rows.
  Status usePool(int64_t pages);
  bool pooled() const { return pool_ != nullptr; }
  /// Pooled mode: `seq`'s pages become pages[0, count) (page ids below the
  /// pool size) and its length `rows` (<= count * pageRows).
  Status setTable(int32_t seq, const int32_t *pages, int64_t count,
                  int64_t rows);
  int64_t pageRows() const { return pageRows_; }
  int64_t width() const { return width_; }
  CacheElem elem() const { return elem_; }
  /// Bytes of one row (one token of one sequence).
  int64_t rowBytes() const {
    return width_ * (elem_ == CacheElem::F32 ? 4 : 2);
  }

  int64_t pagesInUse() const { return allocated_ - int64_t(free_.size()); }
  int64_t pagesAllocated() const { return allocated_; }
  KvView view() const;

private:
  int64_t pageBytes() const;

  int64_t width_, pageRows_, maxPages_;
  CacheElem elem_;
  std::vector<std::vector<uint8_t *>> pages_;
  std::vector<int64_t> rows_;
  std::vector<uint8_t *> free_;
  int64_t allocated_ = 0;
  // Pooled mode: the storage of page id i is pool_ + i * pageBytes().
  uint8_t *pool_ = nullptr;
  int64_t poolPages_ = 0;
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_PAGEDKVCACHE_H
