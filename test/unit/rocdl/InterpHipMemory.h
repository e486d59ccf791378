//===- InterpHipMemory.h - The interpreter device's memory -----*- C++ -*-===//
//
// The interpreter's "device" memory is host memory. Large allocations are
// anonymous page mappings, and a copy into one from a read-only file
// mapping (an artifact's weights, which Artifact::open maps) maps the same
// file pages copy-on-write at the destination instead of copying them: the
// destination reads the source's bytes, a write to it copies the page
// first, as a copy would have, and the uploaded weights of a model as large
// as the host's memory stay file pages the kernel can drop and reread
// instead of a second, anonymous copy beside the mapping (a 14.8 GB GPU-only
// artifact on a 24 GiB machine). The result is the same as memcpy's unless
// the file changes under the mapping, which an artifact does not.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_INTERPHIPMEMORY_H
#define KILN_TEST_UNIT_ROCDL_INTERPHIPMEMORY_H

#include <cstddef>

namespace kiln::interp_hip {

/// Allocations of at least this many bytes are page mappings.
constexpr size_t kMappedAllocationBytes = size_t(1) << 20;

/// Zeroed memory of `bytes` (at least one byte); null when out of memory.
void *allocate(size_t bytes);
/// Frees what allocate() returned for `bytes`.
void release(void *p, size_t bytes);

/// memcpy(dst, src, bytes) where dst lies in an allocation from
/// allocate(). A copy of at least kMappedAllocationBytes (so into a page
/// mapping) whose two sides start on a page and whose source lies in one
/// private read-only file mapping maps the source's file pages instead;
/// the tail after the last whole page is copied. With KILN_INTERP_HIP_COPY set
/// it always copies. Returns the bytes mapped rather than copied.
size_t copyIn(void *dst, const void *src, size_t bytes);

} // namespace kiln::interp_hip

#endif
