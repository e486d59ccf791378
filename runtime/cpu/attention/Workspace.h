//===- Workspace.h - Reusable scratch memory for the CPU kernels -*- C++
//-*-===//
//
// The attention kernels carve their temporaries (per-thread key blocks,
// latent queries, indexer scores) from a Workspace the caller keeps between
// calls, so steady-state decoding does not allocate. Each kernel has a
// `...WorkspaceBytes` function; reserving that much up front turns an
// out-of-memory condition into a Status instead of std::bad_alloc.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_WORKSPACE_H
#define KILN_RUNTIME_CPU_ATTENTION_WORKSPACE_H

#include "support/Status.h"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

class Workspace {
public:
  static constexpr size_t kAlign = 64;

  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace &) = delete;
  Workspace &operator=(const Workspace &) = delete;

  /// Grows to at least `bytes`; the contents are not kept.
  Status reserve(size_t bytes);
  /// Kernel side: at least `bytes`, 64-byte aligned, growing if needed
  /// (throws std::bad_alloc when that fails; reserve() first to avoid it).
  uint8_t *get(size_t bytes);
  size_t size() const { return size_; }

private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

/// Rounds `bytes` up to the Workspace alignment.
inline size_t alignBytes(size_t bytes) {
  return (bytes + Workspace::kAlign - 1) / Workspace::kAlign *
         Workspace::kAlign;
}

/// Hands out consecutive aligned pieces of one buffer. Kernels use the same
/// sequence of take() calls with a null base to measure what they need.
class Carver {
public:
  explicit Carver(uint8_t *base = nullptr) : base_(base) {}
  template <typename T> T *take(int64_t count) {
    T *p = reinterpret_cast<T *>(base_ ? base_ + used_ : nullptr);
    used_ += alignBytes(size_t(count) * sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

private:
  uint8_t *base_;
  size_t used_ = 0;
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_ATTENTION_WORKSPACE_H
