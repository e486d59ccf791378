//===- Checkpoint.h - A Hugging Face safetensors checkpoint -----*- C++ -*-===//
//
// Opens a checkpoint directory: either one `model.safetensors` or a
// `model.safetensors.index.json` whose `weight_map` maps every tensor to its
// shard. Sharded checkpoints are checked both ways: every tensor the index
// names must be in the shard it names, and every tensor in a shard must be
// listed in the index for that shard (an unlisted tensor is an error, not
// silently ignored, so what the compiler sees never depends on which shard
// happens to be read first). Shard names must be plain file names inside the
// directory. A directory holding both forms is ambiguous and rejected.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_CHECKPOINT_H
#define KILN_FRONTENDS_GLM_CHECKPOINT_H

#include "frontends/glm/Safetensors.h"
#include "support/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

inline constexpr const char *kSingleFileName = "model.safetensors";
inline constexpr const char *kIndexFileName = "model.safetensors.index.json";
inline constexpr uint64_t kMaxIndexBytes = 256ull << 20;
inline constexpr uint64_t kMaxShards = 1u << 16;
/// GLM-5 names about 10^5 tensors. Parsing costs about 250 bytes per
/// weight_map entry, so a hostile index stops at about 0.5 GB (without the
/// limit, a 74 MB index of 5M short entries took 1.8 GB, and 256 MiB of them
/// would take about 6 GB).
inline constexpr uint64_t kMaxIndexTensors = 1u << 21;

/// Limits that protect Checkpoint::open from hostile files. Errors quote the
/// limit's name and the value found; tests and fuzzers may lower them.
struct CheckpointLimits {
  uint64_t maxIndexBytes = kMaxIndexBytes;
  uint64_t maxShards = kMaxShards;
  /// Entries of the index's weight_map.
  uint64_t maxIndexTensors = kMaxIndexTensors;
  /// For every shard; its maxTensorNameBytes also bounds weight_map names.
  SafetensorsLimits safetensors;
};

/// A TensorSource (support/TensorSource.h): the compiler back end streams
/// weights from it without knowing the format.
class Checkpoint : public TensorSource {
public:
  Checkpoint() = default;
  Checkpoint(Checkpoint &&) = default;
  Checkpoint &operator=(Checkpoint &&) = default;
  Checkpoint(const Checkpoint &) = delete;
  Checkpoint &operator=(const Checkpoint &) = delete;

  /// `path` is a checkpoint directory, a `.safetensors` file or an index
  /// `.json` file.
  static Result<Checkpoint> open(const std::string &path,
                                 const CheckpointLimits &limits = {});

  /// What was opened (directory or file), for messages.
  const std::string &path() const { return path_; }
  bool isSharded() const { return sharded_; }
  /// The safetensors files, in the order opened (sorted by name).
  const std::vector<SafetensorsFile> &files() const { return files_; }

  /// All tensor names, sorted.
  const std::vector<std::string> &names() const { return names_; }
  size_t size() const { return byName_.size(); }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const override;
  /// A NotFound error naming the tensor and the checkpoint when absent.
  Result<const TensorInfo *> get(std::string_view name) const;
  /// "the checkpoint PATH".
  std::string describe() const override { return "the checkpoint " + path_; }
  /// Drops the mapped pages of data[0, size) (they are read again from the
  /// file if touched).
  void release(const uint8_t *data, uint64_t size) const override;

private:
  Status indexTensors();

  std::string path_;
  bool sharded_ = false;
  std::vector<SafetensorsFile> files_;
  std::vector<const TensorInfo *> byName_; // sorted by name
  std::vector<std::string> names_;
};

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_CHECKPOINT_H
