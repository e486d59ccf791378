//===- InterpHipMemoryTest.cpp - The interpreter device's uploads ---------===//
//
// A large copy from a read-only file mapping maps the file's pages
// copy-on-write at the destination; every other copy copies. Either way the
// destination reads the source's bytes and a write to it changes nothing
// else.
//
//===----------------------------------------------------------------------===//

#include "test/unit/rocdl/InterpHipMemory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace kiln::interp_hip {
namespace {

const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

/// A temporary file of `bytes` patterned bytes, mapped as Artifact::open
/// maps an artifact (read-only, private), or with `prot`.
class MappedTemp {
public:
  explicit MappedTemp(size_t bytes, int prot = PROT_READ) : bytes_(bytes) {
    char name[] = "/tmp/kiln-interp-hip-XXXXXX";
    int fd = mkstemp(name);
    path_ = name;
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i)
      data[i] = uint8_t(i * 131 + i / 4096);
    EXPECT_EQ(write(fd, data.data(), bytes), ssize_t(bytes));
    map_ =
        static_cast<uint8_t *>(mmap(nullptr, bytes, prot, MAP_PRIVATE, fd, 0));
    close(fd);
    EXPECT_NE(map_, MAP_FAILED);
  }
  ~MappedTemp() {
    munmap(map_, bytes_);
    unlink(path_.c_str());
  }
  const uint8_t *data() const { return map_; }
  uint8_t *mutableData() { return map_; }
  const std::string &path() const { return path_; }
  /// The file's byte at `offset`, read with read(), not through a mapping.
  uint8_t fileByte(size_t offset) const {
    std::ifstream in(path_, std::ios::binary);
    in.seekg(std::streamoff(offset));
    return uint8_t(in.get());
  }

private:
  size_t bytes_;
  std::string path_;
  uint8_t *map_ = nullptr;
};

/// The /proc/self/maps line of the mapping holding `p`.
std::string mapsLine(const void *p) {
  std::ifstream maps("/proc/self/maps");
  auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &start, &end) == 2 &&
        a >= start && a < end)
      return line;
  }
  return "";
}

TEST(InterpHipMemory, LargeAllocationsAreZeroedPageMappings) {
  size_t bytes = kMappedAllocationBytes + 10;
  auto *p = static_cast<uint8_t *>(allocate(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kPage, 0u);
  for (size_t i = 0; i < bytes; i += 997)
    ASSERT_EQ(p[i], 0) << i;
  release(p, bytes);
  auto *small = static_cast<uint8_t *>(allocate(100));
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small[99], 0);
  release(small, 100);
}

TEST(InterpHipMemory, UploadFromAFileMappingMapsItsPages) {
  size_t bytes = kMappedAllocationBytes + 2 * kPage + 100; // a partial tail
  MappedTemp file(bytes + kPage);
  const uint8_t *src = file.data() + kPage; // page-aligned, offset one page
  auto *dst = static_cast<uint8_t *>(allocate(bytes));
  ASSERT_EQ(copyIn(dst, src, bytes), bytes / kPage * kPage);
  EXPECT_EQ(std::memcmp(dst, src, bytes), 0);
  // The destination's pages are the file's, at the source's offset.
  EXPECT_NE(mapsLine(dst).find(file.path()), std::string::npos)
      << mapsLine(dst);
  // A write lands in the destination alone.
  uint8_t before = src[5];
  dst[5] = uint8_t(before + 1);
  dst[bytes - 1] = uint8_t(src[bytes - 1] + 1); // the copied tail
  EXPECT_EQ(src[5], before);
  EXPECT_EQ(file.fileByte(kPage + 5), before);
  EXPECT_EQ(dst[5], uint8_t(before + 1));
  EXPECT_EQ(std::memcmp(dst + 6, src + 6, bytes - 7), 0);
  release(dst, bytes);
}

TEST(InterpHipMemory, EveryOtherUploadCopies) {
  size_t bytes = kMappedAllocationBytes + kPage;
  auto *dst = static_cast<uint8_t *>(allocate(bytes));
  {
    // Anonymous memory has no file to map.
    void *anon = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memset(anon, 7, bytes);
    EXPECT_EQ(copyIn(dst, anon, bytes), 0u);
    EXPECT_EQ(dst[bytes - 1], 7);
    munmap(anon, bytes);
  }
  {
    // A writable private mapping may differ from its file.
    MappedTemp file(bytes, PROT_READ | PROT_WRITE);
    file.mutableData()[3] ^= 0xff;
    EXPECT_EQ(copyIn(dst, file.data(), bytes), 0u);
    EXPECT_EQ(std::memcmp(dst, file.data(), bytes), 0);
  }
  MappedTemp file(bytes + kPage);
  // Not on a page boundary.
  EXPECT_EQ(copyIn(dst, file.data() + 64, bytes), 0u);
  EXPECT_EQ(std::memcmp(dst, file.data() + 64, bytes), 0);
  // Too small to map.
  EXPECT_EQ(copyIn(dst, file.data(), kPage * 2), 0u);
  EXPECT_EQ(std::memcmp(dst, file.data(), kPage * 2), 0);
  // Forced copies.
  setenv("KILN_INTERP_HIP_COPY", "1", 1);
  EXPECT_EQ(copyIn(dst, file.data(), bytes), 0u);
  unsetenv("KILN_INTERP_HIP_COPY");
  EXPECT_EQ(std::memcmp(dst, file.data(), bytes), 0);
  EXPECT_EQ(mapsLine(dst).find(file.path()), std::string::npos);
  release(dst, bytes);
}

} // namespace
} // namespace kiln::interp_hip
