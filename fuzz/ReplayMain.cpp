//===- ReplayMain.cpp - Feeds files to a harness without libFuzzer -------===//
//
//   fuzz-replay-<name> [--optional] PATH...
//
// Calls LLVMFuzzerInitialize (when the harness has one), then
// LLVMFuzzerTestOneInput once with an empty input and once per file: PATH is
// a file or a folder (its regular files, in name order, not recursing). A
// missing PATH is an error unless it follows --optional (regression folders
// exist only once something was found). Built in every build, with any
// compiler, so ctest replays the corpora and the regressions; a crash or a
// sanitizer report fails the test, as it would under libFuzzer.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc,
                                                          char ***argv);

namespace {

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> filesIn(const std::string &dir) {
  std::vector<std::string> files;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (struct dirent *entry = ::readdir(d)) {
      std::string path = dir + "/" + entry->d_name;
      struct stat st;
      if (entry->d_name[0] != '.' && ::stat(path.c_str(), &st) == 0 &&
          S_ISREG(st.st_mode))
        files.push_back(path);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool runFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  // A copy of exactly `size` bytes, so that ASan catches reads past the end
  // as libFuzzer's own buffers would.
  uint8_t *copy = new uint8_t[bytes.size() ? bytes.size() : 1];
  if (!bytes.empty())
    std::memcpy(copy, bytes.data(), bytes.size());
  LLVMFuzzerTestOneInput(copy, bytes.size());
  delete[] copy;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  LLVMFuzzerTestOneInput(nullptr, 0);
  size_t count = 0;
  bool optional = false, ok = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--optional") {
      optional = true;
      continue;
    }
    if (!exists(arg)) {
      if (!optional) {
        std::fprintf(stderr, "replay: %s does not exist\n", arg.c_str());
        ok = false;
      }
      continue;
    }
    std::vector<std::string> files =
        isDirectory(arg) ? filesIn(arg) : std::vector<std::string>{arg};
    for (const std::string &file : files) {
      ok &= runFile(file);
      ++count;
    }
  }
  std::printf("replay: %zu inputs\n", count);
  return ok ? 0 : 1;
}
