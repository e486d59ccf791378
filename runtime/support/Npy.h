//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// A small, defensive reader and writer for the NumPy .npy format (versions 1,
// 2 and 3), used for golden data in tests and for dumping tensors. Only
// little-endian (or byte-order-free) dtypes in C order are supported; anything
// else is rejected with a Status naming the file and the header field.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SUPPORT_NPY_H
#define KILN_RUNTIME_SUPPORT_NPY_H

#include "support/Status.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln {

enum class NpyDType {
  F16, // '<f2'
  F32, // '<f4'
  F64, // '<f8'
  I8,  // '|i1'
  I16, // '<i2'
  I32, // '<i4'
  I64, // '<i8'
  U8,  // '|u1'
  U16, // '<u2'
  U32, // '<u4'
  U64, // '<u8'
  Bool // '|b1'
};

/// Size in bytes of one element of `dtype`.
size_t npyDTypeSize(NpyDType dtype);
/// The NumPy descr string written for `dtype`, e.g. "<f4".
const char *npyDTypeDescr(NpyDType dtype);
/// Parses a descr string ("<f4", "|u1", "=i8" ...); rejects big-endian and
/// unsupported kinds.
Result<NpyDType> parseNpyDescr(const std::string &descr);

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape; // empty for a 0-d array (one element)
  std::vector<uint8_t> data;  // raw little-endian element bytes, C order

  size_t numElements() const;
  /// The elements as T; T's size must match the dtype (checked by the
  /// caller, e.g. with `is<T>()`).
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
  /// Copies the elements out as a vector<T> if T matches the dtype.
  template <typename T> Result<std::vector<T>> toVector() const {
    if (sizeof(T) != npyDTypeSize(dtype))
      return makeError(StatusCode::InvalidArgument, "npy array has dtype '",
                       npyDTypeDescr(dtype), "' of ", npyDTypeSize(dtype),
                       " bytes per element, requested an element of ",
                       sizeof(T), " bytes");
    std::vector<T> out(numElements());
    if (!out.empty())
      std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }
};

/// Parses a whole .npy file held in memory; `name` is used in messages.
Result<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                          const std::string &name);
/// Reads and parses a .npy file.
Result<NpyArray> readNpy(const std::string &path);

/// Serializes an array to .npy bytes (version 1 header, or 2 if the header
/// does not fit). `dataBytes` must equal product(shape) * element size.
Result<std::vector<uint8_t>> serializeNpy(NpyDType dtype,
                                          const std::vector<int64_t> &shape,
                                          const void *data, size_t dataBytes);
/// Writes an array as a .npy file.
Status writeNpy(const std::string &path, NpyDType dtype,
                const std::vector<int64_t> &shape, const void *data,
                size_t dataBytes);
Status writeNpy(const std::string &path, const NpyArray &array);
Status writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                   const std::vector<float> &data);
Status writeNpyI32(const std::string &path, const std::vector<int64_t> &shape,
                   const std::vector<int32_t> &data);

} // namespace kiln

#endif // KILN_RUNTIME_SUPPORT_NPY_H
