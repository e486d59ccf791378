//===- Arena.h - Reusable scratch memory for the CPU kernels ----*- C++ -*-===//
//
// Kernels that need temporary buffers take an Arena owned by the caller (one
// per executing context). A kernel opens an Arena::Scope, carves what it
// needs, and gives it back when the scope ends. Memory is kept, so once the
// arena has seen the largest call it does not allocate again; reset() merges
// the blocks grown so far into one.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ARENA_H
#define KILN_RUNTIME_CPU_ARENA_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::cpu {

class Arena {
public:
  /// Alignment of every allocation, in bytes (a cache line).
  static constexpr size_t kAlign = 64;

  Arena() = default;
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  /// `bytes` of uninitialized memory aligned to kAlign, valid until the
  /// enclosing Scope ends or reset().
  void *allocBytes(size_t bytes);

  template <typename T> T *alloc(int64_t count) {
    return static_cast<T *>(allocBytes(size_t(count) * sizeof(T)));
  }

  /// Forgets every allocation. Blocks grown since the last reset are merged
  /// into one, so the next round of the same size fits without allocating.
  void reset();

  /// A position to come back to.
  struct Mark {
    size_t block = 0;
    size_t used = 0;
  };
  Mark mark() const { return {current_, used_}; }
  void rewind(Mark m) {
    current_ = m.block;
    used_ = m.used;
  }

  /// Gives back, on destruction, everything allocated since construction.
  class Scope {
  public:
    explicit Scope(Arena &arena) : arena_(arena), mark_(arena.mark()) {}
    ~Scope() { arena_.rewind(mark_); }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Arena &arena_;
    Mark mark_;
  };

  /// Total bytes held.
  size_t capacity() const;
  /// System allocations made so far (for tests).
  int64_t systemAllocations() const { return systemAllocations_; }

private:
  struct Block {
    std::byte *data;
    size_t size;
  };
  void addBlock(size_t minBytes);
  void freeBlocks();

  std::vector<Block> blocks_;
  size_t current_ = 0; // block being carved
  size_t used_ = 0;    // bytes used in blocks_[current_]
  int64_t systemAllocations_ = 0;
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ARENA_H
