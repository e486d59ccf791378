//===- WeightStreamerTest.cpp - Weights from a source that is no checkpoint
//-===//
//
// passes/emit streams weights from any TensorSource (support/TensorSource.h):
// here, tensors built in memory. The bytes written are the source's (dense
// copies, 1-D upcasts to f32, an expert range of a stack, MXFP4 quantization
// equal to quantizeMxfp4Row), every tensor is released to its source after
// use, and a missing tensor is an error naming it and the source.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/WeightStreamer.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "support/FloatFormats.h"

#include <gtest/gtest.h>

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
  void release(const uint8_t *, uint64_t size) const override {
    released += size;
  }
  mutable uint64_t released = 0;

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
