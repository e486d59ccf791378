//===- EngineLoop.cpp -----------------------------------------------------===//

#include "runtime/serve/EngineLoop.h"
#include "runtime/serve/Placement.h"

#include <algorithm>
#include <chrono>

using namespace kiln;
using namespace kiln::serve;

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, RankSync *sync)
    : engine_(std::move(engine)), sync_(sync), layout_(engine_->layout()),
      metrics_(engine_->metrics()) {
  engine_->setOnToken(
      [this](RequestId engineId, int32_t token, const TokenLogprob *logprob) {
        auto it = live_.find(engineId);
        if (it == live_.end())
          return;
        ++it->second.tokens;
        if (it->second.onToken)
          it->second.onToken(token, logprob);
      });
  dataParallel_ = sync_ && engine_->model().info().attentionDataParallel;
  groupSize_ = engine_->model().info().tensorParallel;
  thread_ = std::thread([this] { run(); });
}

int EngineLoop::placeRequest() {
  const int groups = engine_->model().comm()->size() / groupSize_;
  std::vector<int64_t> tokens(size_t(groups), 0);
  for (const auto &[engineId, live] : live_)
    tokens[0] += live.tokens;
  for (const auto &[loop, remote] : remote_)
    tokens[size_t(remote.group)] += remote.tokens;
  lastPlaced_ = leastLoadedGroup(tokens, lastPlaced_);
  return lastPlaced_;
}

Status EngineLoop::deliver(const std::vector<StepReport> &reports) {
  for (size_t r = 1; r < reports.size(); ++r) {
    size_t first = r / size_t(groupSize_) * size_t(groupSize_);
    const EngineMetrics &a = reports[r].metrics, &b = reports[first].metrics;
    if (r != first && scheduleDigest(a) != scheduleDigest(b))
      return makeError(StatusCode::Internal, "the engine of rank ", r,
                       " no longer schedules as rank ", first,
                       "'s, which runs the same requests (steps ", a.steps,
                       " and ", b.steps, ", running ", a.running, " and ",
                       b.running, ", waiting ", a.waiting, " and ", b.waiting,
                       ", pages used ", a.pagesUsed, " and ", b.pagesUsed, ")");
  }
  remoteWork_ = false;
  remoteMetrics_.resize(reports.size());
  for (size_t r = 1; r < reports.size(); ++r) {
    remoteWork_ = remoteWork_ || reports[r].hasWork;
    // The first rank of each other group answers for it.
    if (r % size_t(groupSize_) != 0)
      continue;
    remoteMetrics_[r] = reports[r].metrics;
    for (const StepReport::Token &t : reports[r].tokens) {
      auto it = remote_.find(t.loop);
      if (it == remote_.end())
        continue;
      ++it->second.tokens;
      if (it->second.onToken)
        it->second.onToken(t.token, t.hasLogprob ? &t.logprob : nullptr);
    }
    for (const RequestOutput &out : reports[r].finished) {
      auto it = remote_.find(out.request);
      if (it == remote_.end())
        continue;
      Remote remote = std::move(it->second);
      remote_.erase(it);
      if (remote.onFinish)
        remote.onFinish(out);
    }
  }
  return Status::ok();
}

EngineLoop::~EngineLoop() { stop(/*drain=*/false); }

Result<RequestId> EngineLoop::submit(RequestParams params, TokenFn onToken,
                                     FinishFn onFinish) {
  Status valid = engine_->validate(params);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!valid.isOk()) {
    ++refused_;
    return valid;
  }
  if (stopping_) {
    ++refused_;
    return makeError(StatusCode::Unavailable,
                     "the engine is shutting down: no new requests");
  }
  RequestId id = nextId_++;
  submitted_.push_back(
      {id, std::move(params), std::move(onToken), std::move(onFinish)});
  wake_.notify_one();
  return id;
}

void EngineLoop::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_.push_back(id);
  wake_.notify_one();
}

void EngineLoop::flushPrefixCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_ = true;
  wake_.notify_one();
}

EngineMetrics EngineLoop::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineMetrics m = metrics_;
  m.requestsRefused += refused_;
  return m;
}

void EngineLoop::stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_)
      drain_ = drain;
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable())
    thread_.join();
}

Status EngineLoop::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

Status EngineLoop::publish(const StepEvents &events) {
  return sync_ ? sync_->publish(events) : Status::ok();
}

void EngineLoop::fail(const Status &why) {
  std::vector<Submitted> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = why;
    stopping_ = true;
    queued.swap(submitted_);
  }
  RequestOutput out;
  out.finish = FinishReason::Error;
  out.error = why.message();
  for (Submitted &s : queued)
    if (s.onFinish) {
      out.request = s.id;
      s.onFinish(out);
    }
  for (auto &[engineId, live] : live_)
    if (live.onFinish) {
      out.request = live.id;
      live.onFinish(out);
    }
  for (auto &[loop, remote] : remote_)
    if (remote.onFinish) {
      out.request = loop;
      remote.onFinish(out);
    }
  live_.clear();
  engineIds_.clear();
  remote_.clear();
}

void EngineLoop::run() {
  const auto heartbeat = std::chrono::duration<double>(kHeartbeatSeconds);
  while (true) {
    std::vector<Submitted> submitted;
    std::vector<RequestId> cancelled;
    bool flush = false, stopping = false, drain = true;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto ready = [&] {
        return !submitted_.empty() || !cancelled_.empty() || flush_ ||
               stopping_ || engine_->hasWork() || remoteWork_ ||
               !remote_.empty();
      };
      if (!sync_)
        wake_.wait(lock, ready);
      else if (!wake_.wait_for(lock, heartbeat, ready)) {
        lock.unlock();
        // Idle: the other ranks keep waiting.
        if (Status sent = publish(StepEvents{}); !sent.isOk())
          return fail(sent);
        continue;
      }
      submitted.swap(submitted_);
      cancelled.swap(cancelled_);
      std::swap(flush, flush_);
      stopping = stopping_;
      drain = drain_;
    }
    StepEvents events; // what the other ranks' engines do alike
    for (Submitted &s : submitted) {
      int64_t promptTokens = int64_t(s.params.prompt.size());
      if (dataParallel_) {
        // Every rank of the group placed on runs it; another group's
        // tokens come back in the reports of its first rank.
        int group = placeRequest();
        events.submitted.push_back(s.params);
        events.placedOn.push_back(group);
        events.loopIds.push_back(s.id);
        if (group != 0) {
          remote_[s.id] = {group, promptTokens, std::move(s.onToken),
                           std::move(s.onFinish)};
          continue;
        }
      } else if (sync_) {
        events.submitted.push_back(s.params);
      }
      Result<RequestId> engineId = engine_->submit(std::move(s.params));
      if (!engineId.isOk()) { // validated, so only if the engine changed
        RequestOutput out;
        out.request = s.id;
        out.finish = FinishReason::Error;
        out.error = engineId.status().message();
        if (s.onFinish)
          s.onFinish(out);
        continue;
      }
      live_[*engineId] = {s.id, promptTokens, std::move(s.onToken),
                          std::move(s.onFinish)};
      engineIds_[s.id] = *engineId;
    }
    // This engine's ids to cancel; the other ranks get engine ids or,
    // under data-parallel attention, loop ids of their own requests.
    std::vector<RequestId> cancelHere;
    for (RequestId id : cancelled) {
      if (auto it = engineIds_.find(id); it != engineIds_.end()) {
        cancelHere.push_back(it->second);
        if (dataParallel_) // the other ranks of this group
          events.cancelled.push_back(id);
      } else if (dataParallel_ && remote_.count(id)) {
        events.cancelled.push_back(id);
      }
    }
    if (stopping && !drain) {
      for (const auto &[id, engineId] : engineIds_) {
        cancelHere.push_back(engineId);
        if (dataParallel_)
          events.cancelled.push_back(id);
      }
      for (const auto &[loop, remote] : remote_)
        events.cancelled.push_back(loop);
    }
    if (!dataParallel_)
      events.cancelled.insert(events.cancelled.end(), cancelHere.begin(),
                              cancelHere.end());
    for (RequestId engineId : cancelHere)
      engine_->cancel(engineId);
    events.flushPrefixCache = flush;
    if (flush)
      engine_->flushPrefixCache();
    events.step = engine_->hasWork() ||
                  (dataParallel_ && (remoteWork_ || !remote_.empty()));
    if (Status sent = publish(events); !sent.isOk())
      return fail(sent);
    if (events.step && dataParallel_) {
      if (engine_->hasWork())
        engine_->step();
      if (Status turn = engine_->endTurn(); !turn.isOk())
        return fail(turn);
      StepReport own;
      own.hasWork = engine_->hasWork();
      own.metrics = engine_->metrics();
      Result<std::vector<StepReport>> reports = sync_->gather(own);
      if (!reports.isOk())
        return fail(reports.status());
      if (Status same = deliver(*reports); !same.isOk())
        return fail(same);
    } else if (events.step) {
      engine_->step();
      if (sync_)
        if (Status same = sync_->agree(engine_->metrics()); !same.isOk())
          return fail(same);
    }
    for (RequestOutput &out : engine_->takeFinished()) {
      auto it = live_.find(out.request);
      if (it == live_.end())
        continue;
      Live live = std::move(it->second);
      live_.erase(it);
      engineIds_.erase(live.id);
      out.request = live.id;
      if (live.onFinish)
        live.onFinish(out);
    }
    bool done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      metrics_ = engine_->metrics();
      for (const EngineMetrics &m : remoteMetrics_)
        addMetrics(metrics_, m);
      done = stopping_ && submitted_.empty() && !engine_->hasWork() &&
             remote_.empty() && !remoteWork_;
    }
    if (done) {
      StepEvents last;
      last.stop = true;
      if (Status sent = publish(last); !sent.isOk())
        fail(sent);
      return;
    }
  }
}
