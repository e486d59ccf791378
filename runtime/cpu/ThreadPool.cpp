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

int64_t defaultMinChunkCost() {
  if (const char *env = std::getenv("KILN_MIN_CHUNK_COST")) {
    char *end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0 && v <= (1ll << 40))
      return int64_t(v);
  }
  return ThreadPool::kDefaultMinChunkCost;
}

/// Chunks per thread: enough that a late thread's share is picked up by the
/// others, few enough that claiming them costs little.
constexpr int64_t kChunksPerThread = 2;
/// The claim word holds chunk counts in 16 bits.
constexpr int64_t kMaxChunks = 0xffff;

uint64_t packClaim(uint32_t generation, int64_t chunks, int64_t next) {
  return uint64_t(generation) << 32 | uint64_t(chunks) << 16 | uint64_t(next);
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
  oversubscribed_ = threads_ > cpuCount;
  spinMicros_ = options.spinMicros >= 0 ? options.spinMicros
                                        : defaultSpinMicros(threads_, cpuCount);
  minChunkCost_ =
      options.minChunkCost >= 0 ? options.minChunkCost : defaultMinChunkCost();
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
  stop_.store(true, std::memory_order_release);
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
    int64_t grain, int64_t unitCost) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(1, grain);
  if (unitCost > 0) { // whole grains of at least minChunkCost_
    const int64_t grainCost = grain * unitCost;
    grain *= std::max<int64_t>(1, (minChunkCost_ + grainCost - 1) / grainCost);
  }
  const int64_t units = (n + grain - 1) / grain;
  if (threads_ == 1 || units == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t chunks = std::min<int64_t>(
      {units, int64_t(threads_) * kChunksPerThread, kMaxChunks});
  task_ = &fn;
  n_ = n;
  grain_ = grain;
  finished_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  // Publishes the fields above to every thread that claims a chunk.
  claim_.store(packClaim(generation, chunks, 0), std::memory_order_seq_cst);
  generation_.store(generation, std::memory_order_seq_cst);
  if (sleepingWorkers_.load(std::memory_order_seq_cst) > 0)
    futexWakeAll(generation_);

  runChunks(generation, 0);

  auto allDone = [&] {
    return finished_.load(std::memory_order_acquire) == int32_t(chunks);
  };
  while (!spinUntil(spinMicros_, oversubscribed_, allDone)) {
    callerSleeping_.store(1, std::memory_order_seq_cst);
    int32_t done = finished_.load(std::memory_order_seq_cst);
    if (done != int32_t(chunks))
      futexWait(finished_, done);
    callerSleeping_.store(0, std::memory_order_relaxed);
  }
  task_ = nullptr;
}

void ThreadPool::runChunks(uint32_t generation, int worker) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (uint32_t(claim >> 32) != generation)
      return;
    const int64_t chunks = int64_t((claim >> 16) & 0xffff);
    const int64_t next = int64_t(claim & 0xffff);
    if (next >= chunks)
      return;
    if (!claim_.compare_exchange_weak(claim, claim + 1,
                                      std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    int64_t begin, end;
    chunkOf(n_, grain_, int(chunks), int(next), begin, end);
    if (begin < end)
      (*task_)(begin, end, worker);
    if (finished_.fetch_add(1, std::memory_order_seq_cst) + 1 ==
            int32_t(chunks) &&
        callerSleeping_.load(std::memory_order_seq_cst))
      futexWakeAll(finished_);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::workerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    auto changed = [&] {
      return generation_.load(std::memory_order_acquire) != seen;
    };
    while (!spinUntil(spinMicros_, oversubscribed_, changed)) {
      sleepingWorkers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen)
        futexWait(generation_, seen);
      sleepingWorkers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire))
      return;
    runChunks(seen, index);
  }
}
