//===- RowExchange.cpp ----------------------------------------------------===//

#include "runtime/engine/RowExchange.h"

#include <algorithm>

using namespace kiln;
using namespace kiln::engine;

int64_t kiln::engine::collectiveGroup(const Step &s) {
  switch (s.kernel) {
  case abi::Kernel::AllReduce:
    return s.get<abi::AllReduceParams>().group;
  case abi::Kernel::AllGatherRows:
    return s.get<abi::AllGatherRowsParams>().group;
  case abi::Kernel::ReduceScatterRows:
    return s.get<abi::ReduceScatterRowsParams>().group;
  default:
    return 0;
  }
}

Result<RowExchange> RowExchange::create(const std::vector<int64_t> &rankTokens,
                                        int64_t size, int64_t declared) {
  if (declared != size || size < 1 || rankTokens.size() % size_t(size) != 0)
    return makeError(StatusCode::FailedPrecondition, "the plan sums or ",
                     "exchanges rows in groups of ", declared, " ranks, but ",
                     "the artifact's data-parallel groups have ", size, " of ",
                     rankTokens.size());
  RowExchange x;
  x.size_ = size;
  x.rankTokens_ = rankTokens;
  size_t at = 0;
  for (size_t r = 0; r < rankTokens.size(); r += size_t(size)) {
    for (size_t q = r; q < r + size_t(size); ++q)
      if (rankTokens[q] != rankTokens[r])
        return makeError(StatusCode::FailedPrecondition, "ranks ", r, " and ",
                         q, " of one data-parallel group run ", rankTokens[r],
                         " and ", rankTokens[q], " tokens");
    x.tokens_.push_back(size_t(rankTokens[r]));
    x.offsets_.push_back(at);
    at += size_t(rankTokens[r]);
  }
  return x;
}

int64_t RowExchange::gatheredRows(const std::vector<int64_t> &rankTokens,
                                  int64_t size) {
  int64_t sum = 0;
  for (size_t r = 0; r < rankTokens.size();
       r += size_t(std::max<int64_t>(size, 1)))
    sum += rankTokens[r];
  return sum;
}

size_t RowExchange::gatherSend(int rank, size_t width) const {
  return rank % size_ == 0 ? tokens_[of(rank)] * width : 0;
}

comm::Counts RowExchange::gatherCounts(size_t width) const {
  comm::Counts counts(rankTokens_.size(), 0);
  for (size_t r = 0; r < counts.size(); r += size_t(size_))
    counts[r] = tokens_[of(int(r))] * width;
  return counts;
}

comm::Counts RowExchange::partCounts(size_t width, size_t &total) const {
  comm::Counts counts(rankTokens_.size());
  total = 0;
  for (size_t r = 0; r < counts.size(); ++r)
    total += counts[r] = size_t(rankTokens_[r]) * width;
  return counts;
}

size_t RowExchange::groupPartsOffset(int rank, size_t width) const {
  return offsets_[of(rank)] * size_t(size_) * width;
}

void RowExchange::scatterCounts(size_t width, size_t mine,
                                comm::Counts &sendCounts,
                                comm::Counts &sendDispls,
                                comm::Counts &recvCounts,
                                comm::Counts &recvDispls) const {
  const size_t n = rankTokens_.size();
  sendCounts.assign(n, 0);
  sendDispls.assign(n, 0);
  recvCounts.assign(n, 0);
  recvDispls.assign(n, 0);
  for (size_t p = 0; p < n; ++p) {
    sendCounts[p] = tokens_[of(int(p))] * width;
    sendDispls[p] = offsets_[of(int(p))] * width;
    recvCounts[p] = mine;
    recvDispls[p] = p * mine;
  }
}
