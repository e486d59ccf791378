//===- DequantizedRowsTest.cpp - Windows of quantized matrices as f32 -----===//
//
// The f32 rows kiln-partition-tensor's dequantized weights are made of: a
// window's values equal the whole matrix's at the same places (the blocks
// are the source's, wherever the window's edges cut them), each one the
// format's own product, and bad sources are refused by name.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/DequantizedRows.h"
#include "support/FloatFormats.h"
#include "test/unit/ExpectStatus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;
using namespace kiln::emit;

namespace {

TensorView view(const std::string &name, Dtype dtype,
                std::vector<int64_t> shape, const void *data) {
  TensorView t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = static_cast<const uint8_t *>(data);
  t.byteSize = t.numElements() * dtypeSize(dtype);
  return t;
}

/// The window's rows, collected.
struct Rows {
  int64_t cols;
  std::vector<float> values;
  RowSink sink() {
    return [this](const float *row) {
      values.insert(values.end(), row, row + cols);
      return Status::ok();
    };
  }
};

/// Runs `dequantize` over `w` and over the whole matrix, and checks the
/// window's values against the whole one's at the same places.
template <class F>
void expectWindowOfWhole(F dequantize, int64_t rows, int64_t cols,
                         const Window &w) {
  Rows whole{cols, {}}, part{w.cols, {}};
  ASSERT_OK(dequantize(Window{0, rows, 0, cols}, whole.sink()));
  ASSERT_OK(dequantize(w, part.sink()));
  ASSERT_EQ(part.values.size(), size_t(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c)
      ASSERT_EQ(part.values[size_t(r * w.cols + c)],
                whole.values[size_t((w.row0 + r) * cols + w.col0 + c)])
          << "row " << r << " col " << c;
}

double e2m1(uint8_t code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8 ? -1 : 1) * kMag[code & 7];
}

} // namespace

// Quark MXFP4: every value is its code times 2^(scale - 127), and a window
// that starts and ends inside 32-value blocks keeps each block's scale.
TEST(DequantizedRows, Mxfp4ValuesTimesTheirBlockScales) {
  const int64_t N = 4, K = 96;
  std::mt19937 rng(7);
  std::vector<uint8_t> packed(size_t(N * K / 2)), scales(size_t(N * K / 32));
  for (uint8_t &b : packed)
    b = uint8_t(rng());
  for (uint8_t &s : scales)
    s = uint8_t(110 + rng() % 30);
  TensorView q = view("w", Dtype::U8, {N, K / 2}, packed.data());
  TensorView s = view("w_scale", Dtype::U8, {N, K / 32}, scales.data());
  Rows all{K, {}};
  ASSERT_OK(dequantizeMxfp4(q, s, {0, N, 0, K}, all.sink()));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < K; ++k) {
      uint8_t byte = packed[size_t(r * K / 2 + k / 2)];
      double want = e2m1(uint8_t(k % 2 ? byte >> 4 : byte & 0xF)) *
                    std::ldexp(1.0, scales[size_t(r * K / 32 + k / 32)] - 127);
      ASSERT_EQ(double(all.values[size_t(r * K + k)]), want)
          << "row " << r << " col " << k;
    }
  auto run = [&](const Window &w, const RowSink &sink) {
    return dequantizeMxfp4(q, s, w, sink);
  };
  expectWindowOfWhole(run, N, K, {1, 2, 16, 16}); // half of block 0
  expectWindowOfWhole(run, N, K, {0, N, 24, 47}); // odd start, 3 blocks
}

// Kiln's quantization quantizes whole rows: a window's values are the whole
// matrix's, not those of its columns quantized alone (their block maxima,
// and so their scales, differ).
TEST(DequantizedRows, RoundTripQuantizesWholeRows) {
  const int64_t N = 3, K = 64;
  std::vector<float> src(size_t(N * K));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &v : src)
    v = normal(rng);
  // Each row's block 0 has its maximum in columns 0..15, outside the window
  // below, and that maximum is far above the window's own values.
  for (int64_t r = 0; r < N; ++r)
    src[size_t(r * K)] = 40.0f;
  TensorView t = view("w", Dtype::F32, {N, K}, src.data());
  for (auto rule : {Mxfp4ScaleRule::Even, Mxfp4ScaleRule::Floor}) {
    auto run = [&](const Window &w, const RowSink &sink) {
      return roundTripMxfp4(t, nullptr, rule, w, sink);
    };
    expectWindowOfWhole(run, N, K, {0, N, 16, 32});
    // The same values as Mxfp4Quantize's own rows, decoded.
    Rows all{K, {}};
    ASSERT_OK(run({0, N, 0, K}, all.sink()));
    std::vector<uint8_t> packed(K / 2), scales(K / 32);
    for (int64_t r = 0; r < N; ++r) {
      quantizeMxfp4Row(src.data() + r * K, K, rule, packed.data(),
                       scales.data());
      for (int64_t k = 0; k < K; ++k) {
        uint8_t byte = packed[size_t(k / 2)];
        float want = e2m1ToFloat(uint8_t(k % 2 ? byte >> 4 : byte & 0xF)) *
                     e8m0ToFloat(scales[size_t(k / 32)]);
        ASSERT_EQ(all.values[size_t(r * K + k)], want);
      }
    }
    // Columns 16..31 quantized on their own would get a smaller scale.
    std::vector<float> alone(32, 0.0f);
    std::memcpy(alone.data(), src.data() + 16, 16 * sizeof(float));
    quantizeMxfp4Row(alone.data(), 32, rule, packed.data(), scales.data());
    Rows part{16, {}};
    ASSERT_OK(run({0, 1, 16, 16}, part.sink()));
    bool differs = false;
    for (int64_t k = 0; k < 16; ++k) {
      uint8_t byte = packed[size_t(k / 2)];
      float own = e2m1ToFloat(uint8_t(k % 2 ? byte >> 4 : byte & 0xF)) *
                  e8m0ToFloat(scales[0]);
      differs |= own != part.values[size_t(k)];
    }
    EXPECT_TRUE(differs);
  }
}

// FP8 values times their 128x128 block scales, a window across a block edge.
TEST(DequantizedRows, Fp8ValuesTimesTheirBlockScales) {
  const int64_t N = 192, K = 256;
  std::vector<uint8_t> q(size_t(N * K));
  std::mt19937 rng(5);
  for (uint8_t &b : q)
    b = uint8_t(rng() % 0x7E); // positive, finite
  std::vector<float> s = {0.5f, 2.0f, 0.25f, 4.0f};
  TensorView tq = view("w", Dtype::F8_E4M3, {N, K}, q.data());
  TensorView ts = view("w_scale_inv", Dtype::F32, {2, 2}, s.data());
  auto run = [&](const Window &w, const RowSink &sink) {
    return dequantizeFp8(tq, ts, w, sink);
  };
  Rows all{K, {}};
  ASSERT_OK(run({0, N, 0, K}, all.sink()));
  for (int64_t r : {0, 127, 128, 191})
    for (int64_t c : {0, 127, 128, 255})
      ASSERT_EQ(all.values[size_t(r * K + c)],
                e4m3ToFloat(q[size_t(r * K + c)]) *
                    s[size_t(r / 128 * 2 + c / 128)]);
  expectWindowOfWhole(run, N, K, {96, 96, 100, 60});
}

// Sources of the wrong kind or too small for the window are refused, naming
// the tensor.
TEST(DequantizedRows, BadSourcesAreRefusedByName) {
  std::vector<uint8_t> bytes(64 * 16, 0);
  TensorView q = view("q", Dtype::U8, {4, 16}, bytes.data());
  TensorView s = view("q_scale", Dtype::U8, {4, 1}, bytes.data());
  TensorView wide = view("wide", Dtype::U8, {4, 32}, bytes.data());
  Rows out{8, {}};
  EXPECT_ERROR_CONTAINS(dequantizeMxfp4(wide, s, {0, 4, 32, 32}, out.sink()),
                        "tensor 'q_scale' is U8[4, 1], expected the E8M0 "
                        "scales of an MXFP4 matrix");
  EXPECT_ERROR_CONTAINS(dequantizeMxfp4(q, s, {2, 4, 0, 8}, out.sink()),
                        "tensor 'q' is U8[4, 16], expected packed MXFP4 values "
                        "with rows [2, 6)");
  EXPECT_ERROR_CONTAINS(dequantizeFp8(q, s, {0, 1, 0, 8}, out.sink()),
                        "tensor 'q' is U8[4, 16], expected an FP8 matrix");
  TensorView odd = view("odd", Dtype::BF16, {2, 48}, bytes.data());
  EXPECT_ERROR_CONTAINS(roundTripMxfp4(odd, nullptr, Mxfp4ScaleRule::Even,
                                       {0, 1, 0, 8}, out.sink()),
                        "tensor 'odd' is BF16[2, 48], expected a matrix whose "
                        "rows are whole blocks of 32");
  TensorView ints = view("ints", Dtype::I32, {2, 32}, bytes.data());
  EXPECT_ERROR_CONTAINS(roundTripMxfp4(ints, nullptr, Mxfp4ScaleRule::Even,
                                       {0, 1, 0, 8}, out.sink()),
                        "expected BF16, F16 or F32 values to quantize");
  // A sink's error ends the walk and comes back as it is.
  TensorView ok = view("ok", Dtype::F32, {2, 32}, bytes.data());
  auto failing = [](const float *) {
    return makeError(StatusCode::Internal, "disk full");
  };
  EXPECT_ERROR_CONTAINS(
      roundTripMxfp4(ok, nullptr, Mxfp4ScaleRule::Even, {0, 2, 0, 8}, failing),
      "disk full");
}
