//===- ModelTest.cpp - Model binding, plan validation and execution -------===//

#include "runtime/engine/Model.h"
#include "test/unit/engine/TinyArtifact.h"

#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/cpu/Dequant.h"
#include "support/WeightPanels.h"
#include "test/unit/ExpectStatus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>

namespace kiln::engine::test {
namespace {

class TempArtifact {
public:
  explicit TempArtifact(const TinyModel &model, std::string name = "m.kiln")
      : path_(tempPath(name)) {
    status_ = writeTinyArtifact(path_, model);
  }
  ~TempArtifact() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }
  const Status &status() const { return status_; }

private:
  std::string path_;
  Status status_;
};

std::unique_ptr<Model> loadOrDie(const TinyModel &m, int threads = 2) {
  TempArtifact a(m);
  EXPECT_TRUE(a.status().isOk()) << a.status().toString();
  auto model = Model::load(a.path(), threads);
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? std::move(model).value() : nullptr;
}

Status loadError(const TinyModel &m) {
  TempArtifact a(m);
  EXPECT_TRUE(a.status().isOk()) << a.status().toString();
  auto model = Model::load(a.path(), 1);
  return model.isOk() ? Status::ok() : model.status();
}

const float *weightData(const TinyModel &m, uint32_t index) {
  return reinterpret_cast<const float *>(m.weights[index].data.data());
}

/// logits[v] = lm_head[v] . rms_norm(x) in double.
std::vector<double> headOf(const TinyModel &m, const std::vector<double> &x) {
  const float *norm = weightData(m, kNorm);
  const float *head = weightData(m, kLmHead);
  double ss = 0;
  for (double v : x)
    ss += v * v;
  double r = 1.0 / std::sqrt(ss / double(x.size()) + 1e-5);
  std::vector<double> n(x.size()), logits(size_t(m.vocab));
  for (size_t i = 0; i < x.size(); ++i)
    n[i] = x[i] * r * norm[i];
  for (int64_t v = 0; v < m.vocab; ++v) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i)
      s += head[v * m.hidden + int64_t(i)] * n[i];
    logits[size_t(v)] = s;
  }
  return logits;
}

std::vector<double> embedRow(const TinyModel &m, int32_t id) {
  const float *e = weightData(m, kEmbed) + id * m.hidden;
  return std::vector<double>(e, e + m.hidden);
}

struct Call {
  std::vector<int32_t> ids, seqs, pos, rows;
  PlanInputs inputs() const {
    PlanInputs in;
    in.tokenIds = ids.data();
    in.seqIds = seqs.data();
    in.positions = pos.data();
    in.tokens = int64_t(ids.size());
    in.logitRows = rows.data();
    in.logitCount = int64_t(rows.size());
    return in;
  }
};

Call prompt(const std::vector<int32_t> &ids, int32_t seq = 0,
            int32_t start = 0) {
  Call c;
  c.ids = ids;
  c.seqs.assign(ids.size(), seq);
  c.pos.resize(ids.size());
  std::iota(c.pos.begin(), c.pos.end(), start);
  c.rows.resize(ids.size());
  std::iota(c.rows.begin(), c.rows.end(), 0);
  return c;
}

// --- Binding and running ---------------------------------------------------

TEST(ModelTest, SimplePlanMatchesHandComputation) {
  TinyModel m = simpleModel();
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->info().vocabSize, 16);
  EXPECT_EQ(model->info().hiddenSize, 8);
  ASSERT_NE(model->tokenizer(), nullptr);
  EXPECT_EQ(model->tokenizer()->stopIds(),
            (std::vector<int32_t>{kEndOfText, kUser, kObservation}));

  Call c = prompt({3, 0, 6, 1});
  c.rows = {2, 0}; // logits of rows 2 and 0, in that order
  auto out = model->run("prefill", c.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  ASSERT_EQ(out->logitRows, 2);
  ASSERT_EQ(out->vocab, 16);
  ASSERT_EQ(out->hiddenRows, 4);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> expect = headOf(m, embedRow(m, c.ids[c.rows[r]]));
    for (int v = 0; v < 16; ++v)
      EXPECT_NEAR(out->logits[r * 16 + v], expect[v],
                  1e-5 * (1 + std::fabs(expect[v])))
          << "row " << r << " token " << v;
  }
}

TEST(ModelTest, BuffersGrowOnceAndAreReused) {
  auto model = loadOrDie(simpleModel());
  ASSERT_TRUE(model);
  Call small = prompt({1, 2});
  Call big = prompt({1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(model->run("prefill", big.inputs()).isOk());
  ASSERT_TRUE(model->run("prefill", small.inputs()).isOk());
  ASSERT_TRUE(model->run("prefill", big.inputs()).isOk());
  EXPECT_EQ(model->cpuRunner("prefill")->bufferAllocations(), 1);
}

TEST(ModelTest, ZeroLogitRowsIsAllowed) {
  auto model = loadOrDie(simpleModel());
  ASSERT_TRUE(model);
  Call c = prompt({1, 2, 3});
  c.rows.clear();
  auto out = model->run("prefill", c.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  EXPECT_EQ(out->logitRows, 0);
}

TEST(ModelTest, RejectsBadRequestData) {
  auto model = loadOrDie(simpleModel());
  ASSERT_TRUE(model);
  Call c = prompt({1, 16});
  auto out = model->run("prefill", c.inputs());
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.status().message().find("token_ids[1] = 16, expected 0 to 15"),
            std::string::npos)
      << out.status().message();

  c = prompt({1, 2});
  c.rows = {2};
  out = model->run("prefill", c.inputs());
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.status().message().find("logit_rows[0] = 2"), std::string::npos)
      << out.status().message();

  c = prompt({1, 2}, 0, 63); // max_position_embeddings is 64
  out = model->run("prefill", c.inputs());
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.status().message().find("positions[1] = 64"), std::string::npos)
      << out.status().message();

  out = model->run("decode", prompt({1}).inputs());
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().code(), StatusCode::NotFound);
  EXPECT_NE(out.status().message().find("no plan 'decode'"), std::string::npos);
}

/// simpleModel() with a hidden state 32 wide (a block of MXFP4, a chunk of
/// row panels): the first 8 values normalized, the rest weighted 0.
TinyModel wideModel() {
  TinyModel m = simpleModel();
  m.hidden = 32;
  m.weights[kEmbed] = f32Weight("embed", {16, 32}, pseudoRandom(16 * 32, 1));
  std::vector<float> norm(32, 0.0f);
  for (int i = 0; i < 8; ++i)
    norm[i] = 1.0f;
  m.weights[kNorm] = f32Weight("norm", {32}, norm);
  for (BufferSpec &b : m.plans[0].buffers)
    if (!b.rowShape.empty() && b.rowShape[0] == 8)
      b.rowShape = {32};
  return m;
}

/// A BF16 weight [rows, cols] of pseudo-random values, row-major or in row
/// panels (support/WeightPanels.h).
TinyWeight bf16Weight(const std::string &name, int64_t rows, int64_t cols,
                      bool panels) {
  std::vector<float> v = pseudoRandom(size_t(rows * cols), 9);
  std::vector<uint8_t> bytes(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = floatToBf16(v[i]);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
  TinyWeight w;
  w.name = name;
  w.dtype = fb::DType::BF16;
  w.shape = {rows, cols};
  w.data = bytes;
  if (panels) {
    w.layout = fb::WeightLayout::DensePanel4;
    packPanels(bytes.data(), w.data.data(), rows, cols, 2);
  }
  return w;
}

/// wideModel() with its [16, 32] lm_head as MXFP4 in `layout`, every
/// element 1.0 (code 2, scale 2^0), `data` + `scales` bytes of them.
TinyModel mxfp4HeadModel(fb::WeightLayout layout, size_t data, size_t scales) {
  TinyModel m = wideModel();
  TinyWeight &head = m.weights[kLmHead];
  head.layout = layout;
  head.dtype = fb::DType::F4E2M1;
  head.shape = {16, 32};
  head.data.assign(data, 0x22);
  head.scales.assign(scales, 127);
  return m;
}

TEST(ModelTest, WeightsInEveryFormatBind) {
  // lm_head as MXFP4 with every element 1.0: the logits are the sum of the
  // normalized hidden state, for every vocab row.
  TinyModel m =
      mxfp4HeadModel(fb::WeightLayout::Mxfp4, 16 * 32 / 2, 16 * 32 / 32);
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  Call c = prompt({5});
  auto out = model->run("prefill", c.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  const float *e = weightData(m, kEmbed) + 5 * 32;
  double ss = 0, sum = 0;
  for (int i = 0; i < 32; ++i)
    ss += double(e[i]) * e[i];
  double r = 1 / std::sqrt(ss / 32 + 1e-5);
  for (int i = 0; i < 8; ++i)
    sum += e[i] * r;
  for (int v = 0; v < 16; ++v)
    EXPECT_NEAR(out->logits[v], sum, 1e-5);
}

// A weight stored only in the GPU matmul layout (a GPU-only artifact): the
// CPU refuses the artifact at load, naming the weight and the fix; loaded
// for a device it binds by shape, and a plan run without the device is an
// error instead of a read of bytes the CPU cannot decode.
TEST(ModelTest, GpuLayoutOnlyRunsOnADevice) {
  const int64_t shape[] = {16, 32};
  artifact::WeightBytes gpu = artifact::mxfp4GpuBytes(shape, 2);
  TinyModel m = mxfp4HeadModel(fb::WeightLayout::Mxfp4Gpu, size_t(gpu.data),
                               size_t(gpu.scales));
  const TinyWeight &head = m.weights[kLmHead];
  TempArtifact a(m);
  ASSERT_TRUE(a.status().isOk()) << a.status().toString();

  EXPECT_ERROR_CONTAINS(Model::load(a.path(), 1),
                        "weight '" + head.name +
                            "' (Mxfp4Gpu F4E2M1 [16, 32]) is stored only in "
                            "the GPU matmul layout",
                        "The CPU cannot run it: run it on the GPU (kiln-run or "
                        "kiln-bench --device=hip), or compile it with "
                        "--target=cpu,");

  LoadOptions forDevice;
  forDevice.threads = 1;
  forDevice.forDevice = true;
  auto model = Model::load(a.path(), forDevice);
  ASSERT_OK(model);
  Call c = prompt({5});
  EXPECT_ERROR_CONTAINS((*model)->run("prefill", c.inputs()),
                        "plan 'prefill' runs only on a GPU: weight '" +
                            head.name + "'");
}

TEST(ModelTest, RowPanelsGiveTheLogitsOfRowMajorAndOnlyMatmulsReadThem) {
  // A 64-wide hidden state: lm_head [16, 64] BF16 stored row-major, then in
  // row panels, gives the same bits.
  std::vector<std::vector<float>> logits;
  for (bool panels : {false, true}) {
    TinyModel m = wideModel();
    m.hidden = 64;
    m.weights[kEmbed] = f32Weight("embed", {16, 64}, pseudoRandom(16 * 64, 1));
    m.weights[kNorm] = f32Weight("norm", {64}, pseudoRandom(64, 2));
    for (BufferSpec &b : m.plans[0].buffers)
      if (!b.rowShape.empty() && b.rowShape[0] == 32)
        b.rowShape = {64};
    m.weights[kLmHead] = bf16Weight("lm_head", 16, 64, panels);
    auto model = loadOrDie(m);
    ASSERT_TRUE(model);
    auto out = model->run("prefill", prompt({5, 3}).inputs());
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    logits.emplace_back(out->logits, out->logits + 16);
  }
  EXPECT_EQ(logits[0], logits[1]);
  // The embedding reads rows itself: row panels there are refused, by name.
  TinyModel m = wideModel();
  m.weights[kEmbed] = bf16Weight("embed", 16, 32, /*panels=*/true);
  Status s = loadError(m);
  EXPECT_NE(s.message().find("weight 'embed' is stored in row panels"),
            std::string::npos)
      << s.toString();
}

TEST(ModelTest, BindsExpertStacksAndRank1Upcasts) {
  TinyModel m = simpleModel();
  TinyWeight stack;
  stack.name = "experts.{e}.w";
  stack.layout = fb::WeightLayout::Fp8Block128;
  stack.dtype = fb::DType::F8E4M3;
  stack.shape = {3, 130, 64};
  stack.data.assign(3 * 130 * 64, 0x38); // 1.0 in E4M3
  stack.scales.assign(3 * 2 * 1 * 4, 0);
  m.weights.push_back(stack);
  TinyWeight bf16;
  bf16.name = "bias";
  bf16.dtype = fb::DType::BF16;
  bf16.shape = {2};
  bf16.data = {0x80, 0x3f, 0x00, 0xc0}; // 1.0, -2.0
  m.weights.push_back(bf16);
  TempArtifact a(m);
  ASSERT_TRUE(a.status().isOk()) << a.status().toString();
  auto art = artifact::Artifact::open(a.path());
  ASSERT_TRUE(art.isOk()) << art.status().toString();
  BoundWeight s, b;
  bindWeight(**art, 3, s);
  bindWeight(**art, 4, b);
  ASSERT_TRUE(s.isStack()) << s.unsupported;
  EXPECT_EQ(s.view.format, cpu::WeightFormat::FP8);
  EXPECT_EQ(s.view.count, 3);
  EXPECT_EQ(s.view.rows, 130);
  EXPECT_EQ(s.view.cols, 64);
  EXPECT_EQ(s.view.dataStride, 130 * 64);
  EXPECT_EQ(s.view.scaleStride, 2 * 1 * 4);
  ASSERT_TRUE(b.isVector()) << b.unsupported;
  EXPECT_EQ(b.values[0], 1.0f);
  EXPECT_EQ(b.values[1], -2.0f);
}

// --- Plan validation ------------------------------------------------------

void expectLoadError(const TinyModel &m,
                     const std::vector<std::string> &parts) {
  Status s = loadError(m);
  ASSERT_FALSE(s.isOk()) << "the artifact loaded";
  for (const std::string &p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "'" << p << "' not in: " << s.message();
}

TEST(PlanValidationTest, RejectsWrongArgKind) {
  TinyModel m = simpleModel();
  m.plans[0].dispatches[3].args[1] = B(5);
  expectLoadError(m, {"plan 'prefill' dispatches[3] matmul (\"lm_head\")",
                      "args[1] 'weight': is a Buffer, expected a Weight"});
}

TEST(PlanValidationTest, RejectsMatmulWidthMismatch) {
  TinyModel m = simpleModel();
  m.weights[kLmHead] = f32Weight("lm_head", {16, 4}, pseudoRandom(16 * 4, 3));
  expectLoadError(m,
                  {"dispatches[3] matmul", "args[0] 'x'",
                   "8 values per row, expected 4", "the weight 'lm_head' K"});
}

TEST(PlanValidationTest, RejectsMatmulOutputWidth) {
  TinyModel m = simpleModel();
  m.plans[0].buffers[7].rowShape = {15};
  expectLoadError(m, {"dispatches[3] matmul", "args[2] 'out'",
                      "15 values per row, expected 16"});
}

TEST(PlanValidationTest, RejectsNormWeightLength) {
  TinyModel m = simpleModel();
  m.weights[kNorm] = f32Weight("norm", {5}, pseudoRandom(5, 2));
  expectLoadError(m, {"dispatches[1] rms_norm", "not a multiple of 5",
                      "the weight's length"});
}

TEST(ModelTest, AllReduceOnOneRankIsACopy) {
  TinyModel m = allReduceModel();
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  Call c = prompt({3, 5});
  auto out = model->run("prefill", c.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  ASSERT_EQ(out->hiddenSize, 8);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(out->hidden[r * 8 + i], embedRow(m, c.ids[r])[i]);
}

TEST(PlanValidationTest, AllReduceKeepsItsRows) {
  TinyModel m = allReduceModel();
  m.plans[0].buffers[8].rowShape = {4};
  expectLoadError(m, {"dispatches[1] all_reduce (\"reduce\")",
                      "args[1] 'out': buffer 'reduced' has 4 values per row, "
                      "expected 8 (as args[0] 'x' 'h')"});
}

/// Appends a router [experts, 8] and its bias [experts]; the router's index.
uint32_t addRouter(TinyModel &m, int64_t experts) {
  uint32_t w = uint32_t(m.weights.size());
  m.weights.push_back(
      f32Weight("router", {experts, 8}, pseudoRandom(size_t(experts * 8), 5)));
  m.weights.push_back(
      f32Weight("bias", {experts}, pseudoRandom(size_t(experts), 6)));
  return w;
}

TEST(PlanValidationTest, MoeStacksMustLieInsideTheRoutersExperts) {
  // Two experts; the stacks claim to start at expert 1 (one rank's share
  // under expert parallelism), which would run past the router's two.
  TinyModel m = simpleModel();
  uint32_t w = addRouter(m, 2);
  m.weights.push_back(f32Weight("gate", {2, 4, 8}, pseudoRandom(64, 7)));
  m.weights.push_back(f32Weight("up", {2, 4, 8}, pseudoRandom(64, 8)));
  m.weights.push_back(f32Weight("down", {2, 8, 4}, pseudoRandom(64, 9)));
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"moe", Rows::Tokens, false, {8}}); // 8
  abi::MoeParams params;
  params.topK = 1;
  params.nGroup = 1;
  params.topkGroup = 1;
  params.blockSize = 16;
  params.scale = 1.0f;
  params.expertOffset = 0;
  p.dispatches.insert(p.dispatches.begin() + 1,
                      {Kernel::Moe,
                       {B(4), W(w), W(w + 1), W(w + 2), W(w + 3), W(w + 4),
                        None(), None(), None(), B(8)},
                       params,
                       "moe"});
  EXPECT_TRUE(loadOrDie(m)) << "offset 0 with all the experts loads";
  params.expertOffset = 1;
  p.dispatches[1].params = params;
  expectLoadError(m, {"dispatches[1] moe (\"moe\")",
                      "params.expert_offset 1: the stacks' experts [1, 3) "
                      "must lie inside the 2 the router chooses from"});
}

TEST(PlanValidationTest, DispatchRowsSplitsTheRoutersExpertsEvenly) {
  // dispatch_rows of 4 experts, 2 a rank (2 ranks: one i32 word of route
  // bits a row), and its combine_rows.
  TinyModel m = simpleModel();
  uint32_t w = addRouter(m, 4);
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"rows", Rows::Routed, false, {8}});  // 8
  p.buffers.push_back({"routes", Rows::Tokens, true, {1}}); // 9
  p.buffers.push_back({"back", Rows::Tokens, false, {8}});  // 10
  abi::DispatchRowsParams params;
  params.topK = 1;
  params.nGroup = 1;
  params.topkGroup = 1;
  params.expertsPerRank = 2;
  p.dispatches.insert(p.dispatches.begin() + 1,
                      {Kernel::DispatchRows,
                       {B(4), W(w), W(w + 1), B(8), B(9)},
                       params,
                       "dispatch"});
  p.dispatches.insert(
      p.dispatches.begin() + 2,
      {Kernel::CombineRows, {B(8), B(9), B(10)}, {}, "combine"});
  EXPECT_TRUE(loadOrDie(m)) << "2 experts a rank of 4 loads";
  params.expertsPerRank = 3;
  p.dispatches[1].params = params;
  expectLoadError(m, {"dispatches[1] dispatch_rows (\"dispatch\")",
                      "params.experts_per_rank 3 does not divide the "
                      "router's 4 experts"});
  params.expertsPerRank = 1; // 4 ranks still fit one word; a row of 2 not
  p.dispatches[1].params = params;
  p.buffers[9].rowShape = {2};
  expectLoadError(m, {"dispatches[1] dispatch_rows",
                      "2 values per row, expected 1",
                      "a bit per rank, 32 to a word"});
}

TEST(PlanValidationTest, RejectsUnknownKernel) {
  TinyModel m = simpleModel();
  m.kernelNames["rms_norm"] = "flash_attention";
  expectLoadError(
      m, {"dispatches[1] flash_attention", "unknown kernel 'flash_attention'"});
}

TEST(PlanValidationTest, RejectsArgCountAndAttrs) {
  TinyModel m = simpleModel();
  m.plans[0].dispatches[0].args.pop_back();
  expectLoadError(m, {"dispatches[0] embedding", "has 2 args, expected 3",
                      "ids, table, out"});
  m = simpleModel();
  m.plans[0].dispatches[1].params = {};
  expectLoadError(m, {"dispatches[1] rms_norm", "params: holds NONE",
                      "expected RmsNormParams"});
  // Another kernel's parameter table.
  m = simpleModel();
  m.plans[0].dispatches[1].params = abi::LayerNormParams{1e-5f};
  expectLoadError(m, {"dispatches[1] rms_norm",
                      "params: holds LayerNormParams, expected RmsNormParams"});
  // Parameters on a kernel that takes none.
  m = simpleModel();
  m.plans[0].dispatches[0].params = abi::ScaleParams{1.0f};
  expectLoadError(m, {"dispatches[0] embedding",
                      "params: holds ScaleParams, expected NONE"});
}

TEST(PlanValidationTest, RejectsInPlaceMatmul) {
  TinyModel m = simpleModel();
  m.weights.push_back(f32Weight("square", {8, 8}, pseudoRandom(64, 4)));
  m.plans[0].dispatches.insert(m.plans[0].dispatches.begin() + 3,
                               {Kernel::Matmul, {B(6), W(3), B(6)}, {}, "sq"});
  expectLoadError(m, {"dispatches[3] matmul (\"sq\")",
                      "args[2] 'out': is the same buffer as args[0] 'x'",
                      "cannot work in place"});
}

TEST(PlanValidationTest, RejectsBadPlanIo) {
  TinyModel m = simpleModel();
  m.plans[0].buffers[3].rows = Rows::Tokens;
  expectLoadError(
      m, {"plan 'prefill': input logit_rows", "expected I32 [Selected]"});
  m = simpleModel();
  m.plans[0].inputs = {0, 1, 2};
  expectLoadError(m, {"has 3 inputs, expected 4"});
}

TEST(PlanValidationTest, RejectsVocabMismatchWithConfig) {
  TinyModel m = simpleModel();
  m.vocab = 17;
  m.weights[kEmbed] = f32Weight("embed", {17, 8}, pseudoRandom(17 * 8, 1));
  expectLoadError(m,
                  {"logits have 16 values per row", "config.vocab_size is 17"});
}

TEST(PlanValidationTest, RejectsCacheWidthMismatch) {
  TinyModel m = attentionModel({"prefill"});
  m.caches[0].width = 6;
  expectLoadError(m, {"dispatches[2] kv_append (\"k\")", "args[3] 'values'",
                      "8 values per row, expected 6",
                      "the width of cache 'layers.0.k'"});
}

TEST(PlanValidationTest, SplitConcatGeometryFromTheDispatch) {
  // x [T, 2, 4] split on axis 2 into [T, 2, 3] and [T, 2, 1], then
  // concatenated back; the whole buffer is stored flat ([8]), as a reshape
  // alias would be, and the first piece reuses a flat [6] buffer: the
  // dispatch's second int (2 blocks per row) carries the geometry.
  TinyModel m = simpleModel();
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"a", Rows::Tokens, false, {6}});    // 8
  p.buffers.push_back({"b", Rows::Tokens, false, {2, 1}}); // 9
  p.buffers.push_back({"c", Rows::Tokens, false, {8}});    // 10
  p.dispatches.insert(
      p.dispatches.begin() + 1,
      {{Kernel::Split, {B(4), B(8), B(9)}, abi::SplitParams{2, 2}, "split"},
       {Kernel::Concat, {B(9), B(8), B(10)}, abi::ConcatParams{2, 2}, "concat"},
       {Kernel::Split, {B(10), B(9), B(8)}, abi::SplitParams{2, 2}, "split2"},
       {Kernel::Concat,
        {B(8), B(9), B(4)},
        abi::ConcatParams{2, 2},
        "concat2"}});
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  // split then swap the pieces, split the other way and swap back: the
  // embedding row must come out unchanged.
  Call c = prompt({7, 2});
  auto out = model->run("prefill", c.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  for (int r = 0; r < 2; ++r) {
    std::vector<double> expect = headOf(m, embedRow(m, c.ids[r]));
    for (int v = 0; v < 16; ++v)
      EXPECT_NEAR(out->logits[r * 16 + v], expect[v], 1e-5);
  }
}

TEST(PlanValidationTest, SplitWithoutGeometryIsAnError) {
  TinyModel m = simpleModel();
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"a", Rows::Tokens, false, {6}}); // 8
  p.buffers.push_back({"b", Rows::Tokens, false, {2}}); // 9
  p.dispatches.insert(p.dispatches.begin() + 1,
                      {Kernel::Split, {B(4), B(8), B(9)}, {}, "split"});
  expectLoadError(
      m, {"dispatches[1] split", "params: holds NONE", "expected SplitParams"});
  // Parameters whose `outer` was left at 0.
  p.dispatches[1].params = abi::SplitParams{2};
  expectLoadError(m, {"dispatches[1] split",
                      "0 blocks per row do not divide every operand's width"});
}

TEST(PlanValidationTest, SplitBlocksMustDivideTheWidths) {
  TinyModel m = simpleModel();
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"a", Rows::Tokens, false, {6}}); // 8
  p.buffers.push_back({"b", Rows::Tokens, false, {2}}); // 9
  p.dispatches.insert(
      p.dispatches.begin() + 1,
      {Kernel::Split, {B(4), B(8), B(9)}, abi::SplitParams{2, 3}, "split"});
  expectLoadError(m, {"dispatches[1] split", "axis 2",
                      "3 blocks per row do not divide every operand's width"});
}

// --- Caches and sequences -------------------------------------------------

TEST(SequenceTest, OpenTruncateClose) {
  auto model = loadOrDie(attentionModel());
  ASSERT_TRUE(model);
  auto s0 = Session::open(*model);
  auto s1 = Session::open(*model);
  ASSERT_TRUE(s0.isOk() && s1.isOk());
  EXPECT_EQ(s0->id(), 0);
  EXPECT_EQ(s1->id(), 1);
  ASSERT_TRUE(
      model->run("prefill", prompt({1, 2, 3, 4, 5}, 1).inputs()).isOk());
  EXPECT_EQ(s1->length(), 5);
  EXPECT_EQ(s0->length(), 0);
  s1->truncate(2);
  EXPECT_EQ(s1->length(), 2);
  // Position 5 would skip rows 2..4.
  auto bad = model->run("decode", prompt({1}, 1, 5).inputs());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("skips past its length 2"),
            std::string::npos)
      << bad.status().message();
  EXPECT_EQ(s1->length(), 2);
  ASSERT_TRUE(model->run("decode", prompt({1}, 1, 2).inputs()).isOk());
  EXPECT_EQ(s1->length(), 3);
  {
    Session moved = std::move(*s1);
    EXPECT_EQ(moved.id(), 1);
  }
  EXPECT_EQ(model->sequenceLength(1), 0);
  auto again = Session::open(*model);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->id(), 1);
}

TEST(SequenceTest, TruncateByOwner) {
  TinyModel m = attentionModel({"prefill"});
  m.caches.push_back({"draft.k", 4, true, "draft"});
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  ASSERT_EQ(model->cacheCount(), 3u);
  EXPECT_EQ(model->cacheOwner(2), "draft");
  ASSERT_TRUE(model->run("prefill", prompt({1, 2, 3}).inputs()).isOk());
  EXPECT_EQ(model->sequenceLength(0, kMainCaches), 3);
  EXPECT_EQ(model->sequenceLength(0, kDraftCaches), 0);
  model->truncate(0, 1, kDraftCaches);
  EXPECT_EQ(model->sequenceLength(0), 3);
  model->truncate(0, 1);
  EXPECT_EQ(model->sequenceLength(0), 1);
}

TEST(SequenceTest, AttentionMatchesHandComputation) {
  TinyModel m = attentionModel();
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  std::vector<int32_t> ids = {4, 1, 9, 3, 3};
  auto out = model->run("prefill", prompt(ids).inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  const float *norm = weightData(m, kNorm);
  // n_t = rms_norm(e_t); v_t = e_t; per head h (4 dims): softmax over keys
  // s <= t of 0.5 * q.k; r = n + attention; logits = head(r).
  std::vector<std::vector<double>> n, e;
  for (int32_t id : ids) {
    e.push_back(embedRow(m, id));
    double ss = 0;
    for (double v : e.back())
      ss += v * v;
    double r = 1 / std::sqrt(ss / 8 + 1e-5);
    std::vector<double> row(8);
    for (int i = 0; i < 8; ++i)
      row[i] = e.back()[i] * r * norm[i];
    n.push_back(row);
  }
  for (size_t t = 0; t < ids.size(); ++t) {
    std::vector<double> r = n[t];
    for (int h = 0; h < 2; ++h) {
      std::vector<double> sc;
      double mx = -1e300;
      for (size_t s = 0; s <= t; ++s) {
        double d = 0;
        for (int i = 0; i < 4; ++i)
          d += n[t][h * 4 + i] * n[s][h * 4 + i];
        sc.push_back(0.5 * d);
        mx = std::max(mx, sc.back());
      }
      double z = 0;
      for (double &v : sc)
        z += (v = std::exp(v - mx));
      for (size_t s = 0; s <= t; ++s)
        for (int i = 0; i < 4; ++i)
          r[h * 4 + i] += sc[s] / z * e[s][h * 4 + i];
    }
    std::vector<double> expect = headOf(m, r);
    for (int v = 0; v < 16; ++v)
      EXPECT_NEAR(out->logits[t * 16 + v], expect[v],
                  2e-5 * (1 + std::fabs(expect[v])))
          << "position " << t << " token " << v;
  }
}

TEST(ModelTest, LoadErrorsNameTheFile) {
  auto model = Model::load("/nonexistent/m.kiln", 1);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("/nonexistent/m.kiln"),
            std::string::npos);
  LoadOptions bad;
  bad.threads = -1;
  EXPECT_FALSE(Model::load("/nonexistent/m.kiln", bad).isOk());
}

TEST(ModelTest, ArtifactWithoutTokenizer) {
  TinyModel m = simpleModel();
  m.withTokenizer = false;
  auto model = loadOrDie(m);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->tokenizer(), nullptr);
}

} // namespace
} // namespace kiln::engine::test
