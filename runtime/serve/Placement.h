//===- Placement.h - Where a data-parallel request runs -----*- C++ -*-===//
//
// Under data-parallel attention each group has its own KV cache and its own
// batch, so a request costs its group the tokens it holds: its prompt and
// what it has generated so far. Counting requests instead would put a 20k-
// token prompt beside a group's other long prompts as readily as beside a
// group of short chats (sglang's "minimum tokens" balancing, SERVING.md 3).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_PLACEMENT_H
#define KILN_RUNTIME_SERVE_PLACEMENT_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::serve {

/// The group whose requests hold the fewest tokens (`tokens[g]`); on a
/// tie, the first after `last` in round-robin order, so equal groups take
/// turns. `tokens` is not empty.
inline int leastLoadedGroup(const std::vector<int64_t> &tokens, int last) {
  const int groups = int(tokens.size());
  int best = -1;
  for (int i = 1; i <= groups; ++i) {
    int g = (last + i) % groups;
    if (best < 0 || tokens[std::size_t(g)] < tokens[std::size_t(best)])
      best = g;
  }
  return best;
}

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_PLACEMENT_H
