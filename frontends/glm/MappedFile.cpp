//===- MappedFile.cpp - Read-only memory-mapped files ---------------------===//

#include "frontends/glm/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::glm {

namespace {
// Closes a file descriptor on every return path.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

Result<MappedFile> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return makeError(err == ENOENT ? StatusCode::NotFound
                                   : StatusCode::InvalidArgument,
                     path, ": cannot open: ", std::strerror(err));
  }
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return makeError(StatusCode::InvalidArgument, path,
                     ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return makeError(StatusCode::InvalidArgument, path,
                     ": expected a regular file");

  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ == 0)
    return file;
  void *addr = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED)
    return makeError(StatusCode::ResourceExhausted, path, ": cannot mmap ",
                     file.size_, " bytes: ", std::strerror(errno));
  file.data_ = static_cast<const uint8_t *>(addr);
  return file;
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace kiln::glm
