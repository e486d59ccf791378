//===- TestUtil.h - Helpers for the checkpoint gtests -----------*- C++ -*-===//

#ifndef KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H
#define KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H

#include "frontends/glm/SafetensorsWriter.h"
#include "support/Status.h"

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

/// The Status of a Status or a Result<T>, for the macros below.
inline const Status &statusOf(const Status &status) { return status; }
template <typename T> const Status &statusOf(const Result<T> &result) {
  return result.status();
}

} // namespace kiln::glm::testing

#define EXPECT_ERROR_CONTAINS(expr, ...)                                       \
  do {                                                                         \
    const auto &kiln_result_ = (expr);                                         \
    const ::kiln::Status &kiln_status_ =                                       \
        ::kiln::glm::testing::statusOf(kiln_result_);                          \
    ASSERT_FALSE(kiln_status_.isOk()) << "expected an error from " #expr;      \
    for (const char *kiln_piece_ : {__VA_ARGS__})                              \
      EXPECT_NE(kiln_status_.message().find(kiln_piece_), std::string::npos)   \
          << "message lacks '" << kiln_piece_                                  \
          << "': " << kiln_status_.message();                                  \
  } while (0)

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    const auto &kiln_result_ = (expr);                                         \
    const ::kiln::Status &kiln_status_ =                                       \
        ::kiln::glm::testing::statusOf(kiln_result_);                          \
    ASSERT_TRUE(kiln_status_.isOk()) << kiln_status_.toString();               \
  } while (0)

#endif // KILN_TEST_UNIT_CHECKPOINT_TESTUTIL_H
