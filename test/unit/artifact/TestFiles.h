//===- TestFiles.h - Temporary folders and byte surgery on files -*- C++ -*-=//

#ifndef KILN_TEST_UNIT_ARTIFACT_TESTFILES_H
#define KILN_TEST_UNIT_ARTIFACT_TESTFILES_H

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::artifact::test {

/// A gtest fixture with a fresh temporary folder, removed afterwards.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;
  std::string file(const std::string &name) const { return dir_ + "/" + name; }
  /// Names in the folder, sorted.
  std::vector<std::string> listDir() const;

  std::string dir_;
};

std::vector<uint8_t> readBytes(const std::string &path);
void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes);
/// Overwrites `bytes.size()` bytes at `offset` in place.
void patchBytes(const std::string &path, uint64_t offset,
                const std::vector<uint8_t> &bytes);
void flipByte(const std::string &path, uint64_t offset);
void truncateTo(const std::string &path, uint64_t size);
/// Recomputes file 0's metadata CRC and header CRC after an edit, so that
/// the checks behind them are reached.
void resealHeader(const std::string &path);
/// The same on a file's bytes in memory.
void resealHeader(std::vector<uint8_t> &bytes);

} // namespace kiln::artifact::test

#endif // KILN_TEST_UNIT_ARTIFACT_TESTFILES_H
