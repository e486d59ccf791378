//===- ExpertExchange.h - Rows to the ranks that hold their experts -------===//
//
// Expert parallelism with data-parallel attention, exchanged all-to-all
// (kiln-compile --moe-exchange all-to-all): dispatch_rows sends each of a
// rank's rows to every rank that holds one of its experts, the MoE runs on
// what arrived, and combine_rows sends each part back to the row's rank,
// which adds them in rank order. Rows and parts travel with
// Communicator::allToAllV (MPI on CPU ranks); the row counts first, with an
// all-gather of every rank's counts per peer.
//
// Received rows of rank r: its own first (all of them with own_rows, else
// those routed to it), then each peer's in rank order, each peer's in token
// order. A row's route record (routes) is a bit per rank, 32 ranks to an
// i32 word; a rank always marks itself for its own rows with own_rows.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_EXPERTEXCHANGE_H
#define KILN_RUNTIME_ENGINE_EXPERTEXCHANGE_H

#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Router.h"
#include "runtime/cpu/ThreadPool.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::engine {

/// Words of a route record for `ranks` ranks.
inline int64_t routeWords(int64_t ranks) { return (ranks + 31) / 32; }

/// The state between a dispatch and its combine: who sent this rank how
/// many rows, and how many this rank sent each peer.
class ExpertExchange {
public:
  struct Dispatch {
    const float *x = nullptr; // [tokens, width]: this rank's rows
    int64_t tokens = 0, width = 0;
    cpu::WeightView router;      // [E, width]
    const float *bias = nullptr; // [E]
    cpu::MoeParams routing;      // numExperts, topK, nGroup, topkGroup
    int64_t expertsPerRank = 0;
    bool ownRows = false;
  };

  /// Routes d.x, writes `routes` [tokens, routeWords(ranks)] and sends the
  /// rows; `out` (room for `capacity` rows) receives this rank's rows and
  /// `received` their count. `comm` may be null (one rank: every row is
  /// this rank's). Every rank calls it in the same step, idle ranks with
  /// no tokens.
  Status dispatch(comm::Communicator *comm, cpu::ThreadPool &pool,
                  cpu::Arena &arena, const Dispatch &d, int32_t *routes,
                  float *out, int64_t capacity, int64_t &received);

  /// parts [received, width] (one per row the last dispatch brought)
  /// go back; out [tokens, width] = for each of this rank's rows the sum of
  /// its parts over the ranks in `routes`, in rank order.
  Status combine(comm::Communicator *comm, const float *parts,
                 const int32_t *routes, int64_t tokens, int64_t width,
                 cpu::Arena &arena, float *out) const;

  /// Rows this rank received from each rank (itself included) in the last
  /// dispatch, and sent to each.
  const std::vector<int64_t> &receivedFrom() const { return from_; }
  const std::vector<int64_t> &sentTo() const { return to_; }
  /// Rows the last dispatch sent to other ranks (its combine receives as
  /// many back) and received from them (its combine sends as many back).
  int64_t rowsToPeers(int rank) const;
  int64_t rowsFromPeers(int rank) const;

private:
  /// Element offsets of each rank's block in the received rows: this
  /// rank's first, then the peers in rank order.
  comm::Counts receivedDispls(int rank, size_t width) const;

  std::vector<int64_t> from_, to_;
  int64_t tokens_ = -1; // this rank's rows in the last dispatch
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_EXPERTEXCHANGE_H
