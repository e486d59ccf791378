//===- EngineLoop.h - The engine on its own thread, for servers -*- C++ -*-===//
//
// Engine is single-threaded; a server has a thread per connection. EngineLoop
// owns one Engine and a thread that steps it while there is work and sleeps
// otherwise. Any thread may submit (with callbacks for tokens and the end),
// cancel, or read a metrics snapshot. Callbacks run on the engine thread,
// between steps: they must be quick (queue the token, notify a writer) and
// must not call back into the loop.
//
//   EngineLoop loop(std::move(engine));
//   auto id = loop.submit(params, onToken, onFinish);
//   ...
//   loop.cancel(*id);        // e.g. the client went away
//   loop.stop();             // drains (or cancels) and joins
//
// With a RankSync (serving under mpirun, RankSync.h) the loop sends the
// other ranks, before each step, what it did to the engine, and a heartbeat
// every kHeartbeatSeconds while idle. A failed collective stops the loop:
// its requests end with an error, new ones are refused, and failure() says
// why, for the tool to end the job. Under data-parallel attention the loop
// places each request on one group (Placement.h) and answers the ones placed
// elsewhere from the ranks' reports (RankSync.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_ENGINELOOP_H
#define KILN_RUNTIME_SERVE_ENGINELOOP_H

#include "runtime/serve/Engine.h"
#include "runtime/serve/RankSync.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::serve {

class EngineLoop {
public:
  /// The token, and its log-probability when the request asked for them.
  using TokenFn = std::function<void(int32_t token, const TokenLogprob *)>;
  using FinishFn = std::function<void(const RequestOutput &)>;

  /// `sync`: rank 0 of a multi-rank job (not owned; outlives the loop).
  explicit EngineLoop(std::unique_ptr<Engine> engine, RankSync *sync = nullptr);
  /// stop(/*drain=*/false).
  ~EngineLoop();
  EngineLoop(const EngineLoop &) = delete;
  EngineLoop &operator=(const EngineLoop &) = delete;

  /// Queues a request; refused as Engine::submit refuses, or when stopping.
  Result<RequestId> submit(RequestParams params, TokenFn onToken,
                           FinishFn onFinish);
  /// Ends a request at the next step; unknown or finished ids are ignored.
  void cancel(RequestId id);
  void flushPrefixCache();
  /// A copy, as of the last step (under data-parallel attention, summed
  /// over the ranks).
  EngineMetrics metrics() const;
  const KvLayout &layout() const { return layout_; }
  /// Engine::stopIdsFor: safe from any thread.
  std::vector<int32_t> stopIdsFor(const RequestParams &params) const {
    return engine_->stopIdsFor(params);
  }
  /// New submissions are refused from now on; with `drain`, running and
  /// waiting requests finish first, else they are cancelled. Joins.
  void stop(bool drain);
  /// Ok, or why the loop stopped on its own: a collective with the other
  /// ranks failed (RankSync.h). The ranks can no longer step together.
  Status failure() const;

private:
  void run();
  /// Sends `events` to the other ranks, if any.
  Status publish(const StepEvents &events);
  /// Stops the loop for `why`: every queued and live request ends with it.
  void fail(const Status &why);

  std::unique_ptr<Engine> engine_;
  RankSync *sync_ = nullptr;
  KvLayout layout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  // Guarded by mutex_.
  struct Submitted {
    RequestId id;
    RequestParams params;
    TokenFn onToken;
    FinishFn onFinish;
  };
  std::vector<Submitted> submitted_;
  int64_t refused_ = 0;
  std::vector<RequestId> cancelled_;
  bool flush_ = false;
  bool stopping_ = false, drain_ = true;
  Status failure_;
  EngineMetrics metrics_;
  RequestId nextId_ = 0;
  // Engine thread only: the live requests by engine id, and engine ids by
  // loop id.
  struct Live {
    RequestId id;
    int64_t tokens; // prompt + generated so far (Placement.h)
    TokenFn onToken;
    FinishFn onFinish;
  };
  std::map<RequestId, Live> live_;
  std::map<RequestId, RequestId> engineIds_;
  // Data-parallel attention (RankSync.h): requests placed on other ranks,
  // by loop id, and whether any of those ranks still has work.
  bool dataParallel_ = false;
  int groupSize_ = 1; // ranks per data-parallel group
  struct Remote {
    int group;      // its data-parallel group
    int64_t tokens; // prompt + generated so far
    TokenFn onToken;
    FinishFn onFinish;
  };
  std::map<RequestId, Remote> remote_;
  bool remoteWork_ = false;
  int lastPlaced_ = 0;
  /// The other ranks' metrics as of their last report (index: rank).
  std::vector<EngineMetrics> remoteMetrics_;
  /// The data-parallel group a new request runs on: the one whose live
  /// requests hold the fewest tokens (leastLoadedGroup).
  int placeRequest();
  /// Sends the other groups' tokens and finished requests to their callers,
  /// after checking that the ranks of each group scheduled alike (an error
  /// naming the first rank that did not).
  Status deliver(const std::vector<StepReport> &reports);
  std::thread thread_;
};

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_ENGINELOOP_H
