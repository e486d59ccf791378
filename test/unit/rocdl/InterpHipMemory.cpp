//===- InterpHipMemory.cpp - The interpreter device's memory --------------===//

#include "test/unit/rocdl/InterpHipMemory.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace kiln::interp_hip {
namespace {

size_t pageBytes() {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return page;
}

size_t roundUpToPage(size_t bytes) {
  return (bytes + pageBytes() - 1) / pageBytes() * pageBytes();
}

/// The file under a private read-only mapping holding [p, p + bytes).
struct FileRange {
  char path[4096];
  unsigned long long offset = 0; // of p in the file
  unsigned major = 0, minor = 0;
  unsigned long long inode = 0;
};

bool findFileMapping(const void *p, size_t bytes, FileRange &out) {
  FILE *maps = std::fopen("/proc/self/maps", "r");
  if (!maps)
    return false;
  auto a = reinterpret_cast<uintptr_t>(p);
  char line[4096 + 128];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps)) {
    unsigned long long start, end, offset, inode;
    char perms[8];
    unsigned major, minor;
    int pathAt = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end,
                    perms, &offset, &major, &minor, &inode, &pathAt) < 7)
      continue;
    if (a < start || a + bytes > end)
      continue;
    // One mapping holds the whole range: it qualifies or nothing does.
    const char *path = line + pathAt;
    size_t length = std::strcspn(path, "\n");
    found = std::strcmp(perms, "r--p") == 0 && inode != 0 && path[0] == '/' &&
            length < sizeof out.path && !std::strstr(path, " (deleted)");
    if (found) {
      std::memcpy(out.path, path, length);
      out.path[length] = 0;
      out.offset = offset + (a - start);
      out.major = major;
      out.minor = minor;
      out.inode = inode;
    }
    break;
  }
  std::fclose(maps);
  return found;
}

/// Maps `bytes` (whole pages) of the file under `src` at `dst`, private.
bool mapOver(void *dst, const FileRange &file, size_t bytes) {
  int fd = ::open(file.path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  bool same = ::fstat(fd, &st) == 0 && st.st_ino == file.inode &&
              major(st.st_dev) == file.major && minor(st.st_dev) == file.minor;
  void *p = same ? ::mmap(dst, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_FIXED, fd, off_t(file.offset))
                 : MAP_FAILED;
  ::close(fd);
  return p == dst;
}

} // namespace

void *allocate(size_t bytes) {
  if (bytes < kMappedAllocationBytes)
    return std::calloc(1, bytes ? bytes : 1);
  void *p = ::mmap(nullptr, roundUpToPage(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void release(void *p, size_t bytes) {
  if (bytes < kMappedAllocationBytes)
    std::free(p);
  else if (p)
    ::munmap(p, roundUpToPage(bytes));
}

size_t copyIn(void *dst, const void *src, size_t bytes) {
  size_t page = pageBytes();
  size_t whole = bytes / page * page;
  FileRange file;
  if (bytes < kMappedAllocationBytes ||
      reinterpret_cast<uintptr_t>(dst) % page != 0 ||
      reinterpret_cast<uintptr_t>(src) % page != 0 ||
      std::getenv("KILN_INTERP_HIP_COPY") ||
      !findFileMapping(src, bytes, file) || !mapOver(dst, file, whole)) {
    std::memmove(dst, src, bytes);
    return 0;
  }
  std::memcpy(static_cast<char *>(dst) + whole,
              static_cast<const char *>(src) + whole, bytes - whole);
  return whole;
}

} // namespace kiln::interp_hip
