//===- ArtifactWriter.cpp - Streams segments and metadata to disk ---------===//

#include "runtime/artifact/ArtifactWriter.h"

#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/artifact/ArtifactFormat.h"
#include "runtime/artifact/Crc32c.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

namespace kiln::artifact {
namespace {

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dirName(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status errnoError(const std::string &path, const std::string &what) {
  return makeError(StatusCode::Internal, path, ": ", what, ": ",
                   std::strerror(errno));
}

} // namespace

ArtifactWriter::ArtifactWriter(std::string path, uint64_t maxFileBytes)
    : path_(std::move(path)), maxFileBytes_(maxFileBytes) {}

Result<std::unique_ptr<ArtifactWriter>>
ArtifactWriter::create(const std::string &path, uint64_t maxFileBytes) {
  if (path.empty() || path.back() == '/')
    return makeError(StatusCode::InvalidArgument, "artifact path '", path,
                     "' does not name a file");
  if (maxFileBytes < 2 * SEGMENT_ALIGNMENT)
    return makeError(StatusCode::InvalidArgument, path, ": maximum file size ",
                     maxFileBytes, " bytes, expected at least ",
                     2 * SEGMENT_ALIGNMENT, " (a header and one segment)");
  std::unique_ptr<ArtifactWriter> writer(
      new ArtifactWriter(path, maxFileBytes));
  ssize_t got =
      ::getrandom(writer->artifactId_, sizeof(writer->artifactId_), 0);
  if (got != static_cast<ssize_t>(sizeof(writer->artifactId_)))
    return makeError(
        StatusCode::Unavailable, path,
        ": cannot draw a random artifact id: ", std::strerror(errno));
  KILN_RETURN_IF_ERROR(writer->openFile());
  return writer;
}

ArtifactWriter::~ArtifactWriter() {
  for (File &file : files_) {
    if (file.fd >= 0)
      ::close(file.fd);
    if (!finished_)
      ::unlink(file.tmpPath.c_str());
  }
}

Status ArtifactWriter::openFile() {
  File file;
  size_t index = files_.size();
  file.finalPath = index == 0 ? path_ : path_ + "." + std::to_string(index);
  // "<path>.tmp.<id>" and "<path>.tmp.<id>.<index>": one glob finds every
  // leftover of a crashed writer.
  file.tmpPath = path_ + ".tmp." + formatArtifactId(artifactId_).substr(0, 8);
  if (index > 0)
    file.tmpPath += "." + std::to_string(index);
  file.fd =
      ::open(file.tmpPath.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (file.fd < 0)
    return fail(errnoError(file.tmpPath, "cannot create"));
  file.end = HEADER_SIZE;
  files_.push_back(std::move(file));
  return Status::ok();
}

Status ArtifactWriter::fail(Status status) {
  failed_ = status;
  return status;
}

Status ArtifactWriter::checkUsable(const char *operation) const {
  if (finished_)
    return makeError(StatusCode::FailedPrecondition, path_, ": ", operation,
                     "() after finish()");
  if (!failed_.isOk())
    return failed_.withContext(std::string(operation) +
                               "() after an earlier failure");
  return Status::ok();
}

Status ArtifactWriter::writeAt(File &file, const void *data, size_t size,
                               uint64_t offset) {
  const auto *p = static_cast<const uint8_t *>(data);
  while (size > 0) {
    size_t chunk = std::min<size_t>(size, size_t(1) << 30);
    ssize_t n = ::pwrite(file.fd, p, chunk, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(errnoError(file.tmpPath, "write of " + std::to_string(size) +
                                               " bytes at offset " +
                                               std::to_string(offset) +
                                               " failed"));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

Status ArtifactWriter::beginSegment() {
  KILN_RETURN_IF_ERROR(checkUsable("beginSegment"));
  if (inSegment_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": beginSegment() while a segment is open");
  uint64_t offset = alignToSegment(files_.back().end);
  if (files_.back().hasSegments && offset >= maxFileBytes_) {
    KILN_RETURN_IF_ERROR(openFile());
    offset = alignToSegment(files_.back().end);
  }
  inSegment_ = true;
  segmentFile_ = static_cast<uint32_t>(files_.size() - 1);
  segmentOffset_ = offset;
  segmentSize_ = 0;
  segmentCrc_ = 0;
  return Status::ok();
}

Status ArtifactWriter::readBack(const fb::Extent &extent, uint64_t offset,
                                void *out, size_t size) {
  KILN_RETURN_IF_ERROR(checkUsable("readBack"));
  if (extent.file() >= files_.size() || offset > extent.size() ||
      size > extent.size() - offset)
    return makeError(StatusCode::InvalidArgument, path_, ": read back of ",
                     size, " bytes at ", offset, " is outside the segment");
  File &file = files_[extent.file()];
  auto *p = static_cast<uint8_t *>(out);
  for (size_t done = 0; done < size;) {
    ssize_t n = ::pread(file.fd, p + done, size - done,
                        static_cast<off_t>(extent.offset() + offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(errnoError(file.tmpPath, "read back of a segment failed"));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// The open segment no longer fits beside the file's earlier segments: copy
// what was written of it into a fresh file and cut it from the old one.
Status ArtifactWriter::moveOpenSegmentToNewFile() {
  uint32_t oldIndex = segmentFile_;
  KILN_RETURN_IF_ERROR(openFile());
  uint32_t newIndex = static_cast<uint32_t>(files_.size() - 1);
  uint64_t newOffset = alignToSegment(files_[newIndex].end);
  std::vector<uint8_t> buffer(
      static_cast<size_t>(std::min<uint64_t>(segmentSize_, 1 << 20)));
  for (uint64_t done = 0; done < segmentSize_;) {
    size_t chunk =
        static_cast<size_t>(std::min<uint64_t>(segmentSize_ - done, 1 << 20));
    ssize_t n = ::pread(files_[oldIndex].fd, buffer.data(), chunk,
                        static_cast<off_t>(segmentOffset_ + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(errnoError(files_[oldIndex].tmpPath,
                             "read back of a segment failed"));
    KILN_RETURN_IF_ERROR(writeAt(files_[newIndex], buffer.data(),
                                 static_cast<size_t>(n), newOffset + done));
    done += static_cast<uint64_t>(n);
  }
  if (::ftruncate(files_[oldIndex].fd,
                  static_cast<off_t>(files_[oldIndex].end)) != 0)
    return fail(errnoError(files_[oldIndex].tmpPath, "truncate failed"));
  segmentFile_ = newIndex;
  segmentOffset_ = newOffset;
  return Status::ok();
}

Status ArtifactWriter::append(const void *data, size_t size) {
  KILN_RETURN_IF_ERROR(checkUsable("append"));
  if (!inSegment_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": append() outside a segment (call beginSegment())");
  if (size == 0)
    return Status::ok();
  uint64_t end;
  if (__builtin_add_overflow(segmentOffset_ + segmentSize_, size, &end))
    return makeError(StatusCode::OutOfRange, path_,
                     ": segment size overflows 64 bits");
  if (files_[segmentFile_].hasSegments && end > maxFileBytes_)
    KILN_RETURN_IF_ERROR(moveOpenSegmentToNewFile());
  KILN_RETURN_IF_ERROR(
      writeAt(files_[segmentFile_], data, size, segmentOffset_ + segmentSize_));
  segmentCrc_ = crc32c(data, size, segmentCrc_);
  segmentSize_ += size;
  return Status::ok();
}

Result<fb::Extent> ArtifactWriter::endSegment() {
  KILN_RETURN_IF_ERROR(checkUsable("endSegment"));
  if (!inSegment_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": endSegment() without beginSegment()");
  File &file = files_[segmentFile_];
  file.end = segmentOffset_ + segmentSize_;
  file.hasSegments = true;
  inSegment_ = false;
  return fb::Extent(segmentFile_, segmentCrc_, segmentOffset_, segmentSize_);
}

Result<fb::Extent> ArtifactWriter::writeSegment(const void *data, size_t size) {
  KILN_RETURN_IF_ERROR(beginSegment());
  KILN_RETURN_IF_ERROR(append(data, size));
  return endSegment();
}

std::vector<std::string> ArtifactWriter::fileNames() const {
  std::vector<std::string> names;
  for (const File &file : files_)
    names.push_back(baseName(file.finalPath));
  return names;
}

Status ArtifactWriter::finish(flatbuffers::FlatBufferBuilder &builder) {
  return finish(builder.GetBufferPointer(), builder.GetSize());
}

Status ArtifactWriter::finish(const uint8_t *metadata, size_t size) {
  KILN_RETURN_IF_ERROR(checkUsable("finish"));
  if (inSegment_)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": finish() while a segment is open");
  KILN_RETURN_IF_ERROR(verifyMetadata(path_, metadata, size));
  std::vector<std::string> expected = fileNames();
  const auto *files = fb::GetArtifact(metadata)->files();
  std::vector<std::string> found;
  if (files)
    for (const auto *name : *files)
      found.push_back(name->str());
  if (found != expected)
    return makeError(StatusCode::FailedPrecondition, path_,
                     ": Artifact.files has ", found.size(),
                     " entries, the writer wrote ", expected.size(),
                     " files: fill it from fileNames() after the last "
                     "segment");

  uint64_t metadataOffset = alignToSegment(files_[0].end);
  KILN_RETURN_IF_ERROR(writeAt(files_[0], metadata, size, metadataOffset));
  files_[0].end = metadataOffset + size;
  KILN_RETURN_IF_ERROR(
      writeHeaders(metadataOffset, size, crc32c(metadata, size)));
  KILN_RETURN_IF_ERROR(syncAndRename());
  return Status::ok();
}

Status ArtifactWriter::writeHeaders(uint64_t metadataOffset,
                                    uint64_t metadataSize,
                                    uint32_t metadataCrc) {
  for (size_t i = 0; i < files_.size(); ++i) {
    File &file = files_[i];
    FileHeader header;
    std::memset(&header, 0, sizeof(header));
    std::memcpy(header.magic, MAGIC, sizeof(MAGIC));
    header.formatVersion = FORMAT_VERSION;
    header.headerSize = HEADER_SIZE;
    std::memcpy(header.artifactId, artifactId_, sizeof(artifactId_));
    header.fileIndex = static_cast<uint32_t>(i);
    header.fileCount = static_cast<uint32_t>(files_.size());
    header.fileSize = file.end;
    if (i == 0) {
      header.metadataOffset = metadataOffset;
      header.metadataSize = metadataSize;
      header.metadataCrc32c = metadataCrc;
    }
    header.headerCrc32c = computeHeaderCrc(header);
    KILN_RETURN_IF_ERROR(writeAt(file, &header, sizeof(header), 0));
    // Segments are written with pwrite, so a trailing empty segment or a
    // segment moved away may leave the size off: pin it to the header's.
    if (::ftruncate(file.fd, static_cast<off_t>(file.end)) != 0)
      return fail(errnoError(file.tmpPath, "truncate failed"));
  }
  return Status::ok();
}

Status ArtifactWriter::syncAndRename() {
  for (File &file : files_) {
    if (::fsync(file.fd) != 0)
      return fail(errnoError(file.tmpPath, "fsync failed"));
    ::close(file.fd);
    file.fd = -1;
  }
  // File 0 last: it names the others, so it appears only once they are in
  // place.
  for (size_t i = files_.size(); i-- > 0;) {
    const File &file = files_[i];
    if (::rename(file.tmpPath.c_str(), file.finalPath.c_str()) != 0)
      return fail(errnoError(file.finalPath,
                             "cannot rename " + file.tmpPath + " into place"));
  }
  finished_ = true;
  int dir = ::open(dirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    // Makes the renames durable; a filesystem without directory fsync
    // (EINVAL) still has the data.
    int rc = ::fsync(dir);
    int err = errno;
    ::close(dir);
    if (rc != 0 && err != EINVAL) {
      errno = err;
      return errnoError(dirName(path_), "fsync of the folder failed");
    }
  }
  return Status::ok();
}

} // namespace kiln::artifact
