//===- PagedKvCache.cpp ---------------------------------------------------===//

#include "runtime/cpu/attention/PagedKvCache.h"

#include <limits>
#include <new>

using namespace kiln;
using namespace kiln::cpu;

static constexpr std::align_val_t kPageAlign{64};

PagedKvCache::PagedKvCache(int64_t width, CacheElem elem, int64_t pageRows,
                           int64_t maxPages)
    : width_(width), pageRows_(pageRows), maxPages_(maxPages), elem_(elem) {}

PagedKvCache::~PagedKvCache() {
  for (auto &table : pages_)
    for (uint8_t *p : table)
      ::operator delete(p, kPageAlign);
  for (uint8_t *p : free_)
    ::operator delete(p, kPageAlign);
}

int64_t PagedKvCache::pageBytes() const {
  return width_ * pageRows_ * (elem_ == CacheElem::F32 ? 4 : 2);
}

Status PagedKvCache::ensure(int32_t seq, int64_t rows) {
  if (width_ <= 0 || pageRows_ <= 0)
    return makeError(StatusCode::InvalidArgument,
                     "paged KV cache: width and pageRows must be positive, "
                     "got width ",
                     width_, " pageRows ", pageRows_);
  if (seq < 0 || seq >= kMaxSequences)
    return makeError(StatusCode::OutOfRange, "paged KV cache: sequence id ",
                     seq, " outside [0, ", kMaxSequences, ")");
  if (rows < 0 || rows > int64_t(std::numeric_limits<int32_t>::max()) + 1)
    return makeError(StatusCode::OutOfRange, "paged KV cache: ", rows,
                     " rows requested for sequence ", seq,
                     ", expected 0..2^31");
  if (size_t(seq) >= pages_.size()) {
    pages_.resize(size_t(seq) + 1);
    rows_.resize(size_t(seq) + 1, 0);
  }
  std::vector<uint8_t *> &table = pages_[seq];
  const int64_t needed = (rows + pageRows_ - 1) / pageRows_;
  const int64_t missing = needed - int64_t(table.size());
  if (missing > 0 && maxPages_ != kUnlimited &&
      pagesInUse() + missing > maxPages_)
    return makeError(StatusCode::ResourceExhausted, "paged KV cache: ", rows,
                     " rows for sequence ", seq, " need ", missing,
                     " more pages, but ", pagesInUse(), " of at most ",
                     maxPages_, " are in use");
  while (int64_t(table.size()) < needed) {
    uint8_t *page = nullptr;
    if (!free_.empty()) {
      page = free_.back();
      free_.pop_back();
    } else {
      page = static_cast<uint8_t *>(
          ::operator new(size_t(pageBytes()), kPageAlign, std::nothrow));
      if (!page)
        return makeError(StatusCode::ResourceExhausted,
                         "paged KV cache: cannot allocate a page of ",
                         pageBytes(), " bytes");
      ++allocated_;
    }
    table.push_back(page);
  }
  if (rows > rows_[seq])
    rows_[seq] = rows;
  return Status::ok();
}

void PagedKvCache::truncate(int32_t seq, int64_t rows) {
  if (seq < 0 || size_t(seq) >= pages_.size() || rows < 0 || rows >= rows_[seq])
    return;
  rows_[seq] = rows;
  std::vector<uint8_t *> &table = pages_[seq];
  const size_t keep = size_t((rows + pageRows_ - 1) / pageRows_);
  while (table.size() > keep) {
    free_.push_back(table.back());
    table.pop_back();
  }
}

int64_t PagedKvCache::rows(int32_t seq) const {
  if (seq < 0 || size_t(seq) >= rows_.size())
    return 0;
  return rows_[seq];
}

KvView PagedKvCache::view() const {
  KvView v;
  v.width = width_;
  v.elem = elem_;
  v.pageRows = pageRows_;
  v.pages = &pages_;
  return v;
}
