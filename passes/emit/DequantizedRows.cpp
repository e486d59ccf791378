//===- DequantizedRows.cpp ------------------------------------------------===//

#include "passes/emit/DequantizedRows.h"

#include "support/FloatFormats.h"

#include <cstring>
#include <vector>

using namespace kiln;
using namespace kiln::emit;

namespace {

/// Checks that `t` is a `dtype` matrix with at least the window's rows and
/// `minCols` columns of its own elements.
Status expectMatrix(const TensorView &t, Dtype dtype, const Window &w,
                    int64_t minCols, const char *what) {
  if (t.dtype != dtype || t.shape.size() != 2 || t.shape[0] < w.row0 + w.rows ||
      t.shape[1] < minCols)
    return makeError(StatusCode::InvalidArgument, "tensor '", t.name, "' is ",
                     t.describe(), ", expected ", what, " with rows [", w.row0,
                     ", ", w.row0 + w.rows, ") and columns [", w.col0, ", ",
                     w.col0 + w.cols, ")");
  return Status::ok();
}

/// Checks that `scales` is a `dtype` matrix of blocks of `blockRows` x
/// `blockCols` values covering the window.
Status expectBlocks(const TensorView &scales, Dtype dtype, const Window &w,
                    int64_t blockRows, int64_t blockCols, const char *what) {
  int64_t rows = (w.row0 + w.rows + blockRows - 1) / blockRows;
  int64_t cols = (w.col0 + w.cols + blockCols - 1) / blockCols;
  if (scales.dtype != dtype || scales.shape.size() != 2 ||
      scales.shape[0] < rows || scales.shape[1] < cols)
    return makeError(StatusCode::InvalidArgument, "tensor '", scales.name,
                     "' is ", scales.describe(), ", expected ", what,
                     " covering rows [", w.row0, ", ", w.row0 + w.rows,
                     ") and columns [", w.col0, ", ", w.col0 + w.cols, ")");
  return Status::ok();
}

/// The E2M1 code of value `k` of a packed row (even values in the low
/// nibble) times its block's E8M0 scale.
float mxfp4At(const uint8_t *packed, const uint8_t *scales, int64_t k) {
  uint8_t byte = packed[k / 2];
  uint8_t code = uint8_t(k % 2 ? byte >> 4 : byte & 0xF);
  return e2m1ToFloat(code) * e8m0ToFloat(scales[k / 32]);
}

} // namespace

float kiln::emit::floatAt(Dtype dtype, const uint8_t *p) {
  switch (dtype) {
  case Dtype::BF16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return bf16ToFloat(v);
  }
  case Dtype::F16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return f16ToFloat(v);
  }
  case Dtype::F8_E4M3:
    return e4m3ToFloat(*p);
  default: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  }
}

void kiln::emit::floatRow(const TensorView &source, const TensorView *fp8Scales,
                          int64_t row, int64_t col0, int64_t cols, float *out) {
  const size_t size = dtypeSize(source.dtype);
  const uint8_t *src = source.data + size_t(row * source.shape[1]) * size;
  const float *s =
      fp8Scales ? reinterpret_cast<const float *>(fp8Scales->data) : nullptr;
  for (int64_t c = 0; c < cols; ++c) {
    int64_t k = col0 + c;
    float v = floatAt(source.dtype, src + size_t(k) * size);
    if (s)
      v *= s[row / 128 * fp8Scales->shape[1] + k / 128];
    out[c] = v;
  }
}

Status kiln::emit::checkFloatSource(const TensorView &source,
                                    const TensorView *fp8Scales,
                                    const Window &w) {
  if (fp8Scales) {
    KILN_RETURN_IF_ERROR(expectMatrix(source, Dtype::F8_E4M3, w,
                                      w.col0 + w.cols, "an FP8 matrix"));
    return expectBlocks(*fp8Scales, Dtype::F32, w, 128, 128,
                        "the F32 block scales of an FP8 matrix");
  }
  if (source.dtype != Dtype::BF16 && source.dtype != Dtype::F16 &&
      source.dtype != Dtype::F32)
    return makeError(StatusCode::InvalidArgument, "tensor '", source.name,
                     "' is ", source.describe(),
                     ", expected BF16, F16 or F32 values to quantize to MXFP4");
  return expectMatrix(source, source.dtype, w, w.col0 + w.cols, "a matrix");
}

Status kiln::emit::dequantizeFp8(const TensorView &values,
                                 const TensorView &scales, const Window &w,
                                 const RowSink &sink) {
  KILN_RETURN_IF_ERROR(expectMatrix(values, Dtype::F8_E4M3, w, w.col0 + w.cols,
                                    "an FP8 matrix"));
  KILN_RETURN_IF_ERROR(expectBlocks(scales, Dtype::F32, w, 128, 128,
                                    "the F32 block scales of an FP8 matrix"));
  const int64_t K = values.shape[1], blockCols = scales.shape[1];
  const float *s = reinterpret_cast<const float *>(scales.data);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = w.row0; r < w.row0 + w.rows; ++r) {
    const uint8_t *q = values.data + size_t(r * K);
    const float *rowScales = s + r / 128 * blockCols;
    for (int64_t c = 0; c < w.cols; ++c)
      row[size_t(c)] =
          e4m3ToFloat(q[w.col0 + c]) * rowScales[(w.col0 + c) / 128];
    KILN_RETURN_IF_ERROR(sink(row.data()));
  }
  return Status::ok();
}

Status kiln::emit::dequantizeMxfp4(const TensorView &values,
                                   const TensorView &scales, const Window &w,
                                   const RowSink &sink) {
  KILN_RETURN_IF_ERROR(expectMatrix(
      values, Dtype::U8, w, (w.col0 + w.cols + 1) / 2, "packed MXFP4 values"));
  KILN_RETURN_IF_ERROR(expectBlocks(scales, Dtype::U8, w, 1, 32,
                                    "the E8M0 scales of an MXFP4 matrix"));
  const int64_t bytes = values.shape[1], blocks = scales.shape[1];
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = w.row0; r < w.row0 + w.rows; ++r) {
    const uint8_t *q = values.data + size_t(r * bytes);
    const uint8_t *e = scales.data + size_t(r * blocks);
    for (int64_t c = 0; c < w.cols; ++c)
      row[size_t(c)] = mxfp4At(q, e, w.col0 + c);
    KILN_RETURN_IF_ERROR(sink(row.data()));
  }
  return Status::ok();
}

Status kiln::emit::roundTripMxfp4(const TensorView &source,
                                  const TensorView *fp8Scales,
                                  Mxfp4ScaleRule rule, const Window &w,
                                  const RowSink &sink) {
  if (source.shape.size() != 2 || source.shape[1] % 32 != 0)
    return makeError(StatusCode::InvalidArgument, "tensor '", source.name,
                     "' is ", source.describe(),
                     ", expected a matrix whose rows are whole blocks of 32 "
                     "to quantize to MXFP4");
  const int64_t K = source.shape[1];
  KILN_RETURN_IF_ERROR(
      checkFloatSource(source, fp8Scales, {w.row0, w.rows, 0, K}));
  if (w.col0 + w.cols > K)
    return makeError(StatusCode::InvalidArgument, "tensor '", source.name,
                     "' is ", source.describe(), ", expected columns [", w.col0,
                     ", ", w.col0 + w.cols, ")");
  std::vector<float> full(static_cast<size_t>(K)),
      row(static_cast<size_t>(w.cols));
  std::vector<uint8_t> packed(static_cast<size_t>(K / 2)),
      scales(static_cast<size_t>(K / 32));
  for (int64_t r = w.row0; r < w.row0 + w.rows; ++r) {
    floatRow(source, fp8Scales, r, 0, K, full.data());
    quantizeMxfp4Row(full.data(), K, rule, packed.data(), scales.data());
    for (int64_t c = 0; c < w.cols; ++c)
      row[size_t(c)] = mxfp4At(packed.data(), scales.data(), w.col0 + c);
    KILN_RETURN_IF_ERROR(sink(row.data()));
  }
  return Status::ok();
}
