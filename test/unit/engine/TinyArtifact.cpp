//===- TinyArtifact.cpp - Hand-built artifacts for the engine tests -------===//

#include "test/unit/engine/TinyArtifact.h"

#include "runtime/artifact/ArtifactWriter.h"
#include "runtime/artifact/PlanTable.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <unistd.h>

namespace kiln::engine::test {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

std::vector<float> pseudoRandom(size_t n, uint32_t seed, float scale) {
  std::vector<float> out(n);
  uint32_t x = 2463534242u ^ (seed * 0x9E3779B9u);
  for (float &v : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = scale * (float(x % 20000) / 10000.0f - 1.0f);
  }
  return out;
}

TinyWeight f32Weight(const std::string &name, std::vector<int64_t> shape,
                     const std::vector<float> &values) {
  TinyWeight w;
  w.name = name;
  w.shape = std::move(shape);
  w.data.resize(values.size() * 4);
  std::memcpy(w.data.data(), values.data(), w.data.size());
  return w;
}

std::vector<BufferSpec> standardInputs() {
  return {{"token_ids", Rows::Tokens, true, {}},
          {"seq_ids", Rows::Tokens, true, {}},
          {"positions", Rows::Tokens, true, {}},
          {"logit_rows", Rows::Selected, true, {}}};
}

namespace {

void addStandardWeights(TinyModel &m) {
  m.weights.push_back(f32Weight("embed", {m.vocab, m.hidden},
                                pseudoRandom(size_t(m.vocab * m.hidden), 1)));
  std::vector<float> norm = pseudoRandom(size_t(m.hidden), 2, 0.5f);
  for (float &v : norm)
    v += 1.0f;
  m.weights.push_back(f32Weight("norm", {m.hidden}, norm));
  m.weights.push_back(f32Weight("lm_head", {m.vocab, m.hidden},
                                pseudoRandom(size_t(m.vocab * m.hidden), 3)));
}

} // namespace

TinyModel simpleModel(const std::vector<std::string> &plans) {
  TinyModel m;
  addStandardWeights(m);
  for (const std::string &name : plans) {
    PlanSpec p;
    p.name = name;
    p.buffers = standardInputs();
    p.buffers.push_back({"h", Rows::Tokens, false, {8}});         // 4
    p.buffers.push_back({"hidden", Rows::Tokens, false, {8}});    // 5
    p.buffers.push_back({"sel", Rows::Selected, false, {8}});     // 6
    p.buffers.push_back({"logits", Rows::Selected, false, {16}}); // 7
    p.inputs = {0, 1, 2, 3};
    p.outputs = {7, 5};
    p.dispatches = {
        {Kernel::Embedding, {B(0), W(kEmbed), B(4)}, {}, "embed"},
        {Kernel::RmsNorm,
         {B(4), W(kNorm), B(5)},
         abi::RmsNormParams{1e-5f},
         "norm"},
        {Kernel::TakeRows, {B(5), B(3), B(6)}, {}, "select"},
        {Kernel::Matmul, {B(6), W(kLmHead), B(7)}, {}, "lm_head"},
    };
    m.plans.push_back(std::move(p));
  }
  return m;
}

TinyModel allReduceModel() {
  TinyModel m = simpleModel();
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"reduced", Rows::Tokens, false, {8}}); // 8
  p.dispatches.insert(
      p.dispatches.begin() + 1,
      {Kernel::AllReduce, {B(4), B(8)}, abi::AllReduceParams{}, "reduce"});
  p.dispatches[2].args[0] = B(8); // the norm reads the sum
  p.outputs = {7, 8};
  return m;
}

TinyModel rowExchangeModel(int ranks, int rank, int group) {
  TinyModel m = simpleModel();
  m.ranks = ranks;
  m.rank = rank;
  m.attentionDataParallel = true;
  m.tensorParallel = group;
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"all", Rows::Gathered, false, {8}});    // 8
  p.buffers.push_back({"scaled", Rows::Gathered, false, {8}}); // 9
  p.buffers.push_back({"mine", Rows::Tokens, false, {8}});     // 10
  p.dispatches.insert(p.dispatches.begin() + 1,
                      {{Kernel::AllGatherRows,
                        {B(4), B(8)},
                        abi::AllGatherRowsParams{group},
                        "gather"},
                       {Kernel::Scale,
                        {B(8), B(9)},
                        abi::ScaleParams{float(rank + 1)},
                        "experts"},
                       {Kernel::ReduceScatterRows,
                        {B(9), B(10)},
                        abi::ReduceScatterRowsParams{group},
                        "scatter"}});
  p.dispatches[4].args[0] = B(10); // the norm reads this rank's rows
  p.outputs = {7, 10};
  return m;
}

TinyModel attentionModel(const std::vector<std::string> &plans) {
  TinyModel m;
  addStandardWeights(m);
  m.caches = {{"layers.0.k", 8, false, "main"},
              {"layers.0.v", 8, false, "main"}};
  for (const std::string &name : plans) {
    PlanSpec p;
    p.name = name;
    p.buffers = standardInputs();
    p.buffers.push_back({"h", Rows::Tokens, false, {8}});    // 4
    p.buffers.push_back({"n", Rows::Tokens, false, {2, 4}}); // 5
    p.buffers.push_back({"a", Rows::Tokens, false, {2, 4}}); // 6
    p.buffers.push_back({"r", Rows::Tokens, false, {8}});    // 7
    p.buffers.push_back({"sel", Rows::Selected, false, {8}});
    p.buffers.push_back({"logits", Rows::Selected, false, {16}}); // 9
    p.buffers.push_back({"hidden", Rows::Tokens, false, {8}});
    p.inputs = {0, 1, 2, 3};
    p.outputs = {9, 10};
    p.dispatches = {
        {Kernel::Embedding, {B(0), W(kEmbed), B(4)}, {}, "embed"},
        {Kernel::RmsNorm,
         {B(4), W(kNorm), B(5)},
         abi::RmsNormParams{1e-5f},
         "norm"},
        {Kernel::KvAppend, {C(0), B(1), B(2), B(5)}, {}, "k"},
        {Kernel::KvAppend, {C(1), B(1), B(2), B(4)}, {}, "v"},
        {Kernel::GqaAttention,
         {B(5), C(0), C(1), B(1), B(2), B(6)},
         abi::GqaAttentionParams{2, 0.5f},
         "attn"},
        {Kernel::Add, {B(5), B(6), B(7)}, {}, "residual"},
        {Kernel::RmsNorm,
         {B(7), W(kNorm), B(10)},
         abi::RmsNormParams{1e-5f},
         "final_norm"},
        {Kernel::TakeRows, {B(10), B(3), B(8)}, {}, "select"},
        {Kernel::Matmul, {B(8), W(kLmHead), B(9)}, {}, "lm_head"},
    };
    m.plans.push_back(std::move(p));
  }
  return m;
}

namespace {

Offset<fb::Tokenizer> buildTokenizer(FlatBufferBuilder &fbb) {
  std::vector<std::string> vocab = {"a", "b", "c", "ab", "Ġ", "Ġa", "Ċ"};
  vocab.resize(16);
  std::vector<std::string> merges = {"a b", "Ġ a"};
  const char *specials[] = {"[gMASK]",  "<sop>",         "<|system|>",
                            "<|user|>", "<|assistant|>", "<|observation|>",
                            "<think>",  "</think>",      "<|endoftext|>"};
  std::vector<Offset<fb::AddedToken>> added;
  for (int i = 0; i < 9; ++i)
    added.push_back(fb::CreateAddedTokenDirect(fbb, 7 + i, specials[i], true));
  auto v = fbb.CreateVectorOfStrings(vocab);
  auto mg = fbb.CreateVectorOfStrings(merges);
  auto pattern = fbb.CreateString("\\S+|\\s+");
  auto behavior = fbb.CreateString("Isolated");
  auto a = fbb.CreateVector(added);
  return fb::CreateTokenizer(fbb, v, mg, pattern, behavior, false, false, a);
}

/// A kernel table entry, with a gfx950 launch when the model asks for one.
Offset<fb::Kernel> gpuKernel(FlatBufferBuilder &fbb, const TinyModel &model,
                             const std::string &name) {
  if (model.gpuCode.empty() ||
      std::find(model.gpuKernels.begin(), model.gpuKernels.end(), name) ==
          model.gpuKernels.end())
    return fb::CreateKernelDirect(fbb, name.c_str());
  std::string symbol = "kiln_test_" + name + "_gfx950";
  std::vector<int64_t> mul = {1, 0, 0}, add = {0, 1, 1}, div = {1, 1, 1};
  std::vector<int32_t> rowsOf = {-1, -1, -1};
  std::vector<fb::GpuArg> args = {{fb::GpuArgPart::Data, 0},
                                  {fb::GpuArgPart::Rows, 0}};
  std::vector<Offset<fb::GpuLaunch>> launches = {fb::CreateGpuLaunchDirect(
      fbb, symbol.c_str(), 64, 0, &mul, &add, &div, &rowsOf, &args)};
  std::vector<Offset<fb::KernelSymbol>> symbols = {fb::CreateKernelSymbolDirect(
      fbb, "gfx950", symbol.c_str(), 0, nullptr, 0, &launches)};
  return fb::CreateKernelDirect(fbb, name.c_str(), &symbols);
}

} // namespace

Status writeTinyArtifact(const std::string &path, const TinyModel &model) {
  KILN_ASSIGN_OR_RETURN(auto writer, artifact::ArtifactWriter::create(path));
  std::vector<fb::Extent> data, scales;
  for (const TinyWeight &w : model.weights) {
    KILN_ASSIGN_OR_RETURN(fb::Extent d,
                          writer->writeSegment(w.data.data(), w.data.size()));
    data.push_back(d);
    fb::Extent s{};
    if (!w.scales.empty()) {
      KILN_ASSIGN_OR_RETURN(
          s, writer->writeSegment(w.scales.data(), w.scales.size()));
    }
    scales.push_back(s);
  }
  fb::Extent gpuCode{};
  if (!model.gpuCode.empty()) {
    KILN_ASSIGN_OR_RETURN(gpuCode, writer->writeSegment(model.gpuCode.data(),
                                                        model.gpuCode.size()));
  }

  FlatBufferBuilder fbb;
  std::vector<Offset<fb::Weight>> weights;
  for (size_t i = 0; i < model.weights.size(); ++i) {
    const TinyWeight &w = model.weights[i];
    weights.push_back(fb::CreateWeightDirect(
        fbb, w.name.c_str(), w.layout, w.dtype, &w.shape, &data[i],
        w.scales.empty() ? nullptr : &scales[i], "test"));
  }
  std::vector<Offset<fb::Cache>> caches;
  for (const CacheSpec &c : model.caches)
    caches.push_back(artifact::writeCache(fbb, c));
  std::map<std::string, uint32_t> kernelIndex;
  std::vector<Offset<fb::Kernel>> kernels;
  std::vector<Offset<fb::Plan>> plans;
  for (const PlanSpec &p : model.plans) {
    std::vector<uint32_t> kernelOf;
    for (const DispatchSpec &d : p.dispatches) {
      std::string name(kiln::abi::kKernelNames[size_t(d.kernel)]);
      if (auto renamed = model.kernelNames.find(name);
          renamed != model.kernelNames.end())
        name = renamed->second;
      auto [it, inserted] = kernelIndex.emplace(name, uint32_t(kernels.size()));
      if (inserted)
        kernels.push_back(gpuKernel(fbb, model, name));
      kernelOf.push_back(it->second);
    }
    plans.push_back(artifact::writePlan(fbb, p, kernelOf));
  }
  auto config = fb::CreateModelConfigDirect(
      fbb, "glm_moe_dsa", "{}", model.hidden, model.vocab, 1,
      model.maxPositions, &model.eos, model.eos.empty() ? 0 : model.eos[0], 0,
      0, model.ranks, model.rank, model.tensorParallel,
      model.attentionDataParallel);
  Offset<fb::Tokenizer> tokenizer =
      model.withTokenizer ? buildTokenizer(fbb) : Offset<fb::Tokenizer>();
  std::vector<Offset<flatbuffers::String>> files;
  for (const std::string &name : writer->fileNames())
    files.push_back(fbb.CreateString(name));
  std::vector<Offset<flatbuffers::String>> targets = {
      fbb.CreateString("x86_64")};
  std::vector<Offset<fb::CodeObject>> codeObjects;
  if (!model.gpuCode.empty()) {
    targets.push_back(fbb.CreateString("gfx950"));
    codeObjects.push_back(fb::CreateCodeObjectDirect(
        fbb, "gfx950", "amdgcn-amd-amdhsa--gfx950", &gpuCode));
  }
  fbb.Finish(fb::CreateArtifactDirect(
                 fbb, "engine-test", &targets, &files, config, tokenizer,
                 &weights, &caches, &kernels,
                 codeObjects.empty() ? nullptr : &codeObjects, &plans),
             fb::ArtifactIdentifier());
  return writer->finish(fbb);
}

std::string tempPath(const std::string &name) {
  static std::atomic<int> counter{0};
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string base = dir && *dir ? dir : "/tmp";
  return base + "/kiln-engine-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++) + "-" + name;
}

} // namespace kiln::engine::test
