//===- Fixtures.h - Where unit tests find the shared fixtures ---*- C++ -*-===//
//
// KILN_FIXTURES_DIR if set, else ${KILN_SOURCE_DIR}/test/fixtures if it
// exists, else ${KILN_SOURCE_DIR}/../shared/fixtures. KILN_SOURCE_DIR is a
// compile definition set by kiln_add_gtest.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_FIXTURES_H
#define KILN_TEST_UNIT_FIXTURES_H

#include <cstdlib>
#include <string>
#include <sys/stat.h>

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must be defined (kiln_add_gtest sets it)"
#endif

inline std::string kilnFixturesDir() {
  if (const char *env = std::getenv("KILN_FIXTURES_DIR"); env && *env)
    return env;
  std::string inTree = std::string(KILN_SOURCE_DIR) + "/test/fixtures";
  struct stat st;
  if (::stat(inTree.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return inTree;
  return std::string(KILN_SOURCE_DIR) + "/../shared/fixtures";
}

/// kilnFixturesDir() + "/" + name.
inline std::string kilnFixture(const std::string &name) {
  return kilnFixturesDir() + "/" + name;
}

#endif // KILN_TEST_UNIT_FIXTURES_H
