//===- TinyArtifact.h - Hand-built artifacts for the engine tests -*- C++ -*-=//
//
// A TinyModel describes an artifact in plain structs (weights as bytes, and
// the caches and plans of support/abi/Program.h, as the compiler fills them)
// and writeTinyArtifact() turns it into a .kiln file with ArtifactWriter and
// the compiler's plan writer. The kernel table gets one entry per distinct
// kernel, under its own name or the one kernelNames gives it (a kernel the
// runtime does not know).
//
// simpleModel(): vocab 16, hidden 8, one plan per name in `plans`:
//   embedding -> rms_norm -> take_rows -> matmul (lm_head)
// allReduceModel(): the same with an all_reduce after the embedding
// attentionModel(): the same with a two-head GQA layer over K/V caches:
//   h = embed(ids); n = rms_norm(h); append k = n, v = h;
//   a = gqa(n as [2, 4]); r = n + a; f = rms_norm(r); logits = lm_head(f)
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ENGINE_TINYARTIFACT_H
#define KILN_TEST_UNIT_ENGINE_TINYARTIFACT_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/Status.h"
#include "support/abi/Program.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::engine::test {

struct TinyWeight {
  std::string name;
  fb::WeightLayout layout = fb::WeightLayout::Dense;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data, scales;
};

// Plans and caches are the artifact's own structs (support/abi/Program.h),
// written by the compiler's writer (runtime/artifact/PlanTable.h).
using kiln::abi::BufferSpec;
using kiln::abi::CacheSpec;
using kiln::abi::DispatchSpec;
using kiln::abi::PlanSpec;
using Kernel = kiln::abi::Kernel;
using Rows = kiln::abi::RowsKind;

struct TinyModel {
  int64_t hidden = 8;
  int64_t vocab = 16;
  int64_t maxPositions = 64;
  std::vector<int32_t> eos = {15};
  /// This artifact is rank `rank` of `ranks` (ModelConfig; Model::load
  /// checks them against the communicator).
  int ranks = 1, rank = 0;
  /// ModelConfig.attention_data_parallel (kiln-compile --dp-attention) and
  /// tensor_parallel (the ranks of one data-parallel group).
  bool attentionDataParallel = false;
  int tensorParallel = 1;
  bool withTokenizer = true;
  std::vector<TinyWeight> weights;
  std::vector<CacheSpec> caches;
  std::vector<PlanSpec> plans;
  /// The name a kernel gets in the artifact's kernel table, where it is not
  /// its own (kernelNames["rms_norm"] = "flash_attention": a kernel the
  /// runtime does not know).
  std::map<std::string, std::string> kernelNames;
  /// When not empty: a "gfx950" code object holding these bytes, and for
  /// each kernel named in gpuKernels a gfx950 symbol with one launch
  /// "kiln_test_<kernel>_gfx950": grid (R, 1, 1), 64 threads, arguments
  /// dispatch arg 0's data and the i32 row count.
  std::vector<uint8_t> gpuCode;
  std::vector<std::string> gpuKernels;
};

inline kiln::abi::ArgRef B(uint32_t i) {
  return {kiln::abi::RefKind::Buffer, i};
}
inline kiln::abi::ArgRef W(uint32_t i) {
  return {kiln::abi::RefKind::Weight, i};
}
inline kiln::abi::ArgRef C(uint32_t i) {
  return {kiln::abi::RefKind::Cache, i};
}
inline kiln::abi::ArgRef None() { return {kiln::abi::RefKind::None, 0}; }

/// Deterministic values in [-scale, scale).
std::vector<float> pseudoRandom(size_t n, uint32_t seed, float scale = 1.0f);

/// A Dense F32 weight.
TinyWeight f32Weight(const std::string &name, std::vector<int64_t> shape,
                     const std::vector<float> &values);

/// Weight indices of simpleModel() and attentionModel().
enum : uint32_t { kEmbed = 0, kNorm = 1, kLmHead = 2 };

TinyModel simpleModel(const std::vector<std::string> &plans = {"prefill"});
TinyModel attentionModel(const std::vector<std::string> &plans = {"prefill",
                                                                  "decode"});
/// simpleModel() with an all_reduce of the embedding: its hidden output
/// (buffer 8) is the sum over the ranks of each rank's embedding rows, and
/// the norm and head read that sum.
TinyModel allReduceModel();
/// simpleModel() under data-parallel attention, as rank `rank` of `ranks`
/// holds it, in groups of `group` ranks that share their tokens: the
/// embedding rows of every group are gathered (buffer 8, Gathered rows),
/// scaled by rank + 1 (buffer 9: this rank's stand-in for its share of the
/// experts) and summed over every rank back to this group's own rows
/// (buffer 10, the hidden output that the norm and head read).
TinyModel rowExchangeModel(int ranks, int rank, int group = 1);

/// The four standard inputs (buffers 0..3) every tiny plan starts with.
std::vector<BufferSpec> standardInputs();

/// The tokenizer: ids 0..6 "a" "b" "c" "ab" "Ġ" "Ġa" "Ċ" (newline), 7..15 the
/// GLM chat tokens ([gMASK] <sop> <|system|> <|user|> <|assistant|>
/// <|observation|> <think> </think> <|endoftext|>).
inline constexpr int32_t kEndOfText = 15;
inline constexpr int32_t kUser = 10;
inline constexpr int32_t kObservation = 12;

Status writeTinyArtifact(const std::string &path, const TinyModel &model);

/// A fresh path under the test temp dir.
std::string tempPath(const std::string &name);

} // namespace kiln::engine::test

#endif // KILN_TEST_UNIT_ENGINE_TINYARTIFACT_H
