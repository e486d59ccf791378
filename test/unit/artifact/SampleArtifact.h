//===- SampleArtifact.h - A small artifact for the artifact tests -*- C++ -*-=//
//
// Writes a complete artifact: three weights (Dense BF16, Mxfp4 with scales,
// Fp8Block128 with scales), a cache, two kernels, an x86_64 code object, two
// plans with dispatches over buffers, weights and caches, and a tokenizer.
// Options bend one field at a time so each loader check can be provoked.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ARTIFACT_SAMPLEARTIFACT_H
#define KILN_TEST_UNIT_ARTIFACT_SAMPLEARTIFACT_H

#include "runtime/artifact/ArtifactWriter.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::artifact::test {

struct SampleOptions {
  uint64_t maxFileBytes = ArtifactWriter::NO_FILE_LIMIT;
  /// Shape recorded for weights[0]; its data is always 16 x 8 BF16.
  std::vector<int64_t> embedShape = {16, 8};
  /// Index of the Weight arg of plans[0].dispatches[1] (3 weights).
  uint32_t moeWeightArg = 1;
  /// Kernel of plans[0].dispatches[1] (2 kernels).
  uint32_t moeKernel = 1;
  bool writeMxfp4Scales = true;
  std::string secondPlanName = "prefill";
  int64_t cacheWidth = 576;
  fb::DType cacheDType = fb::DType::BF16;
  int32_t addedTokenId = 14; // config.vocab_size is 16
  /// Adds a gfx950 code object and a GPU launch for kernels[0], and a GPU
  /// copy (Mxfp4Gpu) of the MXFP4 weight of gpuCopyBytes + gpuScaleBytes.
  bool gpu = false;
  int64_t gridDiv = 16;
  // scratch 2 (the launch declares 1)
  fb::GpuArg launchArg = fb::GpuArg(fb::GpuArgPart::Scratch, 2);
  uint64_t gpuCopyBytes = 2 * 1 * 1 * 64 * 16; // 2 experts, [8, 64]
  uint64_t gpuScaleBytes = 2 * 1 * 1 * 64 * 4;
  fb::WeightLayout gpuLayout = fb::WeightLayout::Mxfp4Gpu;
  uint32_t launchWorkgroupSize = 256;
};

/// Names and sizes of the sample's segments, in write order.
inline constexpr const char *EMBED = "embed.weight";
inline constexpr const char *EXPERTS = "layers.0.mlp.experts.{e}.w1";
inline constexpr const char *WQ = "layers.0.attn.wq";
inline constexpr size_t EMBED_BYTES = 16 * 8 * 2;
inline constexpr size_t EXPERTS_BYTES = 2 * 8 * 64 / 2;
inline constexpr size_t EXPERTS_SCALE_BYTES = 2 * 8 * 64 / 32;
inline constexpr size_t WQ_BYTES = 200 * 130;
inline constexpr size_t WQ_SCALE_BYTES = 2 * 2 * 4;
inline constexpr size_t CODE_BYTES = 100;

/// Deterministic contents for segment number `seed`.
std::vector<uint8_t> sampleBytes(size_t size, uint32_t seed);

/// Writes the sample artifact to `path` (file 0).
Status writeSample(const std::string &path, const SampleOptions &options = {});

} // namespace kiln::artifact::test

#endif // KILN_TEST_UNIT_ARTIFACT_SAMPLEARTIFACT_H
