//===- ArenaTest.cpp - Scratch reuse without system allocations -----------===//

#include "runtime/cpu/Arena.h"

#include <gtest/gtest.h>

using namespace kiln::cpu;

namespace {

TEST(Arena, AlignedAndReusedAfterWarmup) {
  Arena arena;
  auto round = [&] {
    Arena::Scope scope(arena);
    for (int64_t n : {3, 100000, 17, 300000}) {
      float *p = arena.alloc<float>(n);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Arena::kAlign, 0u);
      p[0] = p[n - 1] = 1.0f;
    }
  };
  round();
  arena.reset(); // merges the blocks grown in the first round
  const int64_t after = arena.systemAllocations();
  for (int i = 0; i < 5; ++i)
    round();
  EXPECT_EQ(arena.systemAllocations(), after);
}

TEST(Arena, ScopesNestAndRewind) {
  Arena arena;
  void *outer = arena.allocBytes(64);
  void *first;
  {
    Arena::Scope scope(arena);
    first = arena.allocBytes(128);
  }
  {
    Arena::Scope scope(arena);
    EXPECT_EQ(arena.allocBytes(128), first); // same memory again
  }
  EXPECT_NE(outer, first);
}

} // namespace
