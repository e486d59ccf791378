//===- ThreadPool.cpp -----------------------------------------------------===//

#include "runtime/cpu/ThreadPool.h"

#include <algorithm>

using namespace kiln::cpu;

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i)
    workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &t : workers_)
    t.join();
}

static void chunkOf(int64_t n, int64_t grain, int parts, int index,
                    int64_t &begin, int64_t &end) {
  int64_t units = (n + grain - 1) / grain;
  int64_t per = units / parts, extra = units % parts;
  int64_t first = index * per + std::min<int64_t>(index, extra);
  int64_t count = per + (index < extra ? 1 : 0);
  begin = std::min(n, first * grain);
  end = std::min(n, (first + count) * grain);
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    n_ = n;
    grain_ = grain;
    pending_ = threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  int64_t begin, end;
  chunkOf(n, grain, threads_, 0, begin, end);
  if (begin < end)
    fn(begin, end, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)> *task;
    int64_t n, grain;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      task = task_;
      n = n_;
      grain = grain_;
    }
    int64_t begin, end;
    chunkOf(n, grain, threads_, index, begin, end);
    if (begin < end)
      (*task)(begin, end, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0)
        done_.notify_one();
    }
  }
}
