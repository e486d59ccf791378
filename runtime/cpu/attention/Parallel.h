//===- Parallel.h - Dynamic scheduling over the ThreadPool ------*- C++ -*-===//
//
// Internal. Attention work items differ in cost (causal rows grow with the
// position), so workers pull items from a shared counter instead of taking
// fixed contiguous chunks. Items must not depend on which worker runs them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_PARALLEL_H
#define KILN_RUNTIME_CPU_ATTENTION_PARALLEL_H

#include "runtime/cpu/ThreadPool.h"

#include <atomic>
#include <cstdint>

namespace kiln::cpu::detail {

/// Runs fn(item, worker) for every item in [0, items); `worker` < pool.size().
/// `itemCost`: an item's multiply-adds, about (0: not known); then only as
/// many threads take part as the work pays for (ThreadPool::threadsFor).
template <typename Fn>
void forEachItem(ThreadPool &pool, int64_t items, const Fn &fn,
                 int64_t itemCost = 0) {
  if (items <= 0)
    return;
  std::atomic<int64_t> next{0};
  int64_t workers = std::min<int64_t>(pool.size(), items);
  if (itemCost > 0)
    workers = std::min<int64_t>(workers, pool.threadsFor(items * itemCost));
  pool.parallelFor(workers, [&](int64_t, int64_t, int worker) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < items;
         i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i, worker);
  });
}

} // namespace kiln::cpu::detail

#endif // KILN_RUNTIME_CPU_ATTENTION_PARALLEL_H
