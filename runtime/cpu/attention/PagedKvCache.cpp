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
  if (!pool_) // pooled tables point into pool_
    for (auto &table : pages_)
      for (uint8_t *p : table)
        ::operator delete(p, kPageAlign);
  for (uint8_t *p : free_)
    ::operator delete(p, kPageAlign);
  if (pool_)
    ::operator delete(pool_, kPageAlign);
}

Status PagedKvCache::usePool(int64_t pages) {
  for (int64_t r : rows_)
    if (r > 0)
      return makeError(StatusCode::FailedPrecondition,
                       "paged KV cache: a pool is set up only while no "
                       "sequence holds rows");
  if (pages <= 0 || width_ <= 0 || pageRows_ <= 0)
    return makeError(StatusCode::InvalidArgument, "paged KV cache: pool of ",
                     pages, " pages of ", pageRows_, " rows of width ", width_);
  for (auto &table : pages_)
    for (uint8_t *p : table)
      ::operator delete(p, kPageAlign);
  for (uint8_t *p : free_)
    ::operator delete(p, kPageAlign);
  pages_.clear();
  rows_.clear();
  free_.clear();
  allocated_ = 0;
  if (pool_)
    ::operator delete(pool_, kPageAlign);
  pool_ = static_cast<uint8_t *>(::operator new(
      size_t(pages) * size_t(pageBytes()), kPageAlign, std::nothrow));
  if (!pool_)
    return makeError(StatusCode::ResourceExhausted,
                     "paged KV cache: cannot reserve ", pages, " pages of ",
                     pageBytes(), " bytes");
  poolPages_ = pages;
  return Status::ok();
}

Status PagedKvCache::setTable(int32_t seq, const int32_t *pages, int64_t count,
                              int64_t rows) {
  if (!pool_)
    return makeError(StatusCode::FailedPrecondition,
                     "paged KV cache: setTable needs pooled mode");
  if (seq < 0 || seq >= kMaxSequences)
    return makeError(StatusCode::OutOfRange, "paged KV cache: sequence id ",
                     seq, " outside [0, ", kMaxSequences, ")");
  if (rows < 0 || rows > count * pageRows_)
    return makeError(StatusCode::OutOfRange, "paged KV cache: ", rows,
                     " rows for sequence ", seq, " in ", count, " pages of ",
                     pageRows_);
  if (size_t(seq) >= pages_.size()) {
    pages_.resize(size_t(seq) + 1);
    rows_.resize(size_t(seq) + 1, 0);
  }
  std::vector<uint8_t *> &table = pages_[seq];
  table.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    if (pages[i] < 0 || pages[i] >= poolPages_)
      return makeError(StatusCode::OutOfRange, "paged KV cache: page id ",
                       pages[i], " outside the pool of ", poolPages_);
    table[size_t(i)] = pool_ + size_t(pages[i]) * size_t(pageBytes());
  }
  rows_[seq] = rows;
  return Status::ok();
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
  if (missing > 0 && pool_)
    return makeError(StatusCode::FailedPrecondition, "paged KV cache: ", rows,
                     " rows for sequence ", seq, " need ", needed,
                     " pages, but its page table has ", table.size());
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
  if (pool_)
    return;
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
