//===- EngineLoop.cpp -----------------------------------------------------===//

#include "runtime/serve/EngineLoop.h"

#include <chrono>

using namespace kiln;
using namespace kiln::serve;

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, RankSync *sync)
    : engine_(std::move(engine)), sync_(sync), layout_(engine_->layout()),
      metrics_(engine_->metrics()) {
  engine_->setOnToken(
      [this](RequestId engineId, int32_t token, const TokenLogprob *logprob) {
        auto it = live_.find(engineId);
        if (it != live_.end() && it->second.onToken)
          it->second.onToken(token, logprob);
      });
  thread_ = std::thread([this] { run(); });
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
  live_.clear();
  engineIds_.clear();
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
               stopping_ || engine_->hasWork();
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
      if (sync_)
        events.submitted.push_back(s.params);
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
      live_[*engineId] = {s.id, std::move(s.onToken), std::move(s.onFinish)};
      engineIds_[s.id] = *engineId;
    }
    for (RequestId id : cancelled) {
      auto it = engineIds_.find(id);
      if (it != engineIds_.end())
        events.cancelled.push_back(it->second);
    }
    if (stopping && !drain)
      for (const auto &[id, engineId] : engineIds_)
        events.cancelled.push_back(engineId);
    for (RequestId engineId : events.cancelled)
      engine_->cancel(engineId);
    events.flushPrefixCache = flush;
    if (flush)
      engine_->flushPrefixCache();
    events.step = engine_->hasWork();
    if (Status sent = publish(events); !sent.isOk())
      return fail(sent);
    if (events.step) {
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
      done = stopping_ && submitted_.empty() && !engine_->hasWork();
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
