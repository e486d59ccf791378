//===- Safetensors.cpp - Strict safetensors reader ------------------------===//

#include "frontends/glm/Safetensors.h"

#include "frontends/glm/JsonFields.h"
#include "frontends/glm/Quote.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>

namespace kiln::glm {

using nlohmann::json;

namespace {

// Parses the header's JSON, rejecting duplicate top-level keys (nlohmann
// would silently keep the last one, hiding a tensor).
Result<json> parseHeaderJson(const uint8_t *begin, uint64_t size,
                             const std::string &path) {
  std::string duplicate;
  std::set<std::string> seen;
  auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string() &&
        !seen.insert(parsed.get_ref<const std::string &>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(begin, begin + size, callback);
  } catch (const json::exception &e) {
    return makeError(StatusCode::InvalidArgument, path,
                     ": safetensors header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty())
    return makeError(StatusCode::InvalidArgument, path,
                     ": safetensors header names ", quoteForMessage(duplicate),
                     " more than once");
  if (!header.is_object())
    return makeError(StatusCode::InvalidArgument, path,
                     ": safetensors header must be a JSON object, found ",
                     describeJson(header));
  return header;
}

Status parseMetadata(const json &value, const std::string &path,
                     std::map<std::string, std::string> &out) {
  if (!value.is_object())
    return makeError(StatusCode::InvalidArgument, path,
                     ": '__metadata__' must be an object of strings, found ",
                     describeJson(value));
  for (const auto &[key, item] : value.items()) {
    if (!item.is_string())
      return makeError(StatusCode::InvalidArgument, path, ": '__metadata__' ",
                       "entry ", quoteForMessage(key),
                       " must be a string, found ", describeJson(item));
    out[key] = item.get<std::string>();
  }
  return Status::ok();
}

// Validates one tensor entry. Offsets are checked against the data section
// here; overlaps between entries are checked by the caller.
Result<TensorInfo> parseEntry(const std::string &name, const json &entry,
                              const std::string &path, uint64_t dataSize,
                              const SafetensorsLimits &limits) {
  std::string where = path + ": tensor " + quoteForMessage(name);
  if (name.empty())
    return makeError(StatusCode::InvalidArgument, path,
                     ": tensor with an empty name");
  if (name.size() > limits.maxTensorNameBytes)
    return makeError(StatusCode::ResourceExhausted, where,
                     ": name is longer than the limit maxTensorNameBytes (",
                     limits.maxTensorNameBytes, "): ", name.size(), " bytes");
  if (!entry.is_object())
    return makeError(StatusCode::InvalidArgument, where,
                     ": entry must be an object, found ", describeJson(entry));
  for (const char *key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key))
      return makeError(StatusCode::InvalidArgument, where, ": missing '", key,
                       "'");

  TensorInfo info;
  info.name = name;
  info.file = path;

  const json &dtype = entry["dtype"];
  if (!dtype.is_string())
    return makeError(StatusCode::InvalidArgument, where,
                     ": 'dtype' must be a string, found ", describeJson(dtype));
  Result<Dtype> parsed = parseDtype(dtype.get_ref<const std::string &>());
  if (!parsed.isOk())
    return parsed.status().withContext(where);
  info.dtype = *parsed;

  const json &shape = entry["shape"];
  if (!shape.is_array())
    return makeError(StatusCode::InvalidArgument, where,
                     ": 'shape' must be an array, found ", describeJson(shape));
  if (shape.size() > limits.maxTensorRank)
    return makeError(StatusCode::ResourceExhausted, where,
                     ": rank exceeds the limit maxTensorRank (",
                     limits.maxTensorRank, "): ", shape.size());
  uint64_t elements = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json &dim = shape[i];
    if (!dim.is_number_unsigned())
      return makeError(StatusCode::InvalidArgument, where, ": shape[", i,
                       "] must be a non-negative integer, found ",
                       describeJson(dim));
    uint64_t value = dim.get<uint64_t>();
    if (value > limits.maxDimSize)
      return makeError(StatusCode::ResourceExhausted, where, ": shape[", i,
                       "] exceeds the limit maxDimSize (", limits.maxDimSize,
                       "): ", value);
    if (__builtin_mul_overflow(elements, value, &elements))
      return makeError(StatusCode::InvalidArgument, where,
                       ": element count of shape ", describeJson(shape),
                       " overflows 64 bits");
    info.shape.push_back(static_cast<int64_t>(value));
  }
  uint64_t expectedBytes;
  if (__builtin_mul_overflow(elements, dtypeSize(info.dtype), &expectedBytes))
    return makeError(StatusCode::InvalidArgument, where, ": byte size of ",
                     dtypeName(info.dtype), describeJson(shape),
                     " overflows 64 bits");

  const json &offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    return makeError(StatusCode::InvalidArgument, where,
                     ": 'data_offsets' must be an array [begin, end], found ",
                     describeJson(offsets));
  for (size_t i = 0; i < 2; ++i)
    if (!offsets[i].is_number_unsigned())
      return makeError(StatusCode::InvalidArgument, where, ": data_offsets[", i,
                       "] must be a non-negative integer, found ",
                       describeJson(offsets[i]));
  uint64_t begin = offsets[0].get<uint64_t>();
  uint64_t end = offsets[1].get<uint64_t>();
  if (end < begin)
    return makeError(StatusCode::InvalidArgument, where, ": data_offsets end ",
                     end, " is before begin ", begin);
  if (end - begin != expectedBytes)
    return makeError(StatusCode::InvalidArgument, where, ": ",
                     dtypeName(info.dtype), shapeToString(info.shape),
                     " needs ", expectedBytes, " bytes but data_offsets [",
                     begin, ", ", end, "] span ", end - begin);
  if (end > dataSize)
    return makeError(StatusCode::DataLoss, where, ": data_offsets [", begin,
                     ", ", end, "] end past the data section, which holds ",
                     dataSize, " bytes (file truncated or header corrupt)");
  info.fileOffset = begin; // made absolute by the caller
  info.byteSize = expectedBytes;
  return info;
}

Status checkNoOverlap(const std::vector<TensorInfo> &tensors,
                      const std::string &path) {
  std::vector<const TensorInfo *> byOffset;
  for (const TensorInfo &t : tensors)
    if (t.byteSize > 0)
      byOffset.push_back(&t);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return a->fileOffset < b->fileOffset;
            });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const TensorInfo &prev = *byOffset[i - 1];
    const TensorInfo &cur = *byOffset[i];
    if (cur.fileOffset < prev.fileOffset + prev.byteSize)
      return makeError(StatusCode::InvalidArgument, path, ": tensor ",
                       quoteForMessage(cur.name), " bytes [", cur.fileOffset,
                       ", ", cur.fileOffset + cur.byteSize, ") overlap tensor ",
                       quoteForMessage(prev.name), " bytes [", prev.fileOffset,
                       ", ", prev.fileOffset + prev.byteSize,
                       ") (offsets relative to the data section)");
  }
  return Status::ok();
}

} // namespace

Result<SafetensorsHeader> parseSafetensors(ByteView file,
                                           const std::string &path,
                                           const SafetensorsLimits &limits) {
  if (file.size < 8)
    return makeError(StatusCode::DataLoss, path,
                     ": too small for a safetensors file: ", file.size,
                     " bytes, expected at least 8 (the header length)");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | file.data[i];
  if (headerBytes > limits.maxHeaderBytes)
    return makeError(StatusCode::ResourceExhausted, path,
                     ": header length exceeds the limit maxHeaderBytes (",
                     limits.maxHeaderBytes, "): ", headerBytes);
  if (headerBytes < 2)
    return makeError(StatusCode::InvalidArgument, path, ": header length ",
                     headerBytes, " is too small for a JSON object");
  if (headerBytes > file.size - 8)
    return makeError(StatusCode::DataLoss, path, ": header length ",
                     headerBytes, " runs past the end of the file (", file.size,
                     " bytes)");

  KILN_ASSIGN_OR_RETURN(json header,
                        parseHeaderJson(file.data + 8, headerBytes, path));
  uint64_t dataStart = 8 + headerBytes;
  uint64_t dataSize = file.size - dataStart;

  SafetensorsHeader out;
  out.headerBytes = headerBytes;
  uint64_t count = header.size() - (header.contains("__metadata__") ? 1 : 0);
  if (count > limits.maxTensorsPerFile)
    return makeError(StatusCode::ResourceExhausted, path,
                     ": tensor count exceeds the limit maxTensorsPerFile (",
                     limits.maxTensorsPerFile, "): ", count);
  out.tensors.reserve(count);
  for (const auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      KILN_RETURN_IF_ERROR(parseMetadata(entry, path, out.metadata));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(TensorInfo info,
                          parseEntry(name, entry, path, dataSize, limits));
    info.data = file.data + dataStart + info.fileOffset;
    out.tensors.push_back(std::move(info));
  }
  // Overlap is judged on data-relative offsets, then they become absolute.
  KILN_RETURN_IF_ERROR(checkNoOverlap(out.tensors, path));
  for (TensorInfo &t : out.tensors)
    t.fileOffset += dataStart;
  // json objects iterate in key order already; keep the guarantee explicit.
  std::sort(
      out.tensors.begin(), out.tensors.end(),
      [](const TensorInfo &a, const TensorInfo &b) { return a.name < b.name; });
  return out;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                              const SafetensorsLimits &limits) {
  SafetensorsFile result;
  KILN_ASSIGN_OR_RETURN(result.file_, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(result.header_,
                        parseSafetensors(bytesOf(result.file_), path, limits));
  return result;
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      header_.tensors.begin(), header_.tensors.end(), name,
      [](const TensorInfo &t, std::string_view n) { return t.name < n; });
  if (it == header_.tensors.end() || it->name != name)
    return nullptr;
  return &*it;
}

} // namespace kiln::glm
