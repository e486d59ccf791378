//===- fuzz_safetensors.cpp - parseSafetensors on arbitrary bytes ---------===//
//
// The input is a whole safetensors image. Every tensor the parser accepts
// must lie inside the input: its first and last bytes are read, so ASan
// reports a view that escapes the buffer. Names must come back sorted and
// unique, and sizes must match dtype x shape.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Safetensors.h"
#include "fuzz/FuzzUtil.h"

using namespace kiln;
using namespace kiln::glm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Result<SafetensorsHeader> header =
      parseSafetensors(ByteView{data, size}, "fuzz.safetensors");
  if (!header.isOk()) {
    KILN_FUZZ_CHECK(!header.status().message().empty(),
                    "an error without a message");
    return 0;
  }
  KILN_FUZZ_CHECK(header->headerBytes + 8 <= size, "header past the input");
  volatile uint8_t sink = 0;
  const std::string *previous = nullptr;
  for (const TensorInfo &t : header->tensors) {
    if (previous)
      KILN_FUZZ_CHECK(*previous < t.name, "tensors not sorted and unique");
    previous = &t.name;
    KILN_FUZZ_CHECK(t.numElements() * dtypeSize(t.dtype) == t.byteSize,
                    "byte size of %s", t.name.c_str());
    KILN_FUZZ_CHECK(t.fileOffset >= 8 + header->headerBytes &&
                        t.fileOffset + t.byteSize <= size,
                    "tensor %s outside the data section", t.name.c_str());
    KILN_FUZZ_CHECK(t.data == data + t.fileOffset, "data pointer");
    (void)t.describe();
    if (t.byteSize > 0)
      sink = sink + t.bytes().data[0] + t.bytes().data[t.byteSize - 1];
  }
  (void)sink;
  return 0;
}
