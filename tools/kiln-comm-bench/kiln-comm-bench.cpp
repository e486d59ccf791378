//===- kiln-comm-bench.cpp - Times the collectives of a communicator -----===//
//
//   mpirun -np N kiln-comm-bench [--ops allreduce,allgather,alltoallv]
//                                [--min 4K] [--max 16M] [--iters N]
//                                [--comm auto|mpi|single-process]
//
// For each operation and each size from --min to --max (x4 steps), the mean
// time of one call over --iters calls (after two warm-up calls), the slowest
// rank's mean, and bytes / time. "bytes" is the size of the result on one
// rank, as nccl-tests counts it: the all-reduced vector, the whole gathered
// vector (each rank sends bytes / N), and what one rank sends (and receives)
// in the all-to-all, in N equal pieces (the last takes the remainder). Rank 0
// prints the table. A failed collective ends the job (abortAll).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "tools/common/ArgParse.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::comm;
using tools::UsageError;

namespace {

struct Options {
  std::vector<std::string> ops = {"allreduce", "allgather", "alltoallv"};
  int64_t minBytes = 4 << 10;
  int64_t maxBytes = 16 << 20;
  int64_t iters = 0; // 0: chosen per size
  CommKind kind = CommKind::Auto;
};

const char *kUsage =
    "usage: kiln-comm-bench [--ops allreduce,allgather,alltoallv] [--min 4K] "
    "[--max 16M] [--iters N] [--comm auto|mpi|single-process]\n";

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc)
      throw UsageError{arg + " needs a value"};
    std::string value = argv[++i];
    if (arg == "--ops") {
      o.ops.clear();
      std::stringstream list(value);
      for (std::string op; std::getline(list, op, ',');) {
        if (op != "allreduce" && op != "allgather" && op != "alltoallv")
          throw UsageError{"--ops: '" + op +
                           "', expected allreduce, allgather or alltoallv"};
        o.ops.push_back(op);
      }
    } else if (arg == "--min") {
      o.minBytes = tools::bytesFlag(arg, value);
    } else if (arg == "--max") {
      o.maxBytes = tools::bytesFlag(arg, value);
    } else if (arg == "--iters") {
      o.iters = tools::intFlag(arg, value, 1, 1000000);
    } else if (arg == "--comm") {
      Result<CommKind> kind = parseCommKind(value);
      if (!kind.isOk() || *kind == CommKind::Rccl)
        throw UsageError{"--comm: '" + value +
                         "', expected auto, mpi or single-process"};
      o.kind = *kind;
    } else {
      throw UsageError{"unknown flag " + arg};
    }
  }
  if (o.minBytes > o.maxBytes)
    throw UsageError{"--min is larger than --max"};
  return o;
}

/// N equal pieces of `total` elements, the last taking the remainder.
void splitEvenly(size_t total, int ranks, Counts &counts, Counts &displs) {
  counts.assign(ranks, total / ranks);
  counts.back() += total % ranks;
  displs.assign(ranks, 0);
  for (int r = 1; r < ranks; ++r)
    displs[r] = displs[r - 1] + counts[r - 1];
}

/// One call of `op` on buffers sized for `bytes`.
class Runner {
public:
  Runner(Communicator &comm, const std::string &op, size_t bytes)
      : comm_(comm), op_(op) {
    size_t n = std::max<size_t>(bytes / sizeof(float), size_t(comm.size()));
    int ranks = comm.size();
    if (op == "allreduce") {
      send_.assign(n, 1.0f);
      recv_.resize(n);
    } else if (op == "allgather") {
      send_.assign(n / ranks, 1.0f);
      recv_.resize(send_.size() * ranks);
    } else {
      send_.assign(n, 1.0f);
      recv_.resize(n);
      splitEvenly(n, ranks, counts_, displs_);
    }
    bytes_ = recv_.size() * sizeof(float);
  }

  Status run() {
    if (op_ == "allreduce")
      return comm_.allReduceSum(send_, recv_);
    if (op_ == "allgather")
      return comm_.allGather(send_, recv_);
    return comm_.allToAllV(send_, counts_, displs_, recv_, counts_, displs_);
  }
  size_t bytes() const { return bytes_; }

private:
  Communicator &comm_;
  std::string op_;
  std::vector<float> send_, recv_;
  Counts counts_, displs_;
  size_t bytes_ = 0;
};

void orDie(Communicator &comm, const Status &status) {
  if (!status.isOk())
    comm.abortAll(status.toString());
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  try {
    options = parseArgs(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "kiln-comm-bench: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  }
  Result<std::unique_ptr<Communicator>> made = makeCommunicator(options.kind);
  if (!made.isOk()) {
    std::fprintf(stderr, "kiln-comm-bench: %s\n",
                 made.status().toString().c_str());
    return 1;
  }
  Communicator &comm = **made;
  if (comm.rank() == 0) {
    std::printf("# kiln-comm-bench: backend %s, %d ranks\n", comm.backendName(),
                comm.size());
    std::printf("%-10s %10s %8s %12s %10s\n", "op", "bytes", "iters", "us",
                "GB/s");
  }
  for (const std::string &op : options.ops) {
    for (int64_t size = options.minBytes; size <= options.maxBytes; size *= 4) {
      Runner runner(comm, op, size_t(size));
      int64_t iters = options.iters
                          ? options.iters
                          : std::clamp<int64_t>((64 << 20) / size, 5, 200);
      for (int warm = 0; warm < 2; ++warm)
        orDie(comm, runner.run());
      orDie(comm, comm.barrier());
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < iters; ++i)
        orDie(comm, runner.run());
      double us = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - start)
                      .count() /
                  double(iters);
      // The slowest rank's mean is the collective's time.
      std::vector<int64_t> mine = {int64_t(us * 1000)};
      std::vector<int64_t> all(comm.size());
      orDie(comm, comm.allGather(mine, all));
      double slowest = *std::max_element(all.begin(), all.end()) / 1000.0;
      if (comm.rank() == 0)
        std::printf("%-10s %10zu %8lld %12.1f %10.3f\n", op.c_str(),
                    runner.bytes(), static_cast<long long>(iters), slowest,
                    double(runner.bytes()) / (slowest * 1e3));
    }
  }
  return 0;
}
