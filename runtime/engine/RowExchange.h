//===- RowExchange.h - Who sends which rows under data-parallel attention -===//
//
// Under data-parallel attention (kiln-compile --ep N --dp-attention) every
// rank runs its own tokens, ranks of one group (tensor parallelism inside
// it) the same ones. The MoE runs over the Gathered rows: every group's
// rows, group by group. The three collectives of such a plan exchange rows
// as below, on the CPU ranks (PlanRunner, over MPI) and on the GPU ranks
// (HipPlanDevice, over RCCL) alike; counts and offsets are in floats for
// rows of `width`:
//
//   all_gather_rows      every rank receives every group's rows; the first
//                        rank of each group sends them (allGatherV).
//   all_reduce           inside a group: every rank's part is gathered
//                        (allGatherV), then this group's parts, consecutive,
//                        are added in rank order.
//   reduce_scatter_rows  each rank sends every peer that peer's group's rows
//                        of its partial result and receives its own group's
//                        rows from every peer (allToAllV), added in rank
//                        order.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ENGINE_ROWEXCHANGE_H
#define KILN_RUNTIME_ENGINE_ROWEXCHANGE_H

#include "runtime/comm/Communicator.h"
#include "runtime/engine/ValidatedPlan.h"
#include "support/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::engine {

/// The ranks per group an all_reduce, all_gather_rows or
/// reduce_scatter_rows step was compiled for.
int64_t collectiveGroup(const Step &step);

/// The data-parallel groups of one plan call.
class RowExchange {
public:
  /// `rankTokens`: every rank's tokens in this call, in rank order (all
  /// ranks hold the same, Model::meet); `size`: ranks per group (the
  /// artifact's tensor parallelism); `declared`: the group the dispatch was
  /// compiled for. Every rank fails alike here, before any collective.
  static Result<RowExchange> create(const std::vector<int64_t> &rankTokens,
                                    int64_t size, int64_t declared);

  /// The Gathered rows: every group's tokens once.
  static int64_t gatheredRows(const std::vector<int64_t> &rankTokens,
                              int64_t size);

  /// all_gather_rows: the floats each rank sends (its group's rows when it
  /// is the group's first rank, else none) and `counts`, per rank.
  size_t gatherSend(int rank, size_t width) const;
  comm::Counts gatherCounts(size_t width) const;

  /// all_reduce inside a group: every rank's part (`counts`, their sum in
  /// `total`) and where this rank's group's parts start.
  comm::Counts partCounts(size_t width, size_t &total) const;
  size_t groupPartsOffset(int rank, size_t width) const;
  int64_t groupSize() const { return size_; }

  /// reduce_scatter_rows: what this rank, which runs `mine` floats, sends
  /// each peer (its group's rows of the gathered partial result) and
  /// receives (`mine` from each, peer after peer).
  void scatterCounts(size_t width, size_t mine, comm::Counts &sendCounts,
                     comm::Counts &sendDispls, comm::Counts &recvCounts,
                     comm::Counts &recvDispls) const;
  int ranks() const { return int(rankTokens_.size()); }

private:
  size_t of(int rank) const { return size_t(rank / size_); }

  int64_t size_ = 1;                     // ranks per group
  std::vector<int64_t> rankTokens_;      // per rank
  std::vector<size_t> tokens_, offsets_; // per group: rows, first row
};

} // namespace kiln::engine

#endif // KILN_RUNTIME_ENGINE_ROWEXCHANGE_H
