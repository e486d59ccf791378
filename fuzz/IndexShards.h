//===- IndexShards.h - The shards the index harness points at ---*- C++ -*-===//
//
// Two small safetensors shards with GLM-like tensor names, shared by the
// index harness (which writes them into its scratch folder) and the seed
// generator (which writes index files that match them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUZZ_INDEXSHARDS_H
#define KILN_FUZZ_INDEXSHARDS_H

#include "frontends/glm/SafetensorsWriter.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::fuzz {

struct IndexShard {
  const char *file;
  std::vector<glm::TensorDecl> tensors;
};

inline const std::vector<IndexShard> &indexShards() {
  static const std::vector<IndexShard> shards = {
      {"model-00001-of-00002.safetensors",
       {{"model.embed_tokens.weight", Dtype::BF16, {4, 2}},
        {"model.layers.0.input_layernorm.weight", Dtype::BF16, {2}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", Dtype::U8, {2, 1}}}},
      {"model-00002-of-00002.safetensors",
       {{"lm_head.weight", Dtype::BF16, {4, 2}},
        {"model.layers.0.mlp.gate.e_score_correction_bias", Dtype::F32, {2}},
        {"model.norm.weight", Dtype::BF16, {2}}}}};
  return shards;
}

/// tensor -> shard file, as a matching index's weight_map.
inline std::map<std::string, std::string> indexWeightMap() {
  std::map<std::string, std::string> map;
  for (const IndexShard &shard : indexShards())
    for (const glm::TensorDecl &t : shard.tensors)
      map[t.name] = shard.file;
  return map;
}

/// Writes the shards into `dir`; returns false on failure.
inline bool writeIndexShards(const std::string &dir) {
  for (const IndexShard &shard : indexShards()) {
    auto writer =
        glm::SafetensorsWriter::create(dir + "/" + shard.file, shard.tensors);
    if (!writer.isOk())
      return false;
    for (const glm::TensorDecl &t : shard.tensors) {
      uint64_t bytes = dtypeSize(t.dtype);
      for (int64_t d : t.shape)
        bytes *= static_cast<uint64_t>(d);
      std::vector<uint8_t> zeros(bytes, 0);
      if (!writer->writeTensor(t.name, zeros.data(), zeros.size()).isOk())
        return false;
    }
    if (!writer->finish().isOk())
      return false;
  }
  return true;
}

} // namespace kiln::fuzz

#endif // KILN_FUZZ_INDEXSHARDS_H
