//===- ArtifactFormat.cpp - The Kiln artifact's file header ---------------===//

#include "runtime/artifact/ArtifactFormat.h"

#include "runtime/artifact/Crc32c.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

namespace kiln::artifact {
namespace {

// The first bytes of a file, printable characters as is, others escaped.
std::string describeBytes(const uint8_t *data, size_t n) {
  std::ostringstream os;
  os << '"';
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = data[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
      os << static_cast<char>(c);
    else
      os << "\\x" << std::hex << std::setw(2) << std::setfill('0')
         << static_cast<int>(c) << std::dec;
  }
  os << '"';
  return os.str();
}

// A safetensors file starts with a little-endian u64 header length and then
// the JSON header itself.
bool looksLikeSafetensors(const uint8_t *data, uint64_t size) {
  return size > 9 && data[8] == '{';
}

} // namespace

uint32_t computeHeaderCrc(const FileHeader &header) {
  return crc32c(&header, offsetof(FileHeader, headerCrc32c));
}

std::string formatCrc32c(uint32_t crc) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << crc;
  return os.str();
}

std::string rankArtifactPath(const std::string &path, int rank) {
  std::string tag = ".rank" + std::to_string(rank);
  const std::string ext = ".kiln";
  if (path.size() > ext.size() &&
      path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + tag + ext;
  return path + tag;
}

std::string formatArtifactId(const uint8_t (&id)[16]) {
  std::ostringstream os;
  os << std::hex << std::setfill('0');
  for (uint8_t b : id)
    os << std::setw(2) << static_cast<int>(b);
  return os.str();
}

Result<FileHeader> readFileHeader(const std::string &path, const uint8_t *data,
                                  uint64_t size) {
  if (size == 0)
    return makeError(StatusCode::InvalidArgument, path,
                     ": not a Kiln artifact: the file is empty");
  size_t magicBytes = static_cast<size_t>(std::min<uint64_t>(size, 8));
  if (std::memcmp(data, MAGIC, magicBytes) != 0) {
    std::string hint;
    if (looksLikeSafetensors(data, size))
      hint = " (this looks like a safetensors checkpoint: compile it with "
             "kiln-compile first)";
    return makeError(StatusCode::InvalidArgument, path,
                     ": not a Kiln artifact: expected magic "
                     "\"KILNART\\x00\" at offset 0, found ",
                     describeBytes(data, magicBytes), hint);
  }
  if (size < HEADER_SIZE)
    return makeError(StatusCode::DataLoss, path, ": truncated: the file is ",
                     size, " bytes, shorter than the ", HEADER_SIZE,
                     "-byte header");

  FileHeader header;
  std::memcpy(&header, data, sizeof(header));
  if (header.formatVersion != FORMAT_VERSION)
    return makeError(StatusCode::FailedPrecondition, path, ": format version ",
                     header.formatVersion, ", this runtime reads ",
                     FORMAT_VERSION, ": recompile with this kiln-compile");
  uint32_t crc = computeHeaderCrc(header);
  if (crc != header.headerCrc32c)
    return makeError(StatusCode::DataLoss, path,
                     ": header CRC32C mismatch: stored ",
                     formatCrc32c(header.headerCrc32c), ", computed ",
                     formatCrc32c(crc), ": the header is corrupt");
  if (header.headerSize != HEADER_SIZE)
    return makeError(StatusCode::InvalidArgument, path, ": header_size ",
                     header.headerSize, ", expected ", HEADER_SIZE);
  for (size_t i = 0; i < sizeof(header.reserved); ++i)
    if (header.reserved[i] != 0)
      return makeError(StatusCode::InvalidArgument, path, ": header byte ",
                       offsetof(FileHeader, reserved) + i, " is ",
                       static_cast<int>(header.reserved[i]),
                       ", expected 0 (reserved)");
  if (size < header.fileSize)
    return makeError(StatusCode::DataLoss, path, ": truncated: the file is ",
                     size, " bytes, its header records ", header.fileSize);
  if (size > header.fileSize)
    return makeError(StatusCode::DataLoss, path, ": the file is ", size,
                     " bytes, its header records ", header.fileSize,
                     ": unexpected trailing data");
  return header;
}

} // namespace kiln::artifact
