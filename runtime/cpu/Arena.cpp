//===- Arena.cpp ----------------------------------------------------------===//

#include "runtime/cpu/Arena.h"

#include <algorithm>
#include <new>

using namespace kiln::cpu;

static size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

Arena::~Arena() { freeBlocks(); }

void Arena::freeBlocks() {
  for (Block &b : blocks_)
    ::operator delete(b.data, std::align_val_t(kAlign));
  blocks_.clear();
}

void Arena::addBlock(size_t minBytes) {
  size_t size = std::max(roundUp(minBytes, kAlign), capacity());
  size = std::max<size_t>(size, size_t(1) << 16);
  auto *data =
      static_cast<std::byte *>(::operator new(size, std::align_val_t(kAlign)));
  ++systemAllocations_;
  blocks_.push_back({data, size});
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    size_t total = capacity();
    freeBlocks();
    addBlock(total);
  }
  current_ = 0;
  used_ = 0;
}

void *Arena::allocBytes(size_t bytes) {
  bytes = roundUp(std::max<size_t>(bytes, 1), kAlign);
  // Move on to the next kept block (after a rewind) or grow a new one.
  while (current_ < blocks_.size() && used_ + bytes > blocks_[current_].size) {
    ++current_;
    used_ = 0;
  }
  if (current_ == blocks_.size())
    addBlock(bytes);
  void *p = blocks_[current_].data + used_;
  used_ += bytes;
  return p;
}

size_t Arena::capacity() const {
  size_t total = 0;
  for (const Block &b : blocks_)
    total += b.size;
  return total;
}
