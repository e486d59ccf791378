//===- KvPool.cpp ---------------------------------------------------------===//

#include "runtime/serve/KvPool.h"

#include <cassert>

using namespace kiln::serve;

KvPool::KvPool(int64_t pages, int64_t pageRows)
    : pageRows_(pageRows), refs_(size_t(pages), 0), cached_(size_t(pages), 0) {
  // Highest id at the bottom: pages are handed out 0, 1, 2, ...
  free_.reserve(size_t(pages));
  for (int64_t p = pages - 1; p >= 0; --p)
    free_.push_back(int32_t(p));
}

bool KvPool::take(int64_t n, std::vector<int32_t> &out) {
  if (n > freePages())
    return false;
  for (int64_t i = 0; i < n; ++i) {
    int32_t p = free_.back();
    free_.pop_back();
    refs_[size_t(p)] = 1;
    ++used_;
    out.push_back(p);
  }
  return true;
}

void KvPool::retain(int32_t page) {
  assert(refs_[size_t(page)] > 0 || cached_[size_t(page)]);
  if (refs_[size_t(page)]++ == 0)
    ++used_;
}

void KvPool::release(int32_t page) {
  assert(refs_[size_t(page)] > 0);
  if (--refs_[size_t(page)] > 0)
    return;
  --used_;
  if (!cached_[size_t(page)])
    free_.push_back(page);
}

void KvPool::setCached(int32_t page, bool cached) {
  bool was = cached_[size_t(page)] != 0;
  cached_[size_t(page)] = cached ? 1 : 0;
  if (was && !cached && refs_[size_t(page)] == 0)
    free_.push_back(page);
}

std::string KvPool::checkInvariants() const {
  std::vector<uint8_t> onList(refs_.size(), 0);
  for (int32_t p : free_) {
    if (p < 0 || p >= pages())
      return "free list holds page id " + std::to_string(p);
    if (onList[size_t(p)]++)
      return "page " + std::to_string(p) + " is on the free list twice";
  }
  int64_t used = 0;
  for (size_t p = 0; p < refs_.size(); ++p) {
    if (refs_[p] < 0)
      return "page " + std::to_string(p) + " has " + std::to_string(refs_[p]) +
             " references";
    bool shouldBeFree = refs_[p] == 0 && !cached_[p];
    if (shouldBeFree != bool(onList[p]))
      return "page " + std::to_string(p) + " (refs " +
             std::to_string(refs_[p]) + ", cached " +
             std::to_string(int(cached_[p])) + ") is " +
             (onList[p] ? "" : "not ") + "on the free list";
    used += refs_[p] > 0;
  }
  if (used != used_)
    return "used count " + std::to_string(used_) + " but " +
           std::to_string(used) + " pages are referenced";
  return "";
}
