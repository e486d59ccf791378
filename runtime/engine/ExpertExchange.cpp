//===- ExpertExchange.cpp - Rows to the ranks that hold their experts -----===//

#include "runtime/engine/ExpertExchange.h"

#include <algorithm>
#include <cstring>

namespace kiln::engine {

namespace {

bool hasRank(const int32_t *record, int64_t rank) {
  return (uint32_t(record[rank / 32]) >> (rank % 32)) & 1u;
}

void markRank(int32_t *record, int64_t rank) {
  record[rank / 32] = int32_t(uint32_t(record[rank / 32]) | 1u << (rank % 32));
}

comm::Counts scaled(const std::vector<int64_t> &rows, size_t width) {
  comm::Counts c(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    c[i] = size_t(rows[i]) * width;
  return c;
}

comm::Counts prefix(const comm::Counts &counts) {
  comm::Counts d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i)
    d[i] = d[i - 1] + counts[i - 1];
  return d;
}

/// Rows to or from every rank but `rank`.
int64_t othersSum(const std::vector<int64_t> &rows, int rank) {
  int64_t n = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    n += int(r) == rank ? 0 : rows[r];
  return n;
}

} // namespace

int64_t ExpertExchange::rowsToPeers(int rank) const {
  return othersSum(to_, rank);
}

int64_t ExpertExchange::rowsFromPeers(int rank) const {
  return othersSum(from_, rank);
}

comm::Counts ExpertExchange::receivedDispls(int rank, size_t width) const {
  comm::Counts d(from_.size(), 0);
  size_t at = size_t(from_[size_t(rank)]) * width;
  for (size_t s = 0; s < from_.size(); ++s) {
    if (int(s) == rank)
      continue;
    d[s] = at;
    at += size_t(from_[s]) * width;
  }
  return d;
}

Status ExpertExchange::dispatch(comm::Communicator *comm, cpu::ThreadPool &pool,
                                cpu::Arena &arena, const Dispatch &d,
                                int32_t *routes, float *out, int64_t capacity,
                                int64_t &received) {
  const int ranks = comm ? comm->size() : 1;
  const int rank = comm ? comm->rank() : 0;
  const int64_t words = routeWords(ranks);
  const size_t width = size_t(d.width), rowBytes = width * sizeof(float);
  std::memset(routes, 0, size_t(d.tokens * words) * sizeof(int32_t));
  tokens_ = d.tokens;
  if (ranks == 1) {
    if (d.tokens > capacity)
      return makeError(StatusCode::Internal, "dispatch_rows: ", d.tokens,
                       " rows, room for ", capacity);
    std::memcpy(out, d.x, size_t(d.tokens) * rowBytes);
    for (int64_t t = 0; t < d.tokens; ++t)
      markRank(routes + t * words, 0);
    from_ = to_ = {d.tokens};
    received = d.tokens;
    return Status::ok();
  }
  if (d.expertsPerRank * ranks != d.routing.numExperts)
    return makeError(
        StatusCode::FailedPrecondition, "dispatch_rows: ", d.routing.numExperts,
        " experts at ", d.expertsPerRank, " a rank need ",
        d.routing.numExperts / d.expertsPerRank, " ranks, the job has ", ranks);

  cpu::Arena::Scope scope(arena);
  const int64_t topK = d.routing.topK;
  auto *ids = arena.alloc<int32_t>(std::max<int64_t>(1, d.tokens * topK));
  auto *weights = arena.alloc<float>(std::max<int64_t>(1, d.tokens * topK));
  if (d.tokens > 0)
    cpu::route(pool, d.x, d.tokens, d.router, d.bias, d.routing, arena, ids,
               weights);
  to_.assign(size_t(ranks), 0);
  for (int64_t t = 0; t < d.tokens; ++t) {
    int32_t *record = routes + t * words;
    if (d.ownRows)
      markRank(record, rank);
    for (int64_t j = 0; j < topK; ++j)
      markRank(record, ids[t * topK + j] / d.expertsPerRank);
    for (int r = 0; r < ranks; ++r)
      to_[size_t(r)] += hasRank(record, r);
  }

  // Every rank's row counts per peer, so each knows what arrives.
  std::vector<int64_t> all(size_t(ranks) * size_t(ranks));
  KILN_RETURN_IF_ERROR(comm->allGather(to_, all));
  from_.assign(size_t(ranks), 0);
  received = 0;
  for (int s = 0; s < ranks; ++s) {
    from_[size_t(s)] = all[size_t(s) * size_t(ranks) + size_t(rank)];
    received += from_[size_t(s)];
  }
  if (received > capacity)
    return makeError(StatusCode::DataLoss, "dispatch_rows: ", received,
                     " rows arrive, more than the ", capacity,
                     " rows of every rank (a peer's counts are wrong)");

  // Rows grouped by destination in rank order, each group in token order.
  comm::Counts sendCounts = scaled(to_, width);
  comm::Counts sendDispls = prefix(sendCounts);
  size_t sendTotal = sendDispls.back() + sendCounts.back();
  auto *send = arena.alloc<float>(int64_t(std::max<size_t>(1, sendTotal)));
  for (int r = 0; r < ranks; ++r) {
    float *at = send + sendDispls[size_t(r)];
    for (int64_t t = 0; t < d.tokens; ++t)
      if (hasRank(routes + t * words, r)) {
        std::memcpy(at, d.x + size_t(t) * width, rowBytes);
        at += width;
      }
  }
  return comm->allToAllV(comm::Span<const float>(send, sendTotal), sendCounts,
                         sendDispls,
                         comm::Span<float>(out, size_t(received) * width),
                         scaled(from_, width), receivedDispls(rank, width));
}

Status ExpertExchange::combine(comm::Communicator *comm, const float *parts,
                               const int32_t *routes, int64_t tokens,
                               int64_t width, cpu::Arena &arena,
                               float *out) const {
  const int ranks = comm ? comm->size() : 1;
  const int rank = comm ? comm->rank() : 0;
  if (tokens != tokens_ || from_.size() != size_t(ranks))
    return makeError(StatusCode::FailedPrecondition, "combine_rows: ", tokens,
                     " rows, but the last dispatch_rows had ", tokens_, " on ",
                     from_.size(), " ranks");
  const size_t w = size_t(width), rowBytes = w * sizeof(float);
  if (ranks == 1) {
    std::memcpy(out, parts, size_t(tokens) * rowBytes);
    return Status::ok();
  }
  cpu::Arena::Scope scope(arena);
  int64_t received = 0;
  for (int64_t n : from_)
    received += n;
  comm::Counts recvCounts = scaled(to_, w);
  comm::Counts recvDispls = prefix(recvCounts);
  size_t total = recvDispls.back() + recvCounts.back();
  auto *back = arena.alloc<float>(int64_t(std::max<size_t>(1, total)));
  KILN_RETURN_IF_ERROR(
      comm->allToAllV(comm::Span<const float>(parts, size_t(received) * w),
                      scaled(from_, w), receivedDispls(rank, w),
                      comm::Span<float>(back, total), recvCounts, recvDispls));
  // Each row's parts added in rank order: the same sum whatever arrived
  // first.
  const int64_t words = routeWords(ranks);
  comm::Counts cursor = recvDispls;
  for (int64_t t = 0; t < tokens; ++t) {
    float *y = out + size_t(t) * w;
    bool first = true;
    for (int r = 0; r < ranks; ++r) {
      if (!hasRank(routes + t * words, r))
        continue;
      const float *p = back + cursor[size_t(r)];
      cursor[size_t(r)] += w;
      if (first)
        std::memcpy(y, p, rowBytes);
      else
        for (size_t i = 0; i < w; ++i)
          y[i] += p[i];
      first = false;
    }
    if (first)
      std::memset(y, 0, rowBytes);
  }
  return Status::ok();
}

} // namespace kiln::engine
