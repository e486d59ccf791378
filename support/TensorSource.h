//===- TensorSource.h - Where a compiler reads weights from -----*- C++ -*-===//
//
// The weight side of the compiler's back end (passes/emit streams weights
// into the artifact) needs tensors by name: element type, shape and bytes.
// A TensorSource is anything that has them: a Hugging Face checkpoint
// (frontends/glm/Checkpoint.h), tensors built in memory by a test, a future
// reader of another format. The back end never sees the format.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_TENSORSOURCE_H
#define KILN_SUPPORT_TENSORSOURCE_H

#include "support/Dtype.h"
#include "support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One tensor of a source: its bytes stay valid while the source lives.
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::U8;
  std::vector<int64_t> shape;
  uint64_t byteSize = 0;
  const uint8_t *data = nullptr;

  uint64_t numElements() const;
  /// "BF16[2048, 256]", for messages.
  std::string describe() const;
};

/// "[2048, 256]".
std::string shapeToString(const std::vector<int64_t> &shape);

class TensorSource {
public:
  virtual ~TensorSource() = default;

  /// The tensor called `name`, or null.
  virtual const TensorView *find(std::string_view name) const = 0;
  /// What the source is (a path), for messages.
  virtual std::string describe() const = 0;
  /// The caller will not read data[0, size) of a tensor again: a source that
  /// maps files may drop those pages, so reading a large model stays
  /// O(largest tensor) in memory. The default keeps them.
  virtual void release(const uint8_t *data, uint64_t size) const {
    (void)data;
    (void)size;
  }

  /// find(), or a NotFound error naming the tensor and the source.
  Result<const TensorView *> get(std::string_view name) const {
    if (const TensorView *t = find(name))
      return t;
    return makeError(StatusCode::NotFound, "tensor '", name, "' is not in ",
                     describe());
  }
};

} // namespace kiln

#endif // KILN_SUPPORT_TENSORSOURCE_H
