//===- RankSync.h - One engine schedule on every rank -----------*- C++ -*-===//
//
// Serving under mpirun (docs/parallel.md): rank 0 runs the EngineLoop and
// the HTTP side; every other rank runs followEngine, an Engine of its own
// driven by rank 0's StepEvents. Per loop turn rank 0 broadcasts the events
// (a heartbeat with none when idle, so the others' wait never reaches the
// collective timeout); after a step every rank compares a digest of its
// engine's counters with the others', so a rank whose schedule went its own
// way is an error naming it, not a silent wrong answer or a hang.
//
// Under data-parallel attention (a --dp-attention artifact) rank 0 places
// each request on one rank (StepEvents::placedOn); every rank steps its own
// engine, whose plan calls meet the other ranks' in Model::run, ends the
// turn in Engine::endTurn, and sends rank 0 its StepReport (the tokens and
// finished requests of the requests it runs, and its counters, which rank
// 0 compares between the ranks of each group: they run the same requests).
//
//   rank 0:   EngineLoop loop(std::move(engine), &sync);
//   rank r:   followEngine(*engine, sync)   // returns when rank 0 stops
//
// A failed collective (a peer died or hung past the timeout) is an error
// the caller gets back (EngineLoop::failure, followEngine's status); the
// tool then ends the whole job (Communicator::abortAll) with the message.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SERVE_RANKSYNC_H
#define KILN_RUNTIME_SERVE_RANKSYNC_H

#include "runtime/comm/Communicator.h"
#include "runtime/serve/Engine.h"
#include "runtime/serve/EngineMetrics.h"
#include "runtime/serve/StepEvents.h"
#include "runtime/serve/StepReport.h"

#include <array>

namespace kiln::serve {

/// How often an idle rank 0 tells the others it is still there.
inline constexpr double kHeartbeatSeconds = 1.0;

class RankSync {
public:
  explicit RankSync(comm::Communicator &comm) : comm_(comm) {}

  /// Rank 0: sends `events` to every other rank.
  Status publish(const StepEvents &events);
  /// Ranks other than 0: the next events rank 0 publishes.
  Result<StepEvents> receive();
  /// Every rank, after each step, with its engine's metrics: an error
  /// naming the first rank whose counters differ from rank 0's (every rank
  /// gets the same answer).
  Status agree(const EngineMetrics &metrics);
  /// Data-parallel attention, every rank after each turn: every rank's
  /// report, in rank order (rank 0 answers the clients from them).
  Result<std::vector<StepReport>> gather(const StepReport &mine);

private:
  comm::Communicator &comm_;
};

/// What engines that schedule alike count alike: steps, running, waiting,
/// pages used, finished, generated and computed tokens, preemptions.
std::array<int64_t, 8> scheduleDigest(const EngineMetrics &m);

/// A rank other than 0: applies rank 0's events to `engine`, stepping when
/// rank 0 steps, until rank 0 stops (ok) or a collective fails (its error).
/// Under data-parallel attention it takes only the requests placed on this
/// rank, ends each turn with Engine::endTurn and sends rank 0 its report.
Status followEngine(Engine &engine, RankSync &sync);

} // namespace kiln::serve

#endif // KILN_RUNTIME_SERVE_RANKSYNC_H
