//===- Communicator.cpp - Argument checks and the fixed-order sum ---------===//

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

using namespace kiln;
using namespace kiln::comm;

size_t kiln::comm::dataTypeSize(DataType type) {
  switch (type) {
  case DataType::F32:
  case DataType::I32:
    return 4;
  case DataType::I64:
    return 8;
  }
  return 0;
}

const char *kiln::comm::dataTypeName(DataType type) {
  switch (type) {
  case DataType::F32:
    return "f32";
  case DataType::I32:
    return "i32";
  case DataType::I64:
    return "i64";
  }
  return "unknown";
}

Result<double> kiln::comm::resolveTimeout(const CommOptions &options) {
  if (options.timeoutSeconds > 0)
    return options.timeoutSeconds;
  const char *env = std::getenv("KILN_COMM_TIMEOUT_S");
  if (!env || !*env)
    return kDefaultTimeoutSeconds;
  char *end = nullptr;
  errno = 0;
  double seconds = std::strtod(env, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(seconds) || seconds <= 0)
    return makeError(StatusCode::InvalidArgument, "KILN_COMM_TIMEOUT_S='", env,
                     "' is not a positive number of seconds");
  return seconds;
}

namespace {

template <typename T>
void sumTyped(const T *gathered, T *out, size_t count, int ranks) {
  if (count == 0)
    return; // and the buffers may be null
  std::memmove(out, gathered, count * sizeof(T));
  for (int r = 1; r < ranks; ++r) {
    const T *part = gathered + size_t(r) * count;
    for (size_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>) {
        // Wrapping, not undefined, on overflow.
        using U = std::make_unsigned_t<T>;
        out[i] = T(U(out[i]) + U(part[i]));
      } else {
        out[i] += part[i];
      }
    }
  }
}

/// Whether two buffers of `type` share a byte.
bool overlaps(Bytes a, Bytes b, DataType type) {
  size_t element = dataTypeSize(type);
  auto x = reinterpret_cast<uintptr_t>(a.data);
  auto y = reinterpret_cast<uintptr_t>(b.data);
  return a.count && b.count && x < y + b.count * element &&
         y < x + a.count * element;
}

/// Whether [displ, displ + count) fits in `size` elements.
bool fits(size_t displ, size_t count, size_t size) {
  return displ <= size && count <= size - displ;
}

} // namespace

void kiln::comm::sumInRankOrder(const void *gathered, void *out, size_t count,
                                int ranks, DataType type) {
  switch (type) {
  case DataType::F32:
    return sumTyped(static_cast<const float *>(gathered),
                    static_cast<float *>(out), count, ranks);
  case DataType::I32:
    return sumTyped(static_cast<const int32_t *>(gathered),
                    static_cast<int32_t *>(out), count, ranks);
  case DataType::I64:
    return sumTyped(static_cast<const int64_t *>(gathered),
                    static_cast<int64_t *>(out), count, ranks);
  }
}

std::string Communicator::where(const char *collective) const {
  return std::string(backendName()) + " " + collective + " on rank " +
         std::to_string(rank_) + " of " + std::to_string(size_) + ": ";
}

Status Communicator::doAllReduceSum(const void *send, void *recv, size_t count,
                                    DataType type, int group) {
  // Every rank receives all contributions and adds its group's in rank
  // order: the same additions in the same order on every rank of a group,
  // whatever the timing.
  size_t bytes = count * dataTypeSize(type);
  scratch_.resize(bytes * size_t(size_));
  KILN_RETURN_IF_ERROR(
      doAllGather(send, scratch_.data(), count, type)
          .withContext(where("allReduceSum") + "gathering the contributions"));
  size_t first = size_t(rank_ / group * group);
  sumInRankOrder(scratch_.data() + first * bytes, recv, count, group, type);
  return Status::ok();
}

Status Communicator::checkSameSize(const char *collective, size_t send,
                                   size_t recv) const {
  if (send != recv)
    return makeError(StatusCode::InvalidArgument, where(collective),
                     "the send buffer has ", send,
                     " elements and the receive buffer ", recv,
                     ", expected equal sizes");
  return Status::ok();
}

Status Communicator::checkRoot(const char *collective, int root) const {
  if (root < 0 || root >= size_)
    return makeError(StatusCode::InvalidArgument, where(collective), "root ",
                     root, " is not a rank, expected 0 to ", size_ - 1);
  return Status::ok();
}

Status Communicator::checkGroup(const char *collective, int group) const {
  if (group < 0 || group > size_ || (group > 0 && size_ % group != 0))
    return makeError(StatusCode::InvalidArgument, where(collective),
                     "a group of ", group, " ranks does not divide the ", size_,
                     " ranks evenly");
  return Status::ok();
}

Status Communicator::checkDisjoint(const char *collective, Bytes send,
                                   Bytes recv, DataType type) const {
  if (overlaps(send, recv, type))
    return makeError(StatusCode::InvalidArgument, where(collective),
                     "the send and receive buffers overlap");
  return Status::ok();
}

Status Communicator::checkAllGather(Bytes send, Bytes recv,
                                    DataType type) const {
  size_t expected = send.count * size_t(size_);
  if (recv.count != expected)
    return makeError(StatusCode::InvalidArgument, where("allGather"),
                     "the receive buffer has ", recv.count,
                     " elements, expected ", size_, " x ", send.count, " = ",
                     expected);
  KILN_RETURN_IF_ERROR(checkDisjoint("allGather", send, recv, type));
  return Status::ok();
}

Result<Counts> Communicator::checkAllGatherV(Bytes send, Bytes recv,
                                             const Counts &recvCounts,
                                             DataType type) const {
  if (recvCounts.size() != size_t(size_))
    return makeError(StatusCode::InvalidArgument, where("allGatherV"),
                     recvCounts.size(),
                     " receive counts, expected one per rank (", size_, ")");
  if (recvCounts[rank_] != send.count)
    return makeError(StatusCode::InvalidArgument, where("allGatherV"),
                     "this rank sends ", send.count,
                     " elements but its receive count is ", recvCounts[rank_]);
  Counts displs(recvCounts.size());
  size_t total = 0;
  for (size_t r = 0; r < recvCounts.size(); ++r) {
    displs[r] = total;
    total += recvCounts[r];
  }
  if (recv.count != total)
    return makeError(StatusCode::InvalidArgument, where("allGatherV"),
                     "the receive buffer has ", recv.count,
                     " elements, expected the sum of the counts, ", total);
  KILN_RETURN_IF_ERROR(checkDisjoint("allGatherV", send, recv, type));
  return displs;
}

Status Communicator::checkAllToAllV(Bytes send, const Counts &sendCounts,
                                    const Counts &sendDispls, Bytes recv,
                                    const Counts &recvCounts,
                                    const Counts &recvDispls,
                                    DataType type) const {
  const std::pair<const char *, const Counts *> lists[] = {
      {"sendCounts", &sendCounts},
      {"sendDispls", &sendDispls},
      {"recvCounts", &recvCounts},
      {"recvDispls", &recvDispls}};
  for (const auto &[name, list] : lists)
    if (list->size() != size_t(size_))
      return makeError(StatusCode::InvalidArgument, where("allToAllV"), name,
                       " has ", list->size(),
                       " entries, expected one per rank (", size_, ")");
  std::vector<std::pair<size_t, size_t>> received; // (displ, count)
  for (int p = 0; p < size_; ++p) {
    if (!fits(sendDispls[p], sendCounts[p], send.count))
      return makeError(StatusCode::OutOfRange, where("allToAllV"),
                       "the piece for rank ", p, " [", sendDispls[p], ", +",
                       sendCounts[p], ") is outside the send buffer of ",
                       send.count, " elements");
    if (!fits(recvDispls[p], recvCounts[p], recv.count))
      return makeError(StatusCode::OutOfRange, where("allToAllV"),
                       "the piece from rank ", p, " [", recvDispls[p], ", +",
                       recvCounts[p], ") is outside the receive buffer of ",
                       recv.count, " elements");
    if (recvCounts[p])
      received.emplace_back(recvDispls[p], recvCounts[p]);
  }
  std::sort(received.begin(), received.end());
  for (size_t i = 1; i < received.size(); ++i)
    if (received[i].first < received[i - 1].first + received[i - 1].second)
      return makeError(StatusCode::InvalidArgument, where("allToAllV"),
                       "received pieces overlap at element ",
                       received[i].first);
  KILN_RETURN_IF_ERROR(checkDisjoint("allToAllV", send, recv, type));
  return Status::ok();
}
