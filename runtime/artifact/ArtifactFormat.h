//===- ArtifactFormat.h - The Kiln artifact's file header -------*- C++ -*-===//
//
// Every file of an artifact starts with a 4096-byte FileHeader; see the
// layout comment at the top of kiln_artifact.fbs. The magic and the format
// version sit at fixed offsets in every version, so any runtime can tell
// "not an artifact" from "an artifact of another version" before trusting
// anything else in the file.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_ARTIFACTFORMAT_H
#define KILN_RUNTIME_ARTIFACT_ARTIFACTFORMAT_H

#include "support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::artifact {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the artifact format is little-endian");

inline constexpr char MAGIC[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
/// The one format version this runtime reads and writes. Bump it for any
/// change other than appending fields to FlatBuffer tables.
inline constexpr uint32_t FORMAT_VERSION = 6; // 3: all_reduce has parameters
// 4: data-parallel attention (Rows.Gathered, all_gather_rows,
// reduce_scatter_rows); 5: WeightLayout DensePanel4; 6: the all-to-all
// expert exchange (Rows.Routed, dispatch_rows, combine_rows,
// moe.shared_own_rows)
inline constexpr uint32_t HEADER_SIZE = 4096;
/// Segments (and the metadata) start at multiples of this.
inline constexpr uint64_t SEGMENT_ALIGNMENT = 4096;

/// The header at offset 0 of every file of an artifact. All fields
/// little-endian; bytes after headerCrc32c are zero.
struct __attribute__((packed)) FileHeader {
  char magic[8];           // MAGIC
  uint32_t formatVersion;  // FORMAT_VERSION
  uint32_t headerSize;     // HEADER_SIZE
  uint8_t artifactId[16];  // random at write time, same in every file
  uint32_t fileIndex;      // 0 for the file holding the metadata
  uint32_t fileCount;      // files in the artifact
  uint64_t fileSize;       // this file's size in bytes (catches truncation)
  uint64_t metadataOffset; // file 0: the FlatBuffer; other files: 0
  uint64_t metadataSize;   // file 0: its size; other files: 0
  uint32_t metadataCrc32c; // file 0: CRC32C of the FlatBuffer; others: 0
  uint32_t headerCrc32c;   // CRC32C of the header bytes before this field
  uint8_t reserved[HEADER_SIZE - 72];
};

static_assert(sizeof(FileHeader) == HEADER_SIZE);
static_assert(offsetof(FileHeader, formatVersion) == 8);
static_assert(offsetof(FileHeader, artifactId) == 16);
static_assert(offsetof(FileHeader, fileIndex) == 32);
static_assert(offsetof(FileHeader, fileSize) == 40);
static_assert(offsetof(FileHeader, metadataOffset) == 48);
static_assert(offsetof(FileHeader, metadataCrc32c) == 64);
static_assert(offsetof(FileHeader, headerCrc32c) == 68);

/// CRC32C of the header bytes covered by headerCrc32c.
uint32_t computeHeaderCrc(const FileHeader &header);

/// Checks the header of one file whose first `size` bytes are at `data`
/// (`size` is the whole file's size; at least min(size, HEADER_SIZE) bytes
/// must be readable). In order: non-empty, magic, full header present,
/// format version, header CRC, header size, reserved bytes, recorded file
/// size. Messages start with `path`. Artifact-level fields (id, index,
/// count, metadata) are the caller's to check.
Result<FileHeader> readFileHeader(const std::string &path, const uint8_t *data,
                                  uint64_t size);

/// `value` rounded up to a multiple of SEGMENT_ALIGNMENT.
constexpr uint64_t alignToSegment(uint64_t value) {
  return (value + SEGMENT_ALIGNMENT - 1) & ~(SEGMENT_ALIGNMENT - 1);
}

/// 32 lowercase hex digits.
std::string formatArtifactId(const uint8_t (&id)[16]);

/// The artifact of rank `rank` when `path` was compiled for several ranks
/// (kiln-compile --ep N -o path): "m.kiln" -> "m.rank1.kiln".
std::string rankArtifactPath(const std::string &path, int rank);

/// "0x" and 8 lowercase hex digits, as checksums appear in messages.
std::string formatCrc32c(uint32_t crc);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_ARTIFACTFORMAT_H
