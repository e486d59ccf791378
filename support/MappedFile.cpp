//===- MappedFile.cpp - A read-only memory-mapped file --------------------===//

#include "support/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace kiln {

Result<MappedFile> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError(errno == ENOENT ? StatusCode::NotFound
                                     : StatusCode::InvalidArgument,
                     path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return makeError(StatusCode::InvalidArgument, path,
                     ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError(StatusCode::InvalidArgument, path, ": not a regular file");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ > 0) {
    void *p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return makeError(StatusCode::ResourceExhausted, path, ": cannot map ",
                       file.size_, " bytes: ", std::strerror(err));
    }
    file.data_ = static_cast<const uint8_t *>(p);
  }
  // The mapping keeps the file alive; the descriptor is not needed.
  ::close(fd);
  return file;
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
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

} // namespace kiln
