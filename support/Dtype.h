//===- Dtype.h - Safetensors element types ----------------------*- C++ -*-===//
//
// The element types a safetensors header may name, their spelling in the
// header ("BF16", "F8_E4M3", ...) and their size in bytes. In the shared
// layer because every weight source (support/TensorSource.h) speaks them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_DTYPE_H
#define KILN_SUPPORT_DTYPE_H

#include "support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class Dtype {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  F16,
  BF16,
  F32,
  F64,
  F8_E4M3,
  F8_E5M2,
};

/// The header spelling, e.g. "BF16".
const char *dtypeName(Dtype dtype);

/// Parses a header spelling. Unknown names (including sub-byte or scaled
/// types this reader does not handle, e.g. "F4" or "F8_E8M0") are an error
/// that lists the accepted names.
Result<Dtype> parseDtype(std::string_view name);

/// Bytes per element (1, 2, 4 or 8).
uint64_t dtypeSize(Dtype dtype);

/// True for BF16, F16, F32 and F64.
bool isFloatingPoint(Dtype dtype);

} // namespace kiln

#endif // KILN_SUPPORT_DTYPE_H
