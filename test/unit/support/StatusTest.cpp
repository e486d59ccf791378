#include "support/Status.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
Result<int> parsePositive(int v) {
  if (v <= 0)
    return makeError(StatusCode::InvalidArgument,
                     "expected a positive value, found ", v);
  return v;
}

Status useTwice(int v, int *out) {
  KILN_ASSIGN_OR_RETURN(int x, parsePositive(v));
  KILN_ASSIGN_OR_RETURN(int y, parsePositive(x - 1));
  *out = x + y;
  return Status::ok();
}
} // namespace

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::ok().isOk());
  Status s = makeError(StatusCode::NotFound, "tensor '", "a.b", "' missing");
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::NotFound);
  EXPECT_EQ(s.message(), "tensor 'a.b' missing");
  EXPECT_EQ(s.withContext("model.safetensors").message(),
            "model.safetensors: tensor 'a.b' missing");
  EXPECT_EQ(s.toString(), "not found: tensor 'a.b' missing");
}

TEST(Status, ResultPropagation) {
  int out = 0;
  EXPECT_TRUE(useTwice(3, &out).isOk());
  EXPECT_EQ(out, 5);
  Status s = useTwice(1, &out);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(s.message(), "expected a positive value, found 0");
}
