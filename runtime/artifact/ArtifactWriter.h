//===- ArtifactWriter.h - Streams segments and metadata to disk -*- C++ -*-===//
//
// The compiler writes weights one tensor at a time (quantizing as it goes),
// so segments are streamed: beginSegment(), any number of append() calls,
// endSegment() returns the Extent (file, 4096-aligned offset, size, CRC32C
// computed while streaming). Memory use is O(largest append), never
// O(model).
//
// Files: `<path>` holds the first segments and, after the last of them, the
// metadata; when a segment would push the current file past maxFileBytes it
// moves to a new file `<path>.1`, `<path>.2`, ... (a segment larger than the
// limit goes alone into its own file). Everything is written to
// `<path>.tmp.<id>[.N]` files and renamed by finish(), the split files first
// and file 0 last, so a crash never leaves a half artifact under the final
// name; a writer destroyed before finish() removes its temporary files.
//
//   KILN_ASSIGN_OR_RETURN(auto writer, ArtifactWriter::create(path, limit));
//   KILN_RETURN_IF_ERROR(writer->beginSegment());
//   KILN_RETURN_IF_ERROR(writer->append(chunk.data(), chunk.size()));
//   KILN_ASSIGN_OR_RETURN(fb::Extent data, writer->endSegment());
//   ... more segments ...
//   auto files = writer->fileNames(); // after the last segment
//   ... build the Artifact table with `files` and the extents ...
//   KILN_RETURN_IF_ERROR(writer->finish(builder));
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_ARTIFACTWRITER_H
#define KILN_RUNTIME_ARTIFACT_ARTIFACTWRITER_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/Status.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace kiln::artifact {

class ArtifactWriter {
public:
  static constexpr uint64_t NO_FILE_LIMIT =
      std::numeric_limits<uint64_t>::max();

  /// Starts an artifact whose file 0 will be `path`. `maxFileBytes` is the
  /// size a file may reach through its segments (file 0's metadata comes on
  /// top); at least two segment alignments.
  static Result<std::unique_ptr<ArtifactWriter>>
  create(const std::string &path, uint64_t maxFileBytes = NO_FILE_LIMIT);

  ArtifactWriter(const ArtifactWriter &) = delete;
  ArtifactWriter &operator=(const ArtifactWriter &) = delete;
  /// Removes the temporary files unless finish() succeeded.
  ~ArtifactWriter();

  Status beginSegment();
  Status append(const void *data, size_t size);
  Result<fb::Extent> endSegment();
  /// beginSegment + append + endSegment.
  Result<fb::Extent> writeSegment(const void *data, size_t size);
  /// Reads `size` bytes at `offset` inside an ended segment back (the
  /// compiler derives a weight's GPU copy from what it streamed).
  Status readBack(const fb::Extent &extent, uint64_t offset, void *out,
                  size_t size);

  /// The files' final names, relative to file 0's folder, for
  /// Artifact.files. Complete once the last segment has ended.
  std::vector<std::string> fileNames() const;

  /// Writes `builder`'s finished buffer (root Artifact, identifier "KILN",
  /// `files` equal to fileNames()) as the metadata, writes every header,
  /// syncs and renames the files into place.
  Status finish(flatbuffers::FlatBufferBuilder &builder);
  /// The same for a metadata buffer built elsewhere.
  Status finish(const uint8_t *metadata, size_t size);

  const std::string &path() const { return path_; }
  const uint8_t (&artifactId() const)[16] { return artifactId_; }

private:
  struct File {
    std::string finalPath;
    std::string tmpPath;
    int fd = -1;
    uint64_t end = 0; // bytes in use: header + ended segments
    bool hasSegments = false;
  };

  ArtifactWriter(std::string path, uint64_t maxFileBytes);
  Status openFile();
  Status moveOpenSegmentToNewFile();
  Status writeAt(File &file, const void *data, size_t size, uint64_t offset);
  Status writeHeaders(uint64_t metadataOffset, uint64_t metadataSize,
                      uint32_t metadataCrc);
  Status syncAndRename();
  Status fail(Status status);
  Status checkUsable(const char *operation) const;

  std::string path_;
  uint64_t maxFileBytes_;
  uint8_t artifactId_[16] = {};
  std::vector<File> files_;
  Status failed_;
  bool finished_ = false;

  bool inSegment_ = false;
  uint32_t segmentFile_ = 0;
  uint64_t segmentOffset_ = 0;
  uint64_t segmentSize_ = 0;
  uint32_t segmentCrc_ = 0;
};

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_ARTIFACTWRITER_H
