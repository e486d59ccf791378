//===- TestUtil.h - Helpers for the checkpoint gtests -----------*- C++ -*-===//

#ifndef KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H
#define KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H

#include "frontends/glm/SafetensorsWriter.h"
#include "support/Status.h"
#include "test/unit/ExpectStatus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::glm::testing {

/// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// Writes `bytes` to `path` verbatim.
void writeBytes(const std::string &path, const std::string &bytes);
std::string readBytes(const std::string &path);

/// An 8-byte little-endian length, then `header`, then `data`. The length
/// written is `header.size()` unless `declaredLength` is given.
std::string rawSafetensors(const std::string &header, const std::string &data,
                           int64_t declaredLength = -1);

/// Writes a valid file holding `decls`, each filled with a repeating byte.
void writeFilled(const std::string &path, const std::vector<TensorDecl> &decls);

/// The elements x dtype size of a declaration.
uint64_t declBytes(const TensorDecl &decl);

} // namespace kiln::glm::testing

#endif // KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H
