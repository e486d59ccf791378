//===- fuzz_npy.cpp - parseNpy on arbitrary bytes -------------------------===//
//
// The input is a .npy file. An accepted array must hold exactly
// product(shape) x element size bytes, and serializeNpy must write it back
// into a file that parses to the same dtype, shape and data.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FuzzUtil.h"
#include "runtime/support/Npy.h"

using namespace kiln;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Result<NpyArray> array = parseNpy(data, size, "fuzz.npy");
  if (!array.isOk())
    return 0;
  KILN_FUZZ_CHECK(
      array->numElements() * npyDTypeSize(array->dtype) == array->data.size(),
      "%zu elements of %zu bytes in %zu bytes", array->numElements(),
      npyDTypeSize(array->dtype), array->data.size());
  if (array->dtype == NpyDType::F32)
    KILN_FUZZ_CHECK(array->toVector<float>().isOk(), "toVector<float>");
  struct Three {
    uint8_t bytes[3];
  };
  KILN_FUZZ_CHECK(!array->toVector<Three>().isOk(), "no dtype has 3 bytes");
  Result<std::vector<uint8_t>> bytes = serializeNpy(
      array->dtype, array->shape, array->data.data(), array->data.size());
  KILN_FUZZ_CHECK(bytes.isOk(), "serializeNpy: %s",
                  bytes.status().toString().c_str());
  Result<NpyArray> again = parseNpy(bytes->data(), bytes->size(), "again");
  KILN_FUZZ_CHECK(again.isOk(), "parse(serialize(parse(x))): %s",
                  again.status().toString().c_str());
  KILN_FUZZ_CHECK(again->dtype == array->dtype &&
                      again->shape == array->shape &&
                      again->data == array->data,
                  "round trip changed the array");
  return 0;
}
