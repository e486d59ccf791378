//===- Communicator.h - Collectives between ranks ---------------*- C++ -*-===//
//
// The one interface every multi-rank piece of the runtime talks to: rank,
// size and the collectives tensor and expert parallelism need (all-reduce
// for TP, all-to-all-v for MoE token dispatch and combine, all-gather,
// broadcast, barrier). Backends: a single process (size 1), MPI (CPU ranks)
// and RCCL (AMD GPUs, libraries loaded at run time); makeCommunicator picks
// one (CommFactory.h).
//
// Reductions happen in a fixed order so a result never depends on timing,
// message sizes or the algorithm an MPI library picks: allReduceSum gathers
// every rank's contribution and each rank sums them in rank order
// 0, 1, 2, ... (docs/comm.md states the cost). Failures are Status values:
// a peer that died or hung makes a collective fail after the timeout instead
// of waiting forever.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_COMMUNICATOR_H
#define KILN_RUNTIME_COMM_COMMUNICATOR_H

#include "support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::comm {

/// Element types the collectives move and sum.
enum class DataType : uint8_t { F32, I32, I64 };

size_t dataTypeSize(DataType type);
const char *dataTypeName(DataType type);

template <typename T> constexpr DataType dataTypeOf() {
  using U = std::remove_const_t<T>;
  static_assert(std::is_same_v<U, float> || std::is_same_v<U, int32_t> ||
                    std::is_same_v<U, int64_t>,
                "collectives move float, int32_t or int64_t");
  if constexpr (std::is_same_v<U, float>)
    return DataType::F32;
  else if constexpr (std::is_same_v<U, int32_t>)
    return DataType::I32;
  else
    return DataType::I64;
}

/// A buffer and its length in elements. Host memory for the single-process
/// and MPI backends, device memory for RCCL (never dereferenced on the host).
/// The collectives take a Span or anything with data() and size() (a
/// std::vector, a std::array): `comm.allReduceSum(partial, sum)`,
/// `comm.broadcast(Span(ptr, n), 0)`.
template <typename T> class Span {
public:
  Span() = default;
  Span(T *data, size_t size) : data_(data), size_(size) {}
  T *data() const { return data_; }
  size_t size() const { return size_; }

private:
  T *data_ = nullptr;
  size_t size_ = 0;
};

/// The element type of a buffer argument, const kept.
template <typename C>
using ElementOf = std::remove_pointer_t<decltype(std::declval<C &>().data())>;

template <typename C> Span<ElementOf<C>> spanOf(C &c) {
  return Span<ElementOf<C>>(c.data(), c.size());
}

/// The DataType of a (send, recv) pair: the same element type, recv
/// writable.
template <typename S, typename R> constexpr DataType pairType() {
  using Send = std::remove_const_t<ElementOf<S>>;
  using Recv = ElementOf<R>;
  static_assert(!std::is_const_v<Recv>, "the receive buffer must be writable");
  static_assert(std::is_same_v<Send, Recv>,
                "send and receive buffers must hold the same element type");
  return dataTypeOf<Recv>();
}

/// Per-rank element counts or offsets, one entry per rank.
using Counts = std::vector<size_t>;

/// The type-erased form of a typed buffer, as the backends see it.
struct Bytes {
  const void *data = nullptr;
  size_t count = 0; // elements
};

/// How a communicator is made (makeCommunicator and the backends' own
/// factories).
struct CommOptions {
  /// How long one collective waits for its peers before it fails. Zero:
  /// $KILN_COMM_TIMEOUT_S when set, else kDefaultTimeoutSeconds.
  double timeoutSeconds = 0;
  /// RCCL: the hipStream_t collectives are enqueued on (null: the default
  /// stream), and the libraries tried in order (empty: defaultRcclLibraries).
  void *stream = nullptr;
  std::vector<std::string> rcclLibraries;
};

inline constexpr double kDefaultTimeoutSeconds = 60;

/// options.timeoutSeconds, else $KILN_COMM_TIMEOUT_S, else the default; an
/// unparsable or non-positive variable is an error naming it.
Result<double> resolveTimeout(const CommOptions &options);

class Communicator {
public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "single-process", "mpi" or "rccl".
  virtual const char *backendName() const = 0;

  /// recv[i] = send_0[i] + send_1[i] + ... in rank order, on every rank, for
  /// every i < send.size(). `send` and `recv` have equal sizes and may be the
  /// same buffer. Integers wrap on overflow. With `group` G (a divisor of
  /// size()), the ranks form groups of G consecutive ranks and each sums
  /// over its own group only; 0 (or size()) is every rank.
  template <typename S, typename R>
  Status allReduceSum(S &&send, R &&recv, int group = 0) {
    constexpr DataType type = pairType<S, R>();
    auto s = spanOf(send);
    auto r = spanOf(recv);
    KILN_RETURN_IF_ERROR(checkSameSize("allReduceSum", s.size(), r.size()));
    KILN_RETURN_IF_ERROR(checkGroup("allReduceSum", group));
    return doAllReduceSum(s.data(), r.data(), s.size(), type,
                          group == 0 ? size() : group);
  }

  /// recv = send_0 ++ send_1 ++ ...: every rank sends the same count and
  /// recv holds size() * send.size() elements.
  template <typename S, typename R> Status allGather(S &&send, R &&recv) {
    constexpr DataType type = pairType<S, R>();
    auto s = spanOf(send);
    auto r = spanOf(recv);
    KILN_RETURN_IF_ERROR(checkAllGather(bytes(s), bytes(r), type));
    return doAllGather(s.data(), r.data(), s.size(), type);
  }

  /// recv = send_0 ++ send_1 ++ ... where rank r sends recvCounts[r]
  /// elements (zero allowed); recv holds their sum.
  template <typename S, typename R>
  Status allGatherV(S &&send, R &&recv, const Counts &recvCounts) {
    constexpr DataType type = pairType<S, R>();
    auto s = spanOf(send);
    auto r = spanOf(recv);
    KILN_ASSIGN_OR_RETURN(
        Counts displs, checkAllGatherV(bytes(s), bytes(r), recvCounts, type));
    return doAllGatherV(bytes(s), r.data(), recvCounts, displs, type);
  }

  /// Every rank sends send[sendDispls[p], + sendCounts[p]) to peer p and
  /// receives peer p's piece into recv[recvDispls[p], + recvCounts[p]).
  /// Counts may be zero (a rank with no tokens for a peer still joins);
  /// recvCounts[p] must equal what p sends to this rank.
  template <typename S, typename R>
  Status allToAllV(S &&send, const Counts &sendCounts, const Counts &sendDispls,
                   R &&recv, const Counts &recvCounts,
                   const Counts &recvDispls) {
    constexpr DataType type = pairType<S, R>();
    auto s = spanOf(send);
    auto r = spanOf(recv);
    KILN_RETURN_IF_ERROR(checkAllToAllV(bytes(s), sendCounts, sendDispls,
                                        bytes(r), recvCounts, recvDispls,
                                        type));
    return doAllToAllV(s.data(), sendCounts, sendDispls, r.data(), recvCounts,
                       recvDispls, type);
  }

  /// Copies root's buffer into every rank's buffer (same size everywhere).
  template <typename B> Status broadcast(B &&buffer, int root) {
    static_assert(!std::is_const_v<ElementOf<B>>,
                  "the buffer must be writable");
    auto b = spanOf(buffer);
    KILN_RETURN_IF_ERROR(checkRoot("broadcast", root));
    return doBroadcast(b.data(), b.size(), root, dataTypeOf<ElementOf<B>>());
  }

  /// Returns once every rank has entered the barrier.
  virtual Status barrier() = 0;

  /// Ends every rank of the job with a non-zero status after printing
  /// `message` (prefixed with the rank) to stderr: what a tool calls on an
  /// error it cannot recover from, e.g. a collective that timed out (the
  /// peers still wait in it). Never returns.
  [[noreturn]] virtual void abortAll(const std::string &message) = 0;

protected:
  Communicator(int rank, int size) : rank_(rank), size_(size) {}

  /// The fixed-order sum over this rank's group of `group` ranks (size()
  /// for all). The default (host backends): allGather into a scratch buffer
  /// of size() * count elements, then sumInRankOrder over the group's part.
  virtual Status doAllReduceSum(const void *send, void *recv, size_t count,
                                DataType type, int group);
  virtual Status doAllGather(const void *send, void *recv, size_t count,
                             DataType type) = 0;
  virtual Status doAllGatherV(Bytes send, void *recv, const Counts &recvCounts,
                              const Counts &recvDispls, DataType type) = 0;
  virtual Status doAllToAllV(const void *send, const Counts &sendCounts,
                             const Counts &sendDispls, void *recv,
                             const Counts &recvCounts, const Counts &recvDispls,
                             DataType type) = 0;
  virtual Status doBroadcast(void *buffer, size_t count, int root,
                             DataType type) = 0;

  /// "<backend> <collective> on rank R of N: " for error messages.
  std::string where(const char *collective) const;

private:
  template <typename T> static Bytes bytes(Span<T> s) {
    return {s.data(), s.size()};
  }
  Status checkSameSize(const char *collective, size_t send, size_t recv) const;
  Status checkRoot(const char *collective, int root) const;
  Status checkGroup(const char *collective, int group) const;
  Status checkDisjoint(const char *collective, Bytes send, Bytes recv,
                       DataType type) const;
  Status checkAllGather(Bytes send, Bytes recv, DataType type) const;
  Result<Counts> checkAllGatherV(Bytes send, Bytes recv,
                                 const Counts &recvCounts, DataType type) const;
  Status checkAllToAllV(Bytes send, const Counts &sendCounts,
                        const Counts &sendDispls, Bytes recv,
                        const Counts &recvCounts, const Counts &recvDispls,
                        DataType type) const;

  int rank_;
  int size_;
  std::vector<unsigned char> scratch_; // doAllReduceSum's gathered inputs
};

/// out[i] = gathered[0][i] + gathered[1][i] + ... + gathered[ranks-1][i],
/// added left to right, where gathered[r] starts at element r * count.
/// The one definition of the fixed-order sum (integers wrap).
void sumInRankOrder(const void *gathered, void *out, size_t count, int ranks,
                    DataType type);

/// `root`'s `words`, whatever their length, on every rank: the length is
/// broadcast first, then the words. A length below 0 or over `limit` is
/// DataLoss on the receivers, naming `what` ("step events of -5 words from
/// rank 0").
template <typename T>
Status broadcastVector(Communicator &comm, std::vector<T> &words, int root,
                       const char *what, int64_t limit = int64_t(1) << 32) {
  std::vector<int64_t> size = {int64_t(words.size())};
  KILN_RETURN_IF_ERROR(comm.broadcast(size, root));
  if (size[0] < 0 || size[0] > limit)
    return makeError(StatusCode::DataLoss, what, " of ", size[0],
                     " words from rank ", root);
  words.resize(size_t(size[0]));
  return comm.broadcast(words, root);
}

/// Every rank's `mine`, whatever its length (zero included), in rank order,
/// on every rank: an all-gather of the lengths, then allGatherV.
template <typename T>
Result<std::vector<std::vector<T>>> allGatherParts(Communicator &comm,
                                                   const std::vector<T> &mine) {
  std::vector<int64_t> sizes(size_t(comm.size()));
  std::vector<int64_t> size = {int64_t(mine.size())};
  KILN_RETURN_IF_ERROR(comm.allGather(size, sizes));
  Counts counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts)
    total += c;
  std::vector<T> all(total);
  KILN_RETURN_IF_ERROR(comm.allGatherV(mine, all, counts));
  std::vector<std::vector<T>> parts;
  size_t at = 0;
  for (size_t c : counts) {
    parts.emplace_back(all.begin() + at, all.begin() + at + c);
    at += c;
  }
  return parts;
}

} // namespace kiln::comm

#endif // KILN_RUNTIME_COMM_COMMUNICATOR_H
