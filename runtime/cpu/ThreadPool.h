//===- ThreadPool.h - Fork-join parallel loops for the CPU kernels -*- C++ -*-//
//
// A fixed set of worker threads that run `parallelFor` ranges. The calling
// thread takes part, so a pool of N threads uses N - 1 workers.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_THREADPOOL_H
#define KILN_RUNTIME_CPU_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::cpu {

class ThreadPool {
public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return threads_; }

  /// Splits [0, n) into `size()` contiguous chunks (each a multiple of
  /// `grain` except the last) and runs fn(begin, end, worker) on each, the
  /// calling thread included; returns when all are done.
  void parallelFor(int64_t n,
                   const std::function<void(int64_t, int64_t, int)> &fn,
                   int64_t grain = 1);

private:
  void workerLoop(int index);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t, int)> *task_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_THREADPOOL_H
