//===- RankSync.cpp -------------------------------------------------------===//

#include "runtime/serve/RankSync.h"

#include <array>
#include <map>

using namespace kiln;
using namespace kiln::serve;

Status RankSync::publish(const StepEvents &events) {
  std::vector<int64_t> words = encodeStepEvents(events);
  return comm::broadcastVector(comm_, words, 0, "step events");
}

Result<StepEvents> RankSync::receive() {
  std::vector<int64_t> words;
  KILN_RETURN_IF_ERROR(comm::broadcastVector(comm_, words, 0, "step events"));
  return decodeStepEvents(words);
}

std::array<int64_t, 8> kiln::serve::scheduleDigest(const EngineMetrics &m) {
  return {m.steps,          m.running,          m.waiting,
          m.pagesUsed,      m.requestsFinished, m.generatedTokens,
          m.computedTokens, m.preemptions};
}

Status RankSync::agree(const EngineMetrics &m) {
  // What every rank's engine must have done alike.
  const std::array<int64_t, 8> mine = scheduleDigest(m);
  std::vector<int64_t> all(mine.size() * size_t(comm_.size()));
  KILN_RETURN_IF_ERROR(comm_.allGather(mine, all));
  // Against rank 0's counters, so every rank names the same rank.
  for (int r = 1; r < comm_.size(); ++r)
    if (!std::equal(all.begin(), all.begin() + mine.size(),
                    all.begin() + r * mine.size()))
      return makeError(StatusCode::Internal, "the engine of rank ", r,
                       " no longer schedules as rank 0's (step ", m.steps,
                       "): the ranks ran different steps");
  return Status::ok();
}

Result<std::vector<StepReport>> RankSync::gather(const StepReport &mine) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> parts,
                        comm::allGatherParts(comm_, encodeStepReport(mine)));
  std::vector<StepReport> reports;
  for (size_t r = 0; r < parts.size(); ++r) {
    Result<StepReport> report = decodeStepReport(parts[r]);
    if (!report.isOk())
      return report.status().withContext("rank " + std::to_string(r));
    reports.push_back(std::move(report).value());
  }
  return reports;
}

namespace {

/// followEngine for a data-parallel-attention engine of group `group`.
Status followOwnRequests(Engine &engine, RankSync &sync, int group) {
  std::map<RequestId, RequestId> engineIds, loopIds; // loop <-> engine
  StepReport report;
  engine.setOnToken(
      [&](RequestId engineId, int32_t token, const TokenLogprob *logprob) {
        StepReport::Token t;
        t.loop = loopIds[engineId];
        t.token = token;
        t.hasLogprob = logprob != nullptr;
        if (logprob)
          t.logprob = *logprob;
        report.tokens.push_back(std::move(t));
      });
  while (true) {
    KILN_ASSIGN_OR_RETURN(StepEvents events, sync.receive());
    for (size_t i = 0; i < events.submitted.size(); ++i) {
      if (i >= events.placedOn.size() || events.placedOn[i] != group)
        continue;
      RequestId loop = events.loopIds[i];
      Result<RequestId> id = engine.submit(std::move(events.submitted[i]));
      if (!id.isOk()) { // rank 0 validated it, but this pool may differ
        RequestOutput out;
        out.request = loop;
        out.finish = FinishReason::Error;
        out.error = id.status().message();
        report.finished.push_back(std::move(out));
        continue;
      }
      engineIds[loop] = *id;
      loopIds[*id] = loop;
    }
    for (RequestId loop : events.cancelled)
      if (auto it = engineIds.find(loop); it != engineIds.end())
        engine.cancel(it->second);
    if (events.flushPrefixCache)
      engine.flushPrefixCache();
    if (events.step) {
      if (engine.hasWork())
        engine.step();
      KILN_RETURN_IF_ERROR(engine.endTurn());
      for (RequestOutput &out : engine.takeFinished()) {
        RequestId loop = loopIds[out.request];
        engineIds.erase(loop);
        loopIds.erase(out.request);
        out.request = loop;
        report.finished.push_back(std::move(out));
      }
      report.hasWork = engine.hasWork();
      report.metrics = engine.metrics();
      KILN_RETURN_IF_ERROR(sync.gather(report).status());
      report = StepReport();
    }
    if (events.stop)
      return Status::ok();
  }
}

} // namespace

Status kiln::serve::followEngine(Engine &engine, RankSync &sync) {
  const engine::ModelInfo &info = engine.model().info();
  if (info.attentionDataParallel)
    return followOwnRequests(
        engine, sync, engine.model().comm()->rank() / info.tensorParallel);
  while (true) {
    KILN_ASSIGN_OR_RETURN(StepEvents events, sync.receive());
    // What rank 0's engine took or refused, this one takes or refuses (the
    // same checks), so the ids both hand out agree.
    for (RequestParams &p : events.submitted)
      (void)engine.submit(std::move(p));
    for (RequestId id : events.cancelled)
      engine.cancel(id);
    if (events.flushPrefixCache)
      engine.flushPrefixCache();
    if (events.step) {
      engine.step();
      engine.takeFinished(); // rank 0 answers the clients
      KILN_RETURN_IF_ERROR(sync.agree(engine.metrics()));
    }
    if (events.stop)
      return Status::ok();
  }
}
