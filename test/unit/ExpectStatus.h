//===- ExpectStatus.h - gtest checks on Status and Result -------*- C++ -*-===//
//
// One way for every unit test to say "this must fail with a message that
// names X" or "this must succeed", for a Status or any Result<T>.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_EXPECTSTATUS_H
#define KILN_TEST_UNIT_EXPECTSTATUS_H

#include "support/Status.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace kiln::unittest {

/// The Status of a Status or a Result<T>, for the macros below.
inline const Status &statusOf(const Status &status) { return status; }
template <typename T> const Status &statusOf(const Result<T> &result) {
  return result.status();
}

} // namespace kiln::unittest

/// `expr` failed, and its message holds every one of the pieces (strings).
#define EXPECT_ERROR_CONTAINS(expr, ...)                                       \
  do {                                                                         \
    const auto &kiln_result_ = (expr);                                         \
    const ::kiln::Status &kiln_status_ =                                       \
        ::kiln::unittest::statusOf(kiln_result_);                              \
    ASSERT_FALSE(kiln_status_.isOk()) << "expected an error from " #expr;      \
    for (const std::string &kiln_piece_ :                                      \
         std::initializer_list<std::string>{__VA_ARGS__})                      \
      EXPECT_NE(kiln_status_.message().find(kiln_piece_), std::string::npos)   \
          << "message lacks '" << kiln_piece_                                  \
          << "': " << kiln_status_.message();                                  \
  } while (0)

/// `expr` succeeded; `check` is ASSERT_TRUE or EXPECT_TRUE.
#define KILN_STATUS_OK_(expr, check)                                           \
  do {                                                                         \
    const auto &kiln_result_ = (expr);                                         \
    const ::kiln::Status &kiln_status_ =                                       \
        ::kiln::unittest::statusOf(kiln_result_);                              \
    check(kiln_status_.isOk()) << kiln_status_.toString();                     \
  } while (0)
#define ASSERT_OK(expr) KILN_STATUS_OK_(expr, ASSERT_TRUE)
#define EXPECT_OK(expr) KILN_STATUS_OK_(expr, EXPECT_TRUE)

#endif // KILN_TEST_UNIT_EXPECTSTATUS_H
