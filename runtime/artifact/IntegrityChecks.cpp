//===- IntegrityChecks.cpp - Metadata verifier, file list, checksums ------===//
//
// The checks around the semantic walk: the FlatBuffers verifier and file
// identifier (first stage), the file list (before split files are opened)
// and the segment checksums (last, optional).
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/ArtifactChecks.h"

#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/Crc32c.h"

#include <string_view>

namespace kiln::artifact {
namespace {

Status checkSegmentCrc(const Artifact &artifact, const fb::Extent &extent,
                       const std::string &what) {
  uint32_t crc = crc32c(artifact.bytes(extent), extent.size());
  if (crc == extent.crc32c())
    return Status::ok();
  return makeError(StatusCode::DataLoss, artifact.filePath(extent.file()), ": ",
                   what, ": CRC32C mismatch over bytes [", extent.offset(),
                   ", ", extent.offset() + extent.size(), "): stored ",
                   formatCrc32c(extent.crc32c()), ", computed ",
                   formatCrc32c(crc), ": the file is corrupt");
}

} // namespace

Status verifyMetadata(const std::string &path, const uint8_t *data,
                      size_t size) {
  if (size < 8 || size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return makeError(StatusCode::InvalidArgument, path, ": metadata size ",
                     size, ", expected 8 to ", FLATBUFFERS_MAX_BUFFER_SIZE - 1,
                     " bytes");
  flatbuffers::Verifier::Options options;
  options.max_depth = MAX_METADATA_DEPTH;
  options.max_tables = MAX_METADATA_TABLES;
  flatbuffers::Verifier verifier(data, size, options);
  if (!verifier.VerifyBuffer<fb::Artifact>(nullptr))
    return makeError(StatusCode::InvalidArgument, path,
                     ": the metadata fails FlatBuffers verification: it was "
                     "not written by a kiln-compile of format version ",
                     FORMAT_VERSION, ", or it is corrupt");
  if (!fb::ArtifactBufferHasIdentifier(data))
    return makeError(StatusCode::InvalidArgument, path,
                     ": metadata file identifier is '",
                     std::string(reinterpret_cast<const char *>(data) + 4, 4),
                     "', expected '", fb::ArtifactIdentifier(), "'");
  return Status::ok();
}

Status checkFileList(const fb::Artifact &meta, const std::string &path,
                     uint32_t fileCount) {
  const auto *files = meta.files();
  uint32_t n = files ? files->size() : 0;
  if (n != fileCount)
    return makeError(StatusCode::InvalidArgument, path, ": files lists ", n,
                     " file names, the header records ", fileCount, " files");
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view name = files->Get(i)->string_view();
    if (name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string_view::npos ||
        name.find('\0') != std::string_view::npos)
      return makeError(StatusCode::InvalidArgument, path, ": files[", i,
                       "] is '", name,
                       "', expected a plain file name in file 0's folder");
  }
  return Status::ok();
}

Status checkChecksums(const Artifact &artifact) {
  const fb::Artifact &meta = *artifact.meta();
  if (const auto *weights = meta.weights())
    for (uint32_t i = 0; i < weights->size(); ++i) {
      const fb::Weight &w = *weights->Get(i);
      std::string what =
          "weights[" + std::to_string(i) + "] '" + w.name()->str() + "'";
      KILN_RETURN_IF_ERROR(
          checkSegmentCrc(artifact, *w.data(), what + " data"));
      if (w.scales())
        KILN_RETURN_IF_ERROR(
            checkSegmentCrc(artifact, *w.scales(), what + " scales"));
      if (w.gpu_data())
        KILN_RETURN_IF_ERROR(
            checkSegmentCrc(artifact, *w.gpu_data(), what + " gpu_data"));
      if (w.gpu_scales())
        KILN_RETURN_IF_ERROR(
            checkSegmentCrc(artifact, *w.gpu_scales(), what + " gpu_scales"));
    }
  if (const auto *objects = meta.code_objects())
    for (uint32_t i = 0; i < objects->size(); ++i)
      KILN_RETURN_IF_ERROR(
          checkSegmentCrc(artifact, *objects->Get(i)->data(),
                          "code_objects[" + std::to_string(i) + "] data"));
  return Status::ok();
}

} // namespace kiln::artifact
