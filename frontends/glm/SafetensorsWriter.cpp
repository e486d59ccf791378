//===- SafetensorsWriter.cpp - Streaming safetensors writer ---------------===//

#include "frontends/glm/SafetensorsWriter.h"

#include "frontends/glm/Quote.h"
#include "frontends/glm/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <set>

namespace kiln::glm {

using nlohmann::ordered_json;

Result<SafetensorsWriter>
SafetensorsWriter::create(const std::string &path,
                          std::vector<TensorDecl> tensors,
                          const std::map<std::string, std::string> &metadata) {
  SafetensorsWriter writer;
  writer.path_ = path;
  ordered_json header = ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorDecl &decl : tensors) {
    if (decl.name.empty() || decl.name == "__metadata__" ||
        !names.insert(decl.name).second)
      return makeError(StatusCode::InvalidArgument, path,
                       ": cannot declare tensor ", quoteForMessage(decl.name),
                       " (empty, reserved or duplicate name)");
    uint64_t bytes = dtypeSize(decl.dtype);
    for (int64_t dim : decl.shape)
      if (dim < 0 ||
          __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes))
        return makeError(StatusCode::InvalidArgument, path, ": tensor ",
                         quoteForMessage(decl.name), " has invalid shape ",
                         shapeToString(decl.shape));
    uint64_t end;
    if (__builtin_add_overflow(offset, bytes, &end))
      return makeError(StatusCode::InvalidArgument, path,
                       ": total data size overflows 64 bits at tensor ",
                       quoteForMessage(decl.name));
    ordered_json entry;
    entry["dtype"] = dtypeName(decl.dtype);
    entry["shape"] = decl.shape;
    entry["data_offsets"] = {offset, end};
    header[decl.name] = std::move(entry);
    writer.sizes_.push_back(bytes);
    offset = end;
  }
  writer.tensors_ = std::move(tensors);

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  writer.out_ = std::fopen(path.c_str(), "wb");
  if (!writer.out_)
    return makeError(StatusCode::InvalidArgument, path,
                     ": cannot create: ", std::strerror(errno));
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  if (std::fwrite(length, 1, 8, writer.out_) != 8 ||
      std::fwrite(text.data(), 1, text.size(), writer.out_) != text.size())
    return makeError(StatusCode::DataLoss, path,
                     ": write failed: ", std::strerror(errno));
  return writer;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter &&other) noexcept
    : path_(std::move(other.path_)), out_(other.out_),
      tensors_(std::move(other.tensors_)), sizes_(std::move(other.sizes_)),
      current_(other.current_), writtenInCurrent_(other.writtenInCurrent_) {
  other.out_ = nullptr;
}

SafetensorsWriter &
SafetensorsWriter::operator=(SafetensorsWriter &&other) noexcept {
  if (this != &other) {
    if (out_)
      std::fclose(out_);
    path_ = std::move(other.path_);
    out_ = other.out_;
    tensors_ = std::move(other.tensors_);
    sizes_ = std::move(other.sizes_);
    current_ = other.current_;
    writtenInCurrent_ = other.writtenInCurrent_;
    other.out_ = nullptr;
  }
  return *this;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_)
    std::fclose(out_);
}

std::string SafetensorsWriter::nextTensor() const {
  return current_ < tensors_.size() ? tensors_[current_].name : std::string();
}

Status SafetensorsWriter::append(const void *data, uint64_t size) {
  if (!out_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": writer is closed");
  if (size == 0) {
    // An empty chunk completes an empty tensor.
    if (current_ < sizes_.size() && sizes_[current_] == 0)
      ++current_;
    return Status::ok();
  }
  skipEmptyTensors();
  if (current_ >= tensors_.size())
    return makeError(StatusCode::OutOfRange, path_, ": ", size,
                     " bytes appended after the last declared tensor");
  uint64_t left = sizes_[current_] - writtenInCurrent_;
  if (size > left)
    return makeError(StatusCode::OutOfRange, path_, ": tensor ",
                     quoteForMessage(tensors_[current_].name), " has ", left,
                     " bytes left, but a chunk of ", size, " was appended");
  if (std::fwrite(data, 1, size, out_) != size)
    return makeError(StatusCode::DataLoss, path_,
                     ": write failed: ", std::strerror(errno));
  writtenInCurrent_ += size;
  if (writtenInCurrent_ == sizes_[current_]) {
    writtenInCurrent_ = 0;
    ++current_;
  }
  return Status::ok();
}

void SafetensorsWriter::skipEmptyTensors() {
  while (writtenInCurrent_ == 0 && current_ < sizes_.size() &&
         sizes_[current_] == 0)
    ++current_;
}

Status SafetensorsWriter::writeTensor(std::string_view name, const void *data,
                                      uint64_t size) {
  while (writtenInCurrent_ == 0 && current_ < sizes_.size() &&
         sizes_[current_] == 0 && tensors_[current_].name != name)
    ++current_;
  if (current_ >= tensors_.size() || tensors_[current_].name != name ||
      writtenInCurrent_ != 0)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": expected the next tensor to be ",
                     quoteForMessage(nextTensor()), ", but got ",
                     quoteForMessage(name));
  if (size != sizes_[current_])
    return makeError(StatusCode::InvalidArgument, path_, ": tensor ",
                     quoteForMessage(name), " needs ", sizes_[current_],
                     " bytes, got ", size);
  return append(data, size);
}

Status SafetensorsWriter::finish() {
  if (!out_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": writer is already closed");
  skipEmptyTensors();
  if (current_ < tensors_.size())
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": finish() before tensor ", quoteForMessage(nextTensor()),
                     " was written (", writtenInCurrent_, " of ",
                     sizes_[current_], " bytes)");
  int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0)
    return makeError(StatusCode::DataLoss, path_,
                     ": close failed: ", std::strerror(errno));
  return Status::ok();
}

Status
writeSafetensorsIndex(const std::string &path,
                      const std::map<std::string, std::string> &weightMap,
                      uint64_t totalSize) {
  ordered_json index;
  index["metadata"] = {{"total_size", totalSize}};
  index["weight_map"] = weightMap;
  std::string text = index.dump(2) + "\n";
  std::FILE *out = std::fopen(path.c_str(), "wb");
  if (!out)
    return makeError(StatusCode::InvalidArgument, path,
                     ": cannot create: ", std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  ok = (std::fclose(out) == 0) && ok;
  if (!ok)
    return makeError(StatusCode::DataLoss, path, ": write failed");
  return Status::ok();
}

} // namespace kiln::glm
