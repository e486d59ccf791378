//===- KvPool.h - Page accounting of one device's KV pool -------*- C++ -*-===//
//
// The serving engine's pool of KV-cache pages, as numbers: page ids
// [0, pages), a reference count per page (one per running sequence whose page
// table holds it) and a `cached` mark for pages the prefix cache keeps. Each
// page is in exactly one state:
//
//   free       refs == 0, not cached: on the free list
//   used       refs >  0 (cached or not)
//   evictable  refs == 0, cached: the prefix cache may hand it back
//
// It knows nothing of where pages live: the Model (CPU) or a device holds
// the storage, addressed by the same ids. Deterministic: the free list is a
// stack, so the same calls give the same ids.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_KVPOOL_H
#define KILN_RUNTIME_SERVE_KVPOOL_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::serve {

class KvPool {
public:
  KvPool(int64_t pages, int64_t pageRows);

  int64_t pages() const { return int64_t(refs_.size()); }
  int64_t pageRows() const { return pageRows_; }
  /// Pages needed to hold `rows` rows.
  int64_t pagesFor(int64_t rows) const {
    return (rows + pageRows_ - 1) / pageRows_;
  }

  int64_t freePages() const { return int64_t(free_.size()); }
  int64_t usedPages() const { return used_; }
  int64_t evictablePages() const { return pages() - used_ - freePages(); }

  /// Appends `n` free pages, each with one reference, to `out`; false (and
  /// nothing taken) when fewer than `n` are free.
  bool take(int64_t n, std::vector<int32_t> &out);
  /// One more reference to a used or evictable page.
  void retain(int32_t page);
  /// One reference fewer; an unreferenced page that is not cached is free.
  void release(int32_t page);
  /// Marks `page` kept (or no longer kept) by the prefix cache; an
  /// unreferenced page that stops being cached is free.
  void setCached(int32_t page, bool cached);

  int32_t refs(int32_t page) const { return refs_[size_t(page)]; }
  bool cached(int32_t page) const { return cached_[size_t(page)] != 0; }

  /// "" when the counts and the free list agree with the per-page state,
  /// else what disagrees (tests call this after every step).
  std::string checkInvariants() const;

private:
  int64_t pageRows_;
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;
  std::vector<int32_t> free_;
  int64_t used_ = 0;
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_KVPOOL_H
