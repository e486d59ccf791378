//===- TestFiles.cpp - Temporary folders and byte surgery on files --------===//

#include "test/unit/artifact/TestFiles.h"

#include "runtime/artifact/ArtifactFormat.h"
#include "runtime/artifact/Crc32c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln::artifact::test {

void TempDirTest::SetUp() {
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-artifact-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  ASSERT_NE(::mkdtemp(buf.data()), nullptr);
  dir_ = buf.data();
}

void TempDirTest::TearDown() { std::filesystem::remove_all(dir_); }

std::vector<std::string> TempDirTest::listDir() const {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir_))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void flipByte(const std::string &path, uint64_t offset) {
  std::vector<uint8_t> bytes = readBytes(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] ^= 0x5a;
  writeBytes(path, bytes);
}

void truncateTo(const std::string &path, uint64_t size) {
  std::filesystem::resize_file(path, size);
}

void patchBytes(const std::string &path, uint64_t offset,
                const std::vector<uint8_t> &bytes) {
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(static_cast<std::streamoff>(offset));
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void resealHeader(const std::string &path) {
  std::vector<uint8_t> bytes = readBytes(path);
  resealHeader(bytes);
  writeBytes(path, bytes);
}

void resealHeader(std::vector<uint8_t> &bytes) {
  FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.metadataCrc32c =
      crc32c(bytes.data() + header.metadataOffset, header.metadataSize);
  header.headerCrc32c = computeHeaderCrc(header);
  std::memcpy(bytes.data(), &header, sizeof(header));
}

} // namespace kiln::artifact::test
