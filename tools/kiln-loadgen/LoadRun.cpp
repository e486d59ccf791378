//===- LoadRun.cpp - Open-loop load at one request rate -------------------===//

#include "tools/kiln-loadgen/LoadRun.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

using namespace kiln::loadgen;
using nlohmann::json;

namespace {

/// A counting semaphore whose waiters are the dispatcher alone, so they
/// are served in arrival order.
class Slots {
public:
  explicit Slots(int64_t n) : free_(n) {}
  void acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
    cv_.notify_one();
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t free_;
};

/// Runs every request on its own thread, each after `arrivals[i]` seconds
/// and a free slot; their records in send order and the seconds it took.
std::vector<RequestRecord> dispatch(const RunOptions &o,
                                    const std::vector<RequestSpec> &requests,
                                    const std::vector<double> &arrivals,
                                    double &durationS) {
  const size_t n = requests.size();
  std::vector<std::string> bodies;
  for (const RequestSpec &r : requests)
    bodies.push_back(requestBody(o.model, r));
  std::vector<RequestRecord> records(n);
  Slots slots(o.maxConcurrency > 0 ? o.maxConcurrency : int64_t(n) + 1);
  std::vector<std::thread> threads;
  threads.reserve(n);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(arrivals[i])));
    slots.acquire();
    try {
      threads.emplace_back([&, i] {
        records[i] = streamRequest(o.target, o.endpoint, bodies[i],
                                   int64_t(requests[i].prompt.size()), start);
        slots.release();
      });
    } catch (const std::system_error &e) {
      records[i].error = std::string("could not start a thread: ") + e.what();
      slots.release();
    }
  }
  for (std::thread &t : threads)
    t.join();
  durationS = std::chrono::duration<double>(Clock::now() - start).count();
  return records;
}

} // namespace

std::string kiln::loadgen::requestBody(const std::string &model,
                                       const RequestSpec &r) {
  json j = {
      {"prompt", r.prompt}, {"max_tokens", r.outputLen},
      {"temperature", 0.0}, {"ignore_eos", true},
      {"stream", true},     {"stream_options", {{"include_usage", true}}}};
  if (!model.empty())
    j["model"] = model;
  return j.dump();
}

RunSummary kiln::loadgen::runLoad(const RunOptions &o,
                                  const std::vector<RequestSpec> &requests) {
  double durationS = 0;
  std::vector<RequestRecord> records =
      dispatch(o, requests,
               poissonArrivals(int64_t(requests.size()), o.requestRate, o.seed),
               durationS);
  return summarize(std::move(records), durationS, o.requestRate,
                   o.maxConcurrency);
}

std::vector<RequestRecord> kiln::loadgen::warmUp(const RunOptions &o,
                                                 RequestSpec first, int64_t n) {
  first.outputLen = std::min<int64_t>(first.outputLen, 32);
  double durationS = 0;
  return dispatch(o, std::vector<RequestSpec>(size_t(n), first),
                  std::vector<double>(size_t(n), 0.0), durationS);
}
