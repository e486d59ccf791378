//===- TensorSource.cpp ---------------------------------------------------===//

#include "support/TensorSource.h"

#include <sstream>

using namespace kiln;

uint64_t TensorView::numElements() const {
  uint64_t n = 1;
  for (int64_t dim : shape)
    n *= static_cast<uint64_t>(dim);
  return n;
}

std::string TensorView::describe() const {
  return std::string(dtypeName(dtype)) + shapeToString(shape);
}

std::string kiln::shapeToString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}
