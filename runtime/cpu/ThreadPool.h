//===- ThreadPool.h - Fork-join parallel loops for the CPU kernels -*- C++ -*-//
//
// A fixed set of worker threads that run `parallelFor` ranges. The calling
// thread takes part, so a pool of N threads uses N - 1 workers.
//
// A dispatch costs about a microsecond, not two futex round-trips: the caller
// publishes the task and bumps an atomic generation counter; workers spin on
// that counter for a bounded time (`PoolOptions::spinMicros`) before they
// sleep on it. A thread sleeps only after a spin budget passes with nothing
// to do, and is woken only when some thread is known to sleep, so
// back-to-back dispatches (a plan step has hundreds) never enter the kernel.
//
// The range is cut into a few chunks per thread that threads claim from a
// counter tagged with the generation, and the caller waits for the chunks,
// not for the workers: a worker that the OS has not scheduled (a busy
// machine, more threads than CPUs) costs its share of the speed, never a
// stall. Which thread runs a chunk does not change its result: callers use
// the worker index only to pick scratch space.
//
// A caller that says what an element costs (matmul rows, MoE units,
// attention items: multiply-adds) gets chunks of at least minChunkCost()
// (about 3 us on one core): starting another thread and waiting for it
// costs about a microsecond on a 2-vCPU guest, so a small model's decode
// dispatches run on the caller alone while large ones still split.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_THREADPOOL_H
#define KILN_RUNTIME_CPU_THREADPOOL_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::cpu {

/// The CPUs this process may run on (its affinity mask: a container's or
/// taskset's limit, not the machine's count); at least 1.
int availableCpus();

struct PoolOptions {
  /// How long an idle thread spins before it sleeps; negative picks the
  /// default (kDefaultSpinMicros, or a short spin when the pool has more
  /// threads than the CPUs this process may run on). $KILN_SPIN_US overrides
  /// the default.
  int spinMicros = -1;
  /// Pin thread i to the i-th CPU of the process's affinity mask (thread 0
  /// is the one that constructs the pool and calls parallelFor; its mask is
  /// restored when the pool is destroyed).
  bool pinThreads = false;
  /// ThreadPool::minChunkCost(); negative picks the default
  /// (kDefaultMinChunkCost, or $KILN_MIN_CHUNK_COST); 0 splits every
  /// costed range as an uncosted one.
  int64_t minChunkCost = -1;
};

class ThreadPool {
public:
  static constexpr int kDefaultSpinMicros = 1000;

  explicit ThreadPool(int threads, PoolOptions options = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return threads_; }
  int spinMicros() const { return spinMicros_; }
  /// Empty when threads are not pinned or pinning succeeded; otherwise why
  /// it failed (the pool still runs, unpinned).
  const std::string &pinError() const { return pinError_; }

  /// Splits [0, n) into `size()` contiguous chunks (each a multiple of
  /// `grain` except the last) and runs fn(begin, end, worker) on each, the
  /// calling thread included; returns when all are done. Calls from several
  /// threads at once are not allowed (one caller owns a pool).
  ///
  /// `unitCost` is the work of one element of [0, n) in multiply-adds (0:
  /// not known). A chunk then gets at least minChunkCost() of it, so a
  /// dispatch too small to pay for another thread's start and the wait for
  /// it runs on the caller alone. Callers whose split changes no result
  /// (every caller here) may pass it.
  void parallelFor(int64_t n,
                   const std::function<void(int64_t, int64_t, int)> &fn,
                   int64_t grain = 1, int64_t unitCost = 0);
  /// The least work (multiply-adds) a chunk of a costed parallelFor gets
  /// (PoolOptions::minChunkCost).
  int64_t minChunkCost() const { return minChunkCost_; }
  /// How many threads `work` multiply-adds pay for: one per minChunkCost(),
  /// 1 to size() (size() when the minimum is 0). For callers that schedule
  /// their own items over parallelFor(threadsFor(...), ...).
  int threadsFor(int64_t work) const {
    if (minChunkCost_ <= 0)
      return threads_;
    return int(std::clamp<int64_t>(work / minChunkCost_, 1, threads_));
  }
  /// About 3 us of the FP32 kernels on one core (bench/RESULTS.md,
  /// "small dispatches").
  static constexpr int64_t kDefaultMinChunkCost = 65536;

private:
  void workerLoop(int index);
  void pin(int index);

  int threads_;
  int spinMicros_;
  int64_t minChunkCost_ = kDefaultMinChunkCost;
  /// More threads than CPUs: spinning threads also yield.
  bool oversubscribed_ = false;
  std::string pinError_;
  std::vector<int> cpus_;
  bool callerPinned_ = false;
  std::vector<std::thread> workers_;

  /// Claims and runs chunks of generation `generation` until none is left.
  void runChunks(uint32_t generation, int worker);

  // Written by the caller before `claim_` is published (release); read by a
  // thread only after it claimed a chunk of that generation, which keeps the
  // caller (and so these fields) in that generation until the chunk is done.
  const std::function<void(int64_t, int64_t, int)> *task_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<bool> stop_{false};

  // Each on its own cache line: workers poll the generation, claim from
  // `claim_` (generation << 32 | chunk count << 16 | next chunk) and count
  // finished chunks in `finished_`.
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<int32_t> sleepingWorkers_{0};
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int32_t> finished_{0};
  std::atomic<int32_t> callerSleeping_{0};
};

} // namespace kiln::cpu

#endif // KILN_RUNTIME_CPU_THREADPOOL_H
