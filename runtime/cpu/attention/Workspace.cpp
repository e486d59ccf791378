//===- Workspace.cpp ------------------------------------------------------===//

#include "runtime/cpu/attention/Workspace.h"

#include <new>

using namespace kiln;
using namespace kiln::cpu;

Workspace::~Workspace() {
  if (data_)
    ::operator delete(data_, std::align_val_t(kAlign));
}

Status Workspace::reserve(size_t bytes) {
  if (bytes <= size_)
    return Status::ok();
  bytes = alignBytes(bytes);
  void *p = ::operator new(bytes, std::align_val_t(kAlign), std::nothrow);
  if (!p)
    return makeError(StatusCode::ResourceExhausted,
                     "attention workspace: cannot allocate ", bytes, " bytes");
  if (data_)
    ::operator delete(data_, std::align_val_t(kAlign));
  data_ = static_cast<uint8_t *>(p);
  size_ = bytes;
  return Status::ok();
}

uint8_t *Workspace::get(size_t bytes) {
  if (bytes > size_ && !reserve(bytes).isOk())
    throw std::bad_alloc();
  return data_;
}
