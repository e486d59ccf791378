//===- Checkpoint.cpp - A Hugging Face safetensors checkpoint -------------===//

#include "frontends/glm/Checkpoint.h"

#include "frontends/glm/Quote.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

namespace kiln::glm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

Result<std::string> readSmallFile(const std::string &path, uint64_t limit,
                                  const char *limitName) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  if (ec)
    return makeError(StatusCode::NotFound, path,
                     ": cannot read: ", ec.message());
  if (size > limit)
    return makeError(StatusCode::ResourceExhausted, path,
                     ": file exceeds the limit ", limitName, " (", limit,
                     " bytes): ", size, " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    return makeError(StatusCode::DataLoss, path, ": short read");
  return text;
}

// A shard name must be a plain file name: no directories, no "..".
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Thrown by the parse callback to stop reading an index over a limit.
struct IndexLimitExceeded {
  Status status;
};

// Parses the index into tensor -> shard. Duplicate tensor names in
// weight_map are rejected (nlohmann would keep the last silently), and so
// are more than maxIndexTensors entries or a name longer than any shard
// accepts, before the rest of the file is read.
Result<std::map<std::string, std::string>>
parseIndex(const std::string &indexPath, const CheckpointLimits &limits) {
  KILN_ASSIGN_OR_RETURN(
      std::string text,
      readSmallFile(indexPath, limits.maxIndexBytes, "maxIndexBytes"));
  std::string topKey, duplicate;
  std::set<std::string> seen;
  uint64_t maxName = limits.safetensors.maxTensorNameBytes;
  auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event != json::parse_event_t::key || !parsed.is_string())
      return true;
    const std::string &key = parsed.get_ref<const std::string &>();
    if (depth == 1) {
      topKey = key;
      return true;
    }
    if (depth != 2 || topKey != "weight_map")
      return true;
    if (key.size() > maxName)
      throw IndexLimitExceeded{makeError(StatusCode::ResourceExhausted,
                                         indexPath, ": weight_map tensor ",
                                         quoteForMessage(key),
                                         " has a name longer than the limit "
                                         "maxTensorNameBytes (",
                                         maxName, "): ", key.size(), " bytes")};
    if (!seen.insert(key).second && duplicate.empty())
      duplicate = key;
    if (seen.size() > limits.maxIndexTensors)
      throw IndexLimitExceeded{makeError(
          StatusCode::ResourceExhausted, indexPath,
          ": weight_map tensor count exceeds the limit maxIndexTensors (",
          limits.maxIndexTensors, "): ", seen.size(), " read so far")};
    return true;
  };
  json index;
  try {
    index = json::parse(text, callback);
  } catch (const IndexLimitExceeded &e) {
    return e.status;
  } catch (const json::exception &e) {
    return makeError(StatusCode::InvalidArgument, indexPath,
                     ": not valid JSON: ", e.what());
  }
  if (!index.is_object())
    return makeError(StatusCode::InvalidArgument, indexPath,
                     ": expected a JSON object, found ", index.type_name());
  if (!duplicate.empty())
    return makeError(StatusCode::InvalidArgument, indexPath,
                     ": weight_map names tensor ", quoteForMessage(duplicate),
                     " more than once");
  auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object())
    return makeError(StatusCode::InvalidArgument, indexPath,
                     ": 'weight_map' must be an object of tensor -> shard, "
                     "found ",
                     it == index.end() ? "nothing" : it->type_name());
  std::map<std::string, std::string> weightMap;
  for (const auto &[tensor, shard] : it->items()) {
    if (!shard.is_string())
      return makeError(StatusCode::InvalidArgument, indexPath, ": weight_map[",
                       quoteForMessage(tensor),
                       "] must be a shard file name, found ",
                       shard.type_name());
    const std::string &name = shard.get_ref<const std::string &>();
    if (!isPlainFileName(name))
      return makeError(StatusCode::InvalidArgument, indexPath, ": weight_map[",
                       quoteForMessage(tensor), "] = ", quoteForMessage(name),
                       " is not a plain file name in the checkpoint directory");
    weightMap.emplace(tensor, name);
  }
  if (weightMap.empty())
    return makeError(StatusCode::InvalidArgument, indexPath,
                     ": weight_map is empty");
  return weightMap;
}

} // namespace

Result<Checkpoint> Checkpoint::open(const std::string &path,
                                    const CheckpointLimits &limits) {
  Checkpoint ckpt;
  ckpt.path_ = path;
  std::error_code ec;
  std::string singlePath, indexPath;
  if (fs::is_directory(path, ec)) {
    std::string single = (fs::path(path) / kSingleFileName).string();
    std::string index = (fs::path(path) / kIndexFileName).string();
    bool hasSingle = fs::exists(single, ec);
    bool hasIndex = fs::exists(index, ec);
    if (hasSingle && hasIndex)
      return makeError(StatusCode::InvalidArgument, path, ": holds both ",
                       kSingleFileName, " and ", kIndexFileName,
                       "; expected exactly one (ambiguous checkpoint)");
    if (!hasSingle && !hasIndex)
      return makeError(StatusCode::NotFound, path, ": expected ",
                       kSingleFileName, " or ", kIndexFileName,
                       ", found neither");
    if (hasSingle)
      singlePath = single;
    else
      indexPath = index;
  } else if (endsWith(path, ".json")) {
    indexPath = path;
  } else {
    singlePath = path;
  }

  if (!singlePath.empty()) {
    KILN_ASSIGN_OR_RETURN(
        SafetensorsFile file,
        SafetensorsFile::open(singlePath, limits.safetensors));
    ckpt.files_.push_back(std::move(file));
    KILN_RETURN_IF_ERROR(ckpt.indexTensors());
    return ckpt;
  }

  ckpt.sharded_ = true;
  KILN_ASSIGN_OR_RETURN(auto weightMap, parseIndex(indexPath, limits));
  std::map<std::string, std::vector<std::string>> byShard;
  for (const auto &[tensor, shard] : weightMap)
    byShard[shard].push_back(tensor);
  if (byShard.size() > limits.maxShards)
    return makeError(StatusCode::ResourceExhausted, indexPath,
                     ": shard count exceeds the limit maxShards (",
                     limits.maxShards, "): ", byShard.size());
  fs::path dir = fs::path(indexPath).parent_path();
  for (const auto &[shard, tensors] : byShard) {
    std::string shardPath = (dir / shard).string();
    if (!fs::exists(shardPath, ec))
      return makeError(StatusCode::NotFound, indexPath, ": names shard ",
                       quoteForMessage(shard), " (for tensor ",
                       quoteForMessage(tensors.front()), " and ",
                       tensors.size() - 1,
                       " more) but the file does not exist");
    KILN_ASSIGN_OR_RETURN(SafetensorsFile file,
                          SafetensorsFile::open(shardPath, limits.safetensors));
    for (const std::string &tensor : tensors)
      if (!file.find(tensor))
        return makeError(StatusCode::NotFound, indexPath, ": tensor ",
                         quoteForMessage(tensor), " is mapped to shard ",
                         quoteForMessage(shard),
                         " but that shard does not contain it");
    for (const TensorInfo &info : file.tensors()) {
      auto it = weightMap.find(info.name);
      if (it == weightMap.end())
        return makeError(StatusCode::InvalidArgument, shardPath, ": tensor ",
                         quoteForMessage(info.name), " is not listed in ",
                         kIndexFileName);
      if (it->second != shard)
        return makeError(StatusCode::InvalidArgument, shardPath, ": tensor ",
                         quoteForMessage(info.name), " is listed in ",
                         kIndexFileName, " under shard ",
                         quoteForMessage(it->second), ", not this one");
    }
    ckpt.files_.push_back(std::move(file));
  }
  KILN_RETURN_IF_ERROR(ckpt.indexTensors());
  return ckpt;
}

Status Checkpoint::indexTensors() {
  byName_.clear();
  for (const SafetensorsFile &file : files_)
    for (const TensorInfo &info : file.tensors())
      byName_.push_back(&info);
  std::sort(byName_.begin(), byName_.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return a->name < b->name;
            });
  for (size_t i = 1; i < byName_.size(); ++i)
    if (byName_[i]->name == byName_[i - 1]->name)
      return makeError(StatusCode::InvalidArgument, path_, ": tensor ",
                       quoteForMessage(byName_[i]->name), " appears in both ",
                       byName_[i - 1]->file, " and ", byName_[i]->file);
  names_.clear();
  names_.reserve(byName_.size());
  for (const TensorInfo *info : byName_)
    names_.push_back(info->name);
  return Status::ok();
}

const TensorInfo *Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(
      byName_.begin(), byName_.end(), name,
      [](const TensorInfo *t, std::string_view n) { return t->name < n; });
  if (it == byName_.end() || (*it)->name != name)
    return nullptr;
  return *it;
}

void Checkpoint::release(const uint8_t *data, uint64_t size) const {
  // The mappings are read-only and private: dropped pages are read from the
  // file again if touched.
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

Result<const TensorInfo *> Checkpoint::get(std::string_view name) const {
  if (const TensorInfo *info = find(name))
    return info;
  return makeError(StatusCode::NotFound, path_, ": tensor ",
                   quoteForMessage(name), " is not in the checkpoint");
}

} // namespace kiln::glm
