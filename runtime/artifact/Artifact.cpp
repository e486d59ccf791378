//===- Artifact.cpp - A loaded, verified Kiln artifact --------------------===//

#include "runtime/artifact/Artifact.h"

#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/artifact/Crc32c.h"

#include <cstring>

namespace kiln::artifact {
namespace {

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

} // namespace

Result<std::unique_ptr<Artifact>> Artifact::open(const std::string &path,
                                                 OpenOptions options) {
  std::unique_ptr<Artifact> artifact(new Artifact());
  KILN_RETURN_IF_ERROR(artifact->openFile0(path));
  KILN_RETURN_IF_ERROR(
      checkFileList(*artifact->meta_, path, artifact->header_.fileCount));
  KILN_RETURN_IF_ERROR(artifact->openSplitFiles());
  KILN_RETURN_IF_ERROR(checkSemantics(*artifact));
  if (options.verifyChecksums)
    KILN_RETURN_IF_ERROR(checkChecksums(*artifact));
  return artifact;
}

Status Artifact::openFile0(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(header_,
                        readFileHeader(path, file.data(), file.size()));
  if (header_.fileIndex != 0)
    return makeError(StatusCode::InvalidArgument, path, ": file index ",
                     header_.fileIndex, ", expected 0: this is split file ",
                     header_.fileIndex,
                     " of an artifact, open its file 0 (the name without the "
                     "numeric suffix)");
  if (header_.fileCount == 0 || header_.fileCount > MAX_FILES)
    return makeError(StatusCode::InvalidArgument, path, ": file count ",
                     header_.fileCount, ", expected 1 to ", MAX_FILES);

  uint64_t offset = header_.metadataOffset;
  uint64_t size = header_.metadataSize;
  uint64_t end;
  if (offset % SEGMENT_ALIGNMENT != 0 || offset < HEADER_SIZE)
    return makeError(StatusCode::InvalidArgument, path, ": metadata offset ",
                     offset, ", expected a multiple of ", SEGMENT_ALIGNMENT,
                     " after the header");
  if (size < 8 || size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return makeError(StatusCode::InvalidArgument, path, ": metadata size ",
                     size, ", expected 8 to ", FLATBUFFERS_MAX_BUFFER_SIZE - 1,
                     " bytes");
  if (__builtin_add_overflow(offset, size, &end) || end > file.size())
    return makeError(StatusCode::DataLoss, path, ": metadata [", offset, ", ",
                     offset + size, ") ends past the end of the file (",
                     file.size(), " bytes)");
  const uint8_t *metadata = file.data() + offset;
  uint32_t crc = crc32c(metadata, size);
  if (crc != header_.metadataCrc32c)
    return makeError(StatusCode::DataLoss, path,
                     ": metadata CRC32C mismatch: stored ",
                     formatCrc32c(header_.metadataCrc32c), ", computed ",
                     formatCrc32c(crc), ": the metadata is corrupt");

  KILN_RETURN_IF_ERROR(
      verifyMetadata(path, metadata, static_cast<size_t>(size)));
  meta_ = fb::GetArtifact(metadata);
  files_.push_back(std::move(file));
  return Status::ok();
}

Status Artifact::openSplitFiles() {
  std::string path0 = files_[0].path(); // a copy: files_ grows below
  std::string folder = folderOf(path0);
  std::string id0 = formatArtifactId(header_.artifactId);
  for (uint32_t i = 1; i < header_.fileCount; ++i) {
    std::string name = meta_->files()->Get(i)->str();
    std::string context =
        path0 + ": split file " + std::to_string(i) + " '" + name + "'";
    std::string path = folder + name;
    Result<MappedFile> file = MappedFile::open(path);
    if (!file.isOk())
      return file.status().withContext(context);
    Result<FileHeader> header =
        readFileHeader(path, file->data(), file->size());
    if (!header.isOk())
      return header.status().withContext(context);
    std::string id = formatArtifactId(header->artifactId);
    if (id != id0)
      return makeError(StatusCode::InvalidArgument, context, ": ", path,
                       ": artifact id ", id, ", expected ", id0,
                       ": the file belongs to another artifact");
    if (header->fileIndex != i)
      return makeError(StatusCode::InvalidArgument, context, ": ", path,
                       ": file index ", header->fileIndex, ", expected ", i);
    if (header->fileCount != header_.fileCount)
      return makeError(StatusCode::InvalidArgument, context, ": ", path,
                       ": file count ", header->fileCount, ", expected ",
                       header_.fileCount);
    if (header->metadataOffset || header->metadataSize ||
        header->metadataCrc32c)
      return makeError(StatusCode::InvalidArgument, context, ": ", path,
                       ": metadata fields set, expected 0 in a split file");
    files_.push_back(std::move(*file));
  }
  return Status::ok();
}

const uint8_t *Artifact::bytes(const fb::Extent &extent) const {
  if (extent.file() >= files_.size())
    return nullptr;
  const MappedFile &file = files_[extent.file()];
  uint64_t end;
  if (__builtin_add_overflow(extent.offset(), extent.size(), &end) ||
      end > file.size() || !file.data())
    return nullptr;
  return file.data() + extent.offset();
}

const fb::Plan *Artifact::findPlan(std::string_view name) const {
  if (const auto *plans = meta_->plans())
    for (const fb::Plan *plan : *plans)
      if (plan->name() && plan->name()->string_view() == name)
        return plan;
  return nullptr;
}

} // namespace kiln::artifact
