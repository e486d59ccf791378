//===- WeightStreamerTest.cpp - Weights from a source that is no checkpoint
//-===//
//
// passes/emit streams weights from any TensorSource (support/TensorSource.h):
// here, tensors built in memory. The bytes written are the source's (dense
// copies, 1-D upcasts to f32, an expert range of a stack, MXFP4 quantization
// equal to quantizeMxfp4Row, row and column slices of every kind), every
// tensor is released to its source after use (and nothing else is), and a
// missing tensor or a slice past a tensor's end is an error naming it.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/WeightStreamer.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "support/FloatFormats.h"
#include "test/unit/ExpectStatus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

using namespace kiln;
using namespace kiln::emit;

namespace {

/// Tensors held in memory; counts the bytes released back to it.
class MemorySource : public TensorSource {
public:
  void add(const std::string &name, Dtype dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes) {
    auto owned = std::make_unique<std::vector<uint8_t>>(std::move(bytes));
    TensorView t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.byteSize = owned->size();
    t.data = owned->data();
    storage_.push_back(std::move(owned));
    tensors_[name] = t;
  }
  const TensorView *find(std::string_view name) const override {
    auto it = tensors_.find(std::string(name));
    return it == tensors_.end() ? nullptr : &it->second;
  }
  std::string describe() const override { return "the in-memory source"; }
  void release(const uint8_t *data, uint64_t size) const override {
    released += size;
    bool inside = false;
    for (const auto &owned : storage_)
      inside |=
          data >= owned->data() && data + size <= owned->data() + owned->size();
    outside += inside ? 0 : 1;
  }
  mutable uint64_t released = 0;
  /// Releases of memory that is not the source's (a copy the streamer
  /// made): a mapped source would drop those pages.
  mutable int outside = 0;

private:
  std::vector<std::unique_ptr<std::vector<uint8_t>>> storage_;
  std::map<std::string, TensorView> tensors_;
};

std::vector<uint8_t> bf16Bytes(const std::vector<float> &values) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t b = floatToBf16(values[i]);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
  return out;
}

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = start + 0.25f * float(int(i % 37) - 18);
  return v;
}

class WeightStreamerTest : public ::testing::Test {
protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("weight-streamer-" + std::to_string(::getpid()) + ".kiln"))
                .string();
    auto w = artifact::ArtifactWriter::create(path_);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    writer_ = std::move(*w);
  }
  std::vector<uint8_t> read(const fb::Extent &e) {
    std::vector<uint8_t> out(e.size());
    Status s = writer_->readBack(e, 0, out.data(), out.size());
    EXPECT_TRUE(s.isOk()) << s.message();
    return out;
  }
  std::string path_;
  std::unique_ptr<artifact::ArtifactWriter> writer_;
};

TEST_F(WeightStreamerTest, StreamsFromAnySource) {
  MemorySource src;
  std::vector<uint8_t> matrix = bf16Bytes(ramp(4 * 64, 1.0f));
  src.add("a.weight", Dtype::BF16, {4, 64}, matrix);
  std::vector<float> norm = ramp(64, 0.5f);
  src.add("n.weight", Dtype::BF16, {64}, bf16Bytes(norm));
  std::vector<std::vector<uint8_t>> experts;
  for (int e = 0; e < 4; ++e) {
    experts.push_back(bf16Bytes(ramp(2 * 32, float(e))));
    src.add("experts." + std::to_string(e) + ".w", Dtype::BF16, {2, 32},
            experts.back());
  }
  std::vector<float> q = ramp(2 * 64, -2.0f);
  std::vector<uint8_t> qBytes(q.size() * 4);
  std::memcpy(qBytes.data(), q.data(), qBytes.size());
  src.add("q.weight", Dtype::F32, {2, 64}, qBytes);

  std::vector<WeightSpec> specs(4);
  specs[0].name = "a.weight";
  specs[0].shape = {4, 64};
  specs[1].name = "n.weight";
  specs[1].shape = {64};
  specs[1].dtype = ElemType::F32;
  specs[2].name = "experts.{e}.w"; // experts 2 and 3 of 4 (a rank's share)
  specs[2].shape = {2, 2, 32};
  specs[2].experts = 2;
  specs[2].firstExpert = 2;
  specs[3].kind = WeightKind::Mxfp4Quant;
  specs[3].name = "q.weight";
  specs[3].shape = {2, 64};
  specs[3].dtype = ElemType::F4E2M1;

  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_TRUE(streamed.isOk()) << streamed.status().message();
  ASSERT_EQ(streamed->size(), 4u);

  EXPECT_EQ(read((*streamed)[0].data), matrix);
  EXPECT_EQ((*streamed)[0].source, "BF16->BF16");

  std::vector<uint8_t> normOut = read((*streamed)[1].data);
  ASSERT_EQ(normOut.size(), 64u * 4);
  for (size_t i = 0; i < 64; ++i) {
    float v;
    std::memcpy(&v, normOut.data() + 4 * i, 4);
    EXPECT_EQ(v, bf16ToFloat(floatToBf16(norm[i]))) << i;
  }

  std::vector<uint8_t> stack = experts[2];
  stack.insert(stack.end(), experts[3].begin(), experts[3].end());
  EXPECT_EQ(read((*streamed)[2].data), stack);

  std::vector<uint8_t> packed(2 * 32), scales(2 * 2);
  for (int r = 0; r < 2; ++r)
    quantizeMxfp4Row(q.data() + 64 * r, 64, Mxfp4ScaleRule::Even,
                     packed.data() + 32 * r, scales.data() + 2 * r);
  EXPECT_EQ(read((*streamed)[3].data), packed);
  ASSERT_TRUE((*streamed)[3].scales.has_value());
  EXPECT_EQ(read(*(*streamed)[3].scales), scales);

  // Every byte read from the source was given back, experts 0 and 1 not
  // read at all.
  uint64_t readBytes = matrix.size() + 64 * 2 + experts[2].size() +
                       experts[3].size() + qBytes.size();
  EXPECT_GE(src.released, readBytes);
}

/// Rows [r0, r0 + nr) and byte columns [c0, c0 + nc) of a row-major matrix
/// with `cols` bytes per row.
std::vector<uint8_t> cut(const std::vector<uint8_t> &m, int64_t cols,
                         int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  std::vector<uint8_t> out;
  for (int64_t r = r0; r < r0 + nr; ++r)
    out.insert(out.end(), m.begin() + r * cols + c0,
               m.begin() + r * cols + c0 + nc);
  return out;
}

TEST_F(WeightStreamerTest, SlicesRowsAndColumnsOfEveryKind) {
  MemorySource src;
  std::vector<uint8_t> dense = bf16Bytes(ramp(4 * 64, 1.0f));
  src.add("d", Dtype::BF16, {4, 64}, dense);
  std::vector<uint8_t> mxv(4 * 32), mxs(4 * 2);
  for (size_t i = 0; i < mxv.size(); ++i)
    mxv[i] = uint8_t(i * 7 + 3);
  for (size_t i = 0; i < mxs.size(); ++i)
    mxs[i] = uint8_t(120 + i);
  src.add("mx", Dtype::U8, {4, 32}, mxv);
  src.add("mx_scale", Dtype::U8, {4, 2}, mxs);
  std::vector<float> q = ramp(2 * 64, -2.0f);
  std::vector<uint8_t> qBytes(q.size() * 4);
  std::memcpy(qBytes.data(), q.data(), qBytes.size());
  src.add("q", Dtype::F32, {2, 64}, qBytes);
  std::vector<uint8_t> f8(256 * 128);
  for (size_t i = 0; i < f8.size(); ++i)
    f8[i] = uint8_t(i % 113);
  std::vector<float> f8s = {0.5f, 2.0f};
  std::vector<uint8_t> f8sBytes(8);
  std::memcpy(f8sBytes.data(), f8s.data(), 8);
  src.add("f8", Dtype::F8_E4M3, {256, 128}, f8);
  src.add("f8_scale_inv", Dtype::F32, {2, 1}, f8sBytes);

  std::vector<WeightSpec> specs(6);
  specs[0].name = "d"; // rows 2..3
  specs[0].shape = {2, 64};
  specs[0].sliceAxis = 0;
  specs[0].sliceFirst = 2;
  specs[1].name = "d"; // columns 32..63
  specs[1].shape = {4, 32};
  specs[1].sliceAxis = 1;
  specs[1].sliceFirst = 32;
  specs[2].kind = WeightKind::Mxfp4Raw; // columns 32..63 of 64
  specs[2].name = "mx";
  specs[2].scaleName = "mx_scale";
  specs[2].shape = {4, 32};
  specs[2].dtype = ElemType::F4E2M1;
  specs[2].sliceAxis = 1;
  specs[2].sliceFirst = 32;
  specs[3].kind = WeightKind::Mxfp4Quant; // columns 32..63 of 64
  specs[3].name = "q";
  specs[3].shape = {2, 32};
  specs[3].dtype = ElemType::F4E2M1;
  specs[3].sliceAxis = 1;
  specs[3].sliceFirst = 32;
  specs[4].kind = WeightKind::Fp8Block; // rows 128..255: scale row 1
  specs[4].name = "f8";
  specs[4].scaleName = "f8_scale_inv";
  specs[4].shape = {128, 128};
  specs[4].dtype = ElemType::F8E4M3;
  specs[4].sliceAxis = 0;
  specs[4].sliceFirst = 128;
  specs[5].kind = WeightKind::Mxfp4Quant; // the whole row, for comparison
  specs[5].name = "q";
  specs[5].shape = {2, 64};
  specs[5].dtype = ElemType::F4E2M1;

  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_TRUE(streamed.isOk()) << streamed.status().message();
  const auto &w = *streamed;
  EXPECT_EQ(read(w[0].data), cut(dense, 128, 2, 2, 0, 128));
  EXPECT_EQ(read(w[1].data), cut(dense, 128, 0, 4, 64, 64));
  EXPECT_EQ(read(w[2].data), cut(mxv, 32, 0, 4, 16, 16));
  EXPECT_EQ(read(*w[2].scales), cut(mxs, 2, 0, 4, 1, 1));
  // Quantizing a slice on 32-column blocks gives the same bytes as the
  // matching part of the whole tensor's quantization.
  std::vector<uint8_t> whole = read(w[5].data),
                       wholeScales = read(*w[5].scales);
  EXPECT_EQ(read(w[3].data), cut(whole, 32, 0, 2, 16, 16));
  EXPECT_EQ(read(*w[3].scales), cut(wholeScales, 2, 0, 2, 1, 1));
  EXPECT_EQ(read(w[4].data), cut(f8, 128, 128, 128, 0, 128));
  EXPECT_EQ(read(*w[4].scales), cut(f8sBytes, 4, 1, 1, 0, 4));
  EXPECT_EQ(src.outside, 0) << "released memory that is not the source's";

  // Past the end: named.
  std::vector<WeightSpec> bad(1, specs[0]);
  bad[0].sliceFirst = 3;
  auto past = streamWeights(bad, src, *writer_, nullptr);
  ASSERT_FALSE(past.isOk());
  EXPECT_NE(past.status().message().find(
                "its rows [3, 5) this rank holds are past its end"),
            std::string::npos)
      << past.status().message();

  // A column slice of MXFP4 that does not start on a 32-column scale block
  // (a fresh writer: a failed stream leaves its segment open).
  std::vector<WeightSpec> off(1, specs[2]);
  off[0].sliceFirst = 16;
  auto other = artifact::ArtifactWriter::create(path_ + ".2");
  ASSERT_TRUE(other.isOk()) << other.status().message();
  auto unaligned = streamWeights(off, src, **other, nullptr);
  ASSERT_FALSE(unaligned.isOk());
  EXPECT_NE(unaligned.status().message().find(
                "tensor 'mx_scale': a slice from 16 does not start on one of "
                "its blocks of 32"),
            std::string::npos)
      << unaligned.status().message();
}

// GPU targets: an MXFP4 stack with its GPU-layout copy Beside the
// checkpoint layout, and the same stack with that copy Instead (a GPU-only
// artifact): the GPU bytes are the same, and Instead stores nothing else
// (its checkpoint layout went to a scratch file that is gone).
TEST_F(WeightStreamerTest, GpuLayoutBesideOrInsteadOfTheCheckpointLayout) {
  MemorySource src;
  for (int e = 0; e < 2; ++e)
    src.add("experts." + std::to_string(e) + ".w", Dtype::BF16, {16, 128},
            bf16Bytes(ramp(16 * 128, float(e) - 0.5f)));
  std::vector<WeightSpec> specs(2);
  for (WeightSpec &spec : specs) {
    spec.kind = WeightKind::Mxfp4Quant;
    spec.name = "experts.{e}.w";
    spec.shape = {2, 16, 128};
    spec.experts = 2;
    spec.dtype = ElemType::F4E2M1;
  }
  specs[0].gpuCopy = WeightSpec::GpuCopy::Beside;
  specs[1].gpuCopy = WeightSpec::GpuCopy::Instead;
  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_TRUE(streamed.isOk()) << streamed.status().message();
  const StreamedWeight &beside = (*streamed)[0], &instead = (*streamed)[1];
  EXPECT_EQ(beside.layout, fb::WeightLayout::Mxfp4);
  ASSERT_TRUE(beside.gpuData && beside.gpuScales);
  EXPECT_TRUE(storedForm(beside).gpuMxfp4());
  // As predicted from the specs alone (kiln-lower-gpu-launches' view).
  EXPECT_EQ(storedForm(beside), storedForm(specs[0]));
  EXPECT_EQ(storedForm(instead), storedForm(specs[1]));
  EXPECT_EQ(instead.layout, fb::WeightLayout::Mxfp4Gpu);
  EXPECT_FALSE(instead.gpuData || instead.gpuScales);
  ASSERT_TRUE(instead.scales);
  EXPECT_TRUE(storedForm(instead).gpuMxfp4());
  EXPECT_EQ(read(instead.data), read(*beside.gpuData));
  EXPECT_EQ(read(*instead.scales), read(*beside.gpuScales));
  EXPECT_EQ(instead.source, beside.source + ", GPU layout only");
  // The artifact ends right after Instead's two segments: the checkpoint
  // layout of it was written elsewhere.
  EXPECT_GT(instead.data.offset(), beside.gpuScales->offset());
  EXPECT_EQ(instead.scales->offset(),
            (instead.data.offset() + instead.data.size() + 4095) / 4096 * 4096);
  for (const auto &entry : std::filesystem::directory_iterator(
           std::filesystem::path(path_).parent_path()))
    EXPECT_EQ(
        entry.path().filename().string().find(
            std::filesystem::path(path_).filename().string() + ".scratch"),
        std::string::npos)
        << entry.path();
  EXPECT_EQ(src.outside, 0);
}

// An FP8 matrix that a rank's slice cuts mid-block, written as F32 q * s
// with the scales of the source's own rows and columns: rows [64, 192) of
// 256 read scale rows 0 and 1; columns [32, 160) of 256 scale columns 0, 1.
TEST_F(WeightStreamerTest, DequantizesAnFp8SliceThatCutsItsBlocks) {
  MemorySource src;
  std::vector<uint8_t> q(256 * 256);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = uint8_t((i * 37 + i / 256) % 0x7E); // finite E4M3 bytes
  std::vector<float> scales = {0.5f, 2.0f, 0.25f, 8.0f};
  std::vector<uint8_t> scaleBytes(scales.size() * 4);
  std::memcpy(scaleBytes.data(), scales.data(), scaleBytes.size());
  src.add("w", Dtype::F8_E4M3, {256, 256}, q);
  src.add("w_scale", Dtype::F32, {2, 2}, scaleBytes);
  std::vector<WeightSpec> specs(2);
  for (WeightSpec &spec : specs) {
    spec.name = "w";
    spec.scaleName = "w_scale";
    spec.dtype = ElemType::F32;
  }
  specs[0].shape = {128, 256};
  specs[0].sliceAxis = 0;
  specs[0].sliceFirst = 64;
  specs[1].shape = {256, 128};
  specs[1].sliceAxis = 1;
  specs[1].sliceFirst = 32;
  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_TRUE(streamed.isOk()) << streamed.status().message();
  for (int which = 0; which < 2; ++which) {
    const StreamedWeight &w = (*streamed)[size_t(which)];
    EXPECT_EQ(w.dtype, fb::DType::F32);
    EXPECT_EQ(w.layout, fb::WeightLayout::Dense);
    EXPECT_EQ(w.source, "F8_E4M3 x block scales->F32");
    std::vector<uint8_t> bytes = read(w.data);
    const int64_t rows = which == 0 ? 128 : 256, cols = which == 0 ? 256 : 128;
    ASSERT_EQ(bytes.size(), size_t(rows * cols * 4));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t sr = r + (which == 0 ? 64 : 0), sc = c + (which == 1 ? 32 : 0);
        float want = e4m3ToFloat(q[size_t(sr * 256 + sc)]) *
                     scales[size_t(sr / 128 * 2 + sc / 128)];
        float got;
        std::memcpy(&got, bytes.data() + size_t(r * cols + c) * 4, 4);
        ASSERT_EQ(got, want) << which << " row " << r << " col " << c;
      }
  }
}

namespace {
/// Value k of row r of a row-major MXFP4 weight's segments.
float mxfp4Value(const std::vector<uint8_t> &packed,
                 const std::vector<uint8_t> &scales, int64_t K, int64_t r,
                 int64_t k) {
  uint8_t byte = packed[size_t(r * K / 2 + k / 2)];
  return e2m1ToFloat(uint8_t(k % 2 ? byte >> 4 : byte & 0xF)) *
         e8m0ToFloat(scales[size_t(r * K / 32 + k / 32)]);
}
float f32At(const std::vector<uint8_t> &bytes, size_t i) {
  float v;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}
} // namespace

// MXFP4 slices that cut the 32-value blocks, stored as f32: Quark's values
// times their E8M0 scales (a Dense spec naming the scales), and Kiln's
// quantization (Mxfp4Dequant) equal to the unsliced Mxfp4Quant weight's
// values at the same places, from a BF16 source and from an FP8 one whose
// 128-row blocks the row slice also cuts.
TEST_F(WeightStreamerTest, DequantizesMxfp4SlicesThatCutTheirBlocks) {
  MemorySource src;
  const int64_t N = 192, K = 64;
  std::vector<uint8_t> packed(size_t(N * K / 2)), e8m0(size_t(N * K / 32));
  for (size_t i = 0; i < packed.size(); ++i)
    packed[i] = uint8_t(i * 53 + i / 7);
  for (size_t i = 0; i < e8m0.size(); ++i)
    e8m0[i] = uint8_t(120 + i % 9);
  src.add("quark", Dtype::U8, {N, K / 2}, packed);
  src.add("quark_scale", Dtype::U8, {N, K / 32}, e8m0);
  std::vector<uint8_t> bf16(size_t(N * K * 2)), fp8(size_t(N * K));
  for (int64_t i = 0; i < N * K; ++i) {
    uint16_t h = floatToBf16(std::sin(float(i) * 0.37f) * (1 + i % 5));
    std::memcpy(bf16.data() + i * 2, &h, 2);
    fp8[size_t(i)] = uint8_t((i * 29) % 0x7E);
  }
  src.add("bf16", Dtype::BF16, {N, K}, bf16);
  src.add("fp8", Dtype::F8_E4M3, {N, K}, fp8);
  std::vector<float> fp8Scales = {0.5f, 4.0f};
  std::vector<uint8_t> fp8ScaleBytes(8);
  std::memcpy(fp8ScaleBytes.data(), fp8Scales.data(), 8);
  src.add("fp8_scale", Dtype::F32, {2, 1}, fp8ScaleBytes);

  auto spec = [](const std::string &name, WeightKind kind, ElemType dtype,
                 std::string scales, std::vector<int64_t> shape, int64_t axis,
                 int64_t first) {
    WeightSpec w;
    w.name = name;
    w.kind = kind;
    w.dtype = dtype;
    w.scaleName = std::move(scales);
    w.shape = std::move(shape);
    w.sliceAxis = axis;
    w.sliceFirst = first;
    return w;
  };
  std::vector<WeightSpec> specs = {
      spec("quark", WeightKind::Dense, ElemType::F32, "quark_scale", {N, 24}, 1,
           20),
      spec("bf16", WeightKind::Mxfp4Quant, ElemType::F4E2M1, "", {N, K}, -1, 0),
      spec("bf16", WeightKind::Mxfp4Dequant, ElemType::F32, "", {N, 16}, 1, 48),
      spec("fp8", WeightKind::Mxfp4Quant, ElemType::F4E2M1, "fp8_scale", {N, K},
           -1, 0),
      spec("fp8", WeightKind::Mxfp4Dequant, ElemType::F32, "fp8_scale", {96, K},
           0, 96),
      // Kiln's MXFP4 of the FP8 source, rows [64, 160): the slice cuts
      // the FP8 blocks but not the MXFP4 ones.
      spec("fp8", WeightKind::Mxfp4Quant, ElemType::F4E2M1, "fp8_scale",
           {96, K}, 0, 64)};
  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_TRUE(streamed.isOk()) << streamed.status().message();
  const std::vector<StreamedWeight> &w = *streamed;
  EXPECT_EQ(w[0].source, "mxfp4 x E8M0 scales->F32");
  EXPECT_EQ(w[2].source, "BF16->mxfp4(even)->F32");
  EXPECT_EQ(w[4].source, "F8_E4M3->mxfp4(even)->F32");
  for (int i : {0, 2, 4}) {
    EXPECT_EQ(w[size_t(i)].dtype, fb::DType::F32);
    EXPECT_EQ(w[size_t(i)].layout, fb::WeightLayout::Dense);
  }
  std::vector<uint8_t> quark = read(w[0].data);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < 24; ++c)
      ASSERT_EQ(f32At(quark, size_t(r * 24 + c)),
                mxfp4Value(packed, e8m0, K, r, 20 + c))
          << "row " << r << " col " << c;
  std::vector<uint8_t> bq = read(w[1].data), bs = read(*w[1].scales),
                       bd = read(w[2].data);
  std::vector<uint8_t> fq = read(w[3].data), fs = read(*w[3].scales),
                       fd = read(w[4].data), fr = read(w[5].data),
                       frs = read(*w[5].scales);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < 16; ++c)
      ASSERT_EQ(f32At(bd, size_t(r * 16 + c)), mxfp4Value(bq, bs, K, r, 48 + c))
          << "row " << r << " col " << c;
  for (int64_t r = 0; r < 96; ++r)
    for (int64_t c = 0; c < K; ++c) {
      ASSERT_EQ(f32At(fd, size_t(r * K + c)), mxfp4Value(fq, fs, K, 96 + r, c))
          << "row " << r << " col " << c;
      ASSERT_EQ(mxfp4Value(fr, frs, K, r, c), mxfp4Value(fq, fs, K, 64 + r, c))
          << "row " << r << " col " << c;
    }
}

// Scales that are not an FP8 matrix's F32 blocks, or too few of them for
// the slice, are errors that name the tensor.
TEST_F(WeightStreamerTest, DequantizedFp8NeedsItsBlockScales) {
  MemorySource src;
  src.add("w", Dtype::F8_E4M3, {256, 128}, std::vector<uint8_t>(256 * 128));
  src.add("bf16_scale", Dtype::BF16, {2, 1}, std::vector<uint8_t>(4));
  src.add("short_scale", Dtype::F32, {1, 1}, std::vector<uint8_t>(4));
  WeightSpec spec;
  spec.name = "w";
  spec.dtype = ElemType::F32;
  spec.shape = {128, 128};
  spec.sliceAxis = 0;
  spec.sliceFirst = 64;
  spec.scaleName = "bf16_scale";
  EXPECT_ERROR_CONTAINS(streamWeights({spec}, src, *writer_, nullptr),
                        "tensor 'bf16_scale' is BF16[2, 1], expected the F32 "
                        "block scales of an FP8 matrix");
  spec.scaleName = "short_scale";
  auto other = artifact::ArtifactWriter::create(path_ + ".2"); // a fresh one
  ASSERT_OK(other);
  EXPECT_ERROR_CONTAINS(streamWeights({spec}, src, **other, nullptr),
                        "tensor 'short_scale' is F32[1, 1], expected the F32 "
                        "block scales of an FP8 matrix covering rows [64, "
                        "192) and columns [0, 128)");
}

TEST_F(WeightStreamerTest, MissingTensorNamesItAndTheSource) {
  MemorySource src;
  std::vector<WeightSpec> specs(1);
  specs[0].name = "nowhere.weight";
  specs[0].shape = {4, 64};
  auto streamed = streamWeights(specs, src, *writer_, nullptr);
  ASSERT_FALSE(streamed.isOk());
  EXPECT_NE(streamed.status().message().find(
                "tensor 'nowhere.weight' is not in the in-memory source"),
            std::string::npos)
      << streamed.status().message();
}

} // namespace
