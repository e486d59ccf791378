//===- SampleArtifact.cpp - A small artifact for the artifact tests -------===//

#include "test/unit/artifact/SampleArtifact.h"

namespace kiln::artifact::test {

std::vector<uint8_t> sampleBytes(size_t size, uint32_t seed) {
  std::vector<uint8_t> out(size);
  uint32_t x = 2463534242u ^ (seed * 0x9E3779B9u);
  for (uint8_t &b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Streams `size` bytes in `chunk`-byte appends, as the compiler does.
Result<fb::Extent> streamSegment(ArtifactWriter &writer, size_t size,
                                 uint32_t seed, size_t chunk = 1000) {
  std::vector<uint8_t> bytes = sampleBytes(size, seed);
  KILN_RETURN_IF_ERROR(writer.beginSegment());
  for (size_t done = 0; done < size; done += chunk)
    KILN_RETURN_IF_ERROR(
        writer.append(bytes.data() + done, std::min(chunk, size - done)));
  return writer.endSegment();
}

Offset<fb::Plan> buildPlan(FlatBufferBuilder &fbb, const std::string &name,
                           const SampleOptions &options) {
  auto buffer = [&](const char *n, fb::DType dtype, fb::Rows rows,
                    std::vector<int64_t> rowShape) {
    return fb::CreateBufferDirect(fbb, n, dtype, rows, &rowShape);
  };
  std::vector<Offset<fb::Buffer>> buffers = {
      buffer("token_ids", fb::DType::I32, fb::Rows::Tokens, {}),
      buffer("hidden", fb::DType::F32, fb::Rows::Tokens, {8}),
      buffer("logits", fb::DType::F32, fb::Rows::Selected, {16})};
  std::vector<uint32_t> inputs = {0}, outputs = {2, 1};

  std::vector<fb::Arg> embedArgs = {{fb::ArgKind::Buffer, 0},
                                    {fb::ArgKind::Weight, 0},
                                    {fb::ArgKind::Buffer, 1}};
  std::vector<fb::Arg> moeArgs = {{fb::ArgKind::Buffer, 1},
                                  {fb::ArgKind::Weight, options.moeWeightArg},
                                  {fb::ArgKind::Cache, 0},
                                  {fb::ArgKind::None, 0},
                                  {fb::ArgKind::Buffer, 2}};
  auto moeParams = fb::CreateMoeParams(fbb, /*top_k=*/8, /*n_group=*/2,
                                       /*topk_group=*/1, true, 64, 2.5f)
                       .Union();
  std::vector<Offset<fb::Dispatch>> dispatches = {
      fb::CreateDispatchDirect(fbb, 0, &embedArgs, fb::KernelParams::NONE, 0,
                               "embed"),
      fb::CreateDispatchDirect(fbb, options.moeKernel, &moeArgs,
                               fb::KernelParams::MoeParams, moeParams,
                               "layers.0.moe")};
  return fb::CreatePlanDirect(fbb, name.c_str(), &buffers, &inputs, &outputs,
                              &dispatches);
}

Offset<fb::Tokenizer> buildTokenizer(FlatBufferBuilder &fbb,
                                     const SampleOptions &options) {
  std::vector<Offset<flatbuffers::String>> vocab;
  for (const char *t : {"a", "b", "c", "ab", "Ġ", "Ġa"})
    vocab.push_back(fbb.CreateString(t));
  std::vector<Offset<flatbuffers::String>> merges = {fbb.CreateString("a b"),
                                                     fbb.CreateString("Ġ a")};
  std::vector<Offset<fb::AddedToken>> added = {
      fb::CreateAddedTokenDirect(fbb, options.addedTokenId, "<|user|>", true)};
  return fb::CreateTokenizerDirect(fbb, &vocab, &merges, "\\s+|\\S+",
                                   "Isolated", false, false, &added,
                                   "{{ messages }}");
}

} // namespace

Status writeSample(const std::string &path, const SampleOptions &options) {
  KILN_ASSIGN_OR_RETURN(auto writer,
                        ArtifactWriter::create(path, options.maxFileBytes));
  KILN_ASSIGN_OR_RETURN(fb::Extent embed,
                        streamSegment(*writer, EMBED_BYTES, 0));
  KILN_ASSIGN_OR_RETURN(fb::Extent experts,
                        streamSegment(*writer, EXPERTS_BYTES, 1));
  fb::Extent expertScales;
  if (options.writeMxfp4Scales) {
    KILN_ASSIGN_OR_RETURN(expertScales,
                          streamSegment(*writer, EXPERTS_SCALE_BYTES, 2));
  }
  KILN_ASSIGN_OR_RETURN(fb::Extent wq, streamSegment(*writer, WQ_BYTES, 3));
  KILN_ASSIGN_OR_RETURN(fb::Extent wqScales,
                        streamSegment(*writer, WQ_SCALE_BYTES, 4));
  KILN_ASSIGN_OR_RETURN(fb::Extent code, streamSegment(*writer, CODE_BYTES, 5));
  fb::Extent gpuCode, gpuCopy, gpuScales;
  if (options.gpu) {
    KILN_ASSIGN_OR_RETURN(gpuCode, streamSegment(*writer, CODE_BYTES, 6));
    KILN_ASSIGN_OR_RETURN(gpuCopy,
                          streamSegment(*writer, options.gpuCopyBytes, 7));
    KILN_ASSIGN_OR_RETURN(gpuScales,
                          streamSegment(*writer, options.gpuScaleBytes, 8));
  }

  FlatBufferBuilder fbb;
  std::vector<int64_t> expertShape = {2, 8, 64}, wqShape = {200, 130};
  std::vector<Offset<fb::Weight>> weights = {
      fb::CreateWeightDirect(fbb, EMBED, fb::WeightLayout::Dense,
                             fb::DType::BF16, &options.embedShape, &embed,
                             nullptr, "bf16"),
      fb::CreateWeightDirect(
          fbb, EXPERTS, fb::WeightLayout::Mxfp4, fb::DType::F4E2M1,
          &expertShape, &experts,
          options.writeMxfp4Scales ? &expertScales : nullptr,
          "bf16->mxfp4(even)",
          options.gpu ? options.gpuLayout : fb::WeightLayout::Dense,
          options.gpu ? &gpuCopy : nullptr, options.gpu ? &gpuScales : nullptr),
      fb::CreateWeightDirect(fbb, WQ, fb::WeightLayout::Fp8Block128,
                             fb::DType::F8E4M3, &wqShape, &wq, &wqScales,
                             "fp8")};
  std::vector<Offset<fb::Cache>> caches = {fb::CreateCacheDirect(
      fbb, "layers.0.latent", options.cacheWidth, options.cacheDType, "main")};
  std::vector<Offset<fb::KernelSymbol>> symbols = {
      fb::CreateKernelSymbolDirect(fbb, "x86_64", "kiln_embed", 0)};
  if (options.gpu) {
    std::vector<int64_t> mul = {0, 1, 0}, add = {4, 0, 1},
                         div = {1, options.gridDiv, 1};
    std::vector<fb::GpuArg> args = {{fb::GpuArgPart::Data, 0},
                                    {fb::GpuArgPart::Scales, 1},
                                    options.launchArg,
                                    {fb::GpuArgPart::Rows, 0}};
    std::vector<Offset<fb::GpuLaunch>> launches = {fb::CreateGpuLaunchDirect(
        fbb, "kiln_embed_gfx950", options.launchWorkgroupSize, 0, &mul, &add,
        &div, nullptr, &args)};
    std::vector<fb::GpuScratch> scratch = {fb::GpuScratch(64, 0, 0)};
    symbols.push_back(
        fb::CreateKernelSymbolDirect(fbb, "gfx950", "kiln_embed_gfx950", 1,
                                     nullptr, 0, &launches, &scratch));
  }
  std::vector<Offset<fb::Kernel>> kernels = {
      fb::CreateKernelDirect(fbb, "embed", &symbols),
      fb::CreateKernelDirect(fbb, "moe", nullptr)};
  std::vector<Offset<fb::CodeObject>> codeObjects = {fb::CreateCodeObjectDirect(
      fbb, "x86_64", "x86_64-unknown-linux-gnu", &code)};
  if (options.gpu)
    codeObjects.push_back(fb::CreateCodeObjectDirect(
        fbb, "gfx950", "amdgcn-amd-amdhsa--gfx950", &gpuCode));
  std::vector<Offset<fb::Plan>> plans = {
      buildPlan(fbb, "decode", options),
      buildPlan(fbb, options.secondPlanName, options)};
  std::vector<int32_t> eos = {14};
  auto config = fb::CreateModelConfigDirect(fbb, "glm_moe_dsa",
                                            "{\"model_type\": \"glm_moe_dsa\"}",
                                            8, 16, 1, 64, &eos, 15, 1, 2);
  auto tokenizer = buildTokenizer(fbb, options);
  std::vector<Offset<flatbuffers::String>> targets = {
      fbb.CreateString("x86_64")};
  std::vector<Offset<flatbuffers::String>> files;
  for (const std::string &name : writer->fileNames())
    files.push_back(fbb.CreateString(name));
  fbb.Finish(fb::CreateArtifactDirect(fbb, "kiln-test", &targets, &files,
                                      config, tokenizer, &weights, &caches,
                                      &kernels, &codeObjects, &plans),
             fb::ArtifactIdentifier());
  return writer->finish(fbb);
}

} // namespace kiln::artifact::test
