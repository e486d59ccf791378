//===- FuzzUtil.h - Shared helpers for the libFuzzer harnesses --*- C++ -*-===//
//
// Every harness defines LLVMFuzzerTestOneInput (and maybe
// LLVMFuzzerInitialize) and is linked either with libFuzzer (fuzz-<name>,
// KILN_FUZZ=ON builds) or with ReplayMain.cpp (fuzz-replay-<name>, every
// build), which feeds it the files of the corpus and regression folders.
//
// A harness crashes (abort) only when a library breaks one of its own
// documented promises (KILN_FUZZ_CHECK); bad input must come back as a
// Status, so a crash, a sanitizer report, a timeout or an out-of-memory is
// always a finding.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUZZ_FUZZUTIL_H
#define KILN_FUZZ_FUZZUTIL_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

/// Aborts with a message when a documented property of the code under test
/// does not hold (e.g. decode(encode(text)) != text).
#define KILN_FUZZ_CHECK(cond, ...)                                             \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__,      \
                   __LINE__, #cond);                                           \
      std::fprintf(stderr, "  " __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                              \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

namespace kiln::fuzz {

/// A repository file: $KILN_SOURCE_DIR (environment) or the source folder
/// this harness was built from, joined with `relative`.
inline std::string sourcePath(const std::string &relative) {
  const char *env = std::getenv("KILN_SOURCE_DIR");
  std::string root = env && *env ? env : KILN_SOURCE_DIR;
  return root + "/" + relative;
}

/// Writes `size` bytes to `path` (created or truncated). Aborts on failure:
/// that is the harness's environment failing, not the code under test.
inline void writeFileOrDie(const std::string &path, const uint8_t *data,
                           size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(),
                   std::strerror(errno));
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

namespace detail {
// Heap-allocated and never freed, so that it outlives the exit handlers.
inline std::string *scratchPath = nullptr;

inline void removeScratchDir() {
  if (!scratchPath)
    return;
  if (DIR *d = ::opendir(scratchPath->c_str())) {
    while (struct dirent *entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        ::unlink((*scratchPath + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(scratchPath->c_str());
}
} // namespace detail

/// A private folder for harnesses that must hand a path to the code under
/// test: under /dev/shm when it exists (no disk traffic), else $TMPDIR or
/// /tmp. Created on first use; removed (with the files the harness put
/// there, one level deep) when the process exits normally.
inline const std::string &scratchDir() {
  if (detail::scratchPath)
    return *detail::scratchPath;
  struct stat st;
  std::string base = "/dev/shm";
  if (::stat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      ::access(base.c_str(), W_OK) != 0) {
    const char *tmp = std::getenv("TMPDIR");
    base = tmp && *tmp ? tmp : "/tmp";
  }
  std::string pattern = base + "/kiln-fuzz-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    std::fprintf(stderr, "cannot create a scratch folder under %s: %s\n",
                 base.c_str(), std::strerror(errno));
    std::abort();
  }
  detail::scratchPath = new std::string(pattern);
  std::atexit(&detail::removeScratchDir);
  return *detail::scratchPath;
}

} // namespace kiln::fuzz

#endif // KILN_FUZZ_FUZZUTIL_H
