//===- ThreadPool.cpp -----------------------------------------------------===//
//
// Sleeping and waking use the Linux futex on the two counters themselves.
// The lost-wake-up race is closed Dekker-style with sequentially consistent
// operations: a thread about to sleep first announces it (sleepingWorkers_,
// callerSleeping_), then re-reads the counter and sleeps only while it holds
// the value it saw (the futex re-checks that atomically); the thread that
// changes the counter then reads the announcement and wakes if it is set.
// Of the two, at least one sees the other's write.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace kiln::cpu;

namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  sizeof(std::atomic<int32_t>) == sizeof(int32_t),
              "futex words must be plain 32-bit integers");

template <typename T> void futexWait(std::atomic<T> &word, T expected) {
  syscall(SYS_futex, reinterpret_cast<T *>(&word), FUTEX_WAIT_PRIVATE, expected,
          nullptr, nullptr, 0);
}

template <typename T> void futexWakeAll(std::atomic<T> &word) {
  syscall(SYS_futex, reinterpret_cast<T *>(&word), FUTEX_WAKE_PRIVATE, INT_MAX,
          nullptr, nullptr, 0);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// Spins until done() holds or `micros` pass; true if done() held. The clock
/// is read once every 64 polls, so a poll costs a load and a pause.
template <typename Done> bool spinUntil(int micros, bool yield, Done done) {
  if (micros <= 0)
    return done();
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done())
        return true;
      cpuRelax();
    }
    if (yield)
      sched_yield();
    if (Clock::now() >= deadline)
      return done();
  }
}

std::vector<int> allowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  return cpus;
}

int defaultSpinMicros(int threads, int cpus) {
  if (const char *env = std::getenv("KILN_SPIN_US")) {
    char *end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0 && v <= 1000000)
      return int(v);
  }
  // More threads than CPUs: a spinning thread holds a CPU that a thread with
  // work needs, so spin only briefly (and yield while doing it).
  return threads > cpus ? 20 : ThreadPool::kDefaultSpinMicros;
}

void chunkOf(int64_t n, int64_t grain, int parts, int index, int64_t &begin,
             int64_t &end) {
  int64_t units = (n + grain - 1) / grain;
  int64_t per = units / parts, extra = units % parts;
  int64_t first = index * per + std::min<int64_t>(index, extra);
  int64_t count = per + (index < extra ? 1 : 0);
  begin = std::min(n, first * grain);
  end = std::min(n, (first + count) * grain);
}

} // namespace

int kiln::cpu::availableCpus() {
  return std::max<int>(1, int(allowedCpus().size()));
}

ThreadPool::ThreadPool(int threads, PoolOptions options)
    : threads_(std::max(1, threads)), cpus_(allowedCpus()) {
  const int cpuCount = std::max<int>(1, int(cpus_.size()));
  spinMicros_ = options.spinMicros >= 0 ? options.spinMicros
                                        : defaultSpinMicros(threads_, cpuCount);
  if (options.pinThreads) {
    if (int(cpus_.size()) < threads_)
      pinError_ = "--cpu-affinity: " + std::to_string(threads_) +
                  " threads but this process may run on " +
                  std::to_string(cpus_.size()) + " CPUs";
    else
      pin(0);
  }
  for (int i = 1; i < threads_; ++i)
    workers_.emplace_back([this, i, options] {
      if (options.pinThreads && pinError_.empty())
        pin(i);
      workerLoop(i);
    });
}

void ThreadPool::pin(int index) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus_[index], &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (index == 0) {
    callerPinned_ = rc == 0;
    if (rc != 0)
      pinError_ = std::string("--cpu-affinity: pthread_setaffinity_np: ") +
                  std::strerror(rc);
  }
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futexWakeAll(generation_);
  for (auto &t : workers_)
    t.join();
  if (callerPinned_) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus_)
      CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
}

void ThreadPool::parallelFor(
    int64_t n, const std::function<void(int64_t, int64_t, int)> &fn,
    int64_t grain) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(1, grain);
  if (threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  task_ = &fn;
  n_ = n;
  grain_ = grain;
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  // Publishes the fields above to every worker that sees the new value.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepingWorkers_.load(std::memory_order_seq_cst) > 0)
    futexWakeAll(generation_);

  int64_t begin, end;
  chunkOf(n, grain, threads_, 0, begin, end);
  if (begin < end)
    fn(begin, end, 0);

  auto allDone = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  const bool oversubscribed = threads_ > int(cpus_.size());
  while (!spinUntil(spinMicros_, oversubscribed, allDone)) {
    callerSleeping_.store(1, std::memory_order_seq_cst);
    int32_t left = pending_.load(std::memory_order_seq_cst);
    if (left != 0)
      futexWait(pending_, left);
    callerSleeping_.store(0, std::memory_order_relaxed);
  }
  task_ = nullptr;
}

void ThreadPool::workerLoop(int index) {
  uint32_t seen = 0;
  const bool oversubscribed = threads_ > int(cpus_.size());
  for (;;) {
    auto changed = [&] {
      return generation_.load(std::memory_order_acquire) != seen;
    };
    while (!spinUntil(spinMicros_, oversubscribed, changed)) {
      sleepingWorkers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen)
        futexWait(generation_, seen);
      sleepingWorkers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_)
      return;
    int64_t begin, end;
    chunkOf(n_, grain_, threads_, index, begin, end);
    if (begin < end)
      (*task_)(begin, end, index);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        callerSleeping_.load(std::memory_order_seq_cst))
      futexWakeAll(pending_);
  }
}
