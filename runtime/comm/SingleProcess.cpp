//===- SingleProcess.cpp --------------------------------------------------===//

#include "runtime/comm/SingleProcess.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace kiln;
using namespace kiln::comm;

namespace {

class SingleProcessCommunicator final : public Communicator {
public:
  SingleProcessCommunicator() : Communicator(0, 1) {}
  const char *backendName() const override { return "single-process"; }
  Status barrier() override { return Status::ok(); }

  [[noreturn]] void abortAll(const std::string &message) override {
    std::fprintf(stderr, "kiln: rank 0 of 1: %s\n", message.c_str());
    std::fflush(stderr);
    std::exit(1);
  }

protected:
  Status doAllGather(const void *send, void *recv, size_t count,
                     DataType type) override {
    copy(recv, 0, send, 0, count, type);
    return Status::ok();
  }

  Status doAllGatherV(Bytes send, void *recv, const Counts &, const Counts &,
                      DataType type) override {
    copy(recv, 0, send.data, 0, send.count, type);
    return Status::ok();
  }

  Status doAllToAllV(const void *send, const Counts &sendCounts,
                     const Counts &sendDispls, void *recv,
                     const Counts &recvCounts, const Counts &recvDispls,
                     DataType type) override {
    if (sendCounts[0] != recvCounts[0])
      return makeError(StatusCode::InvalidArgument, where("allToAllV"),
                       "this rank sends itself ", sendCounts[0],
                       " elements but expects to receive ", recvCounts[0]);
    copy(recv, recvDispls[0], send, sendDispls[0], sendCounts[0], type);
    return Status::ok();
  }

  Status doBroadcast(void *, size_t, int, DataType) override {
    return Status::ok();
  }

private:
  static void copy(void *dst, size_t dstOffset, const void *src,
                   size_t srcOffset, size_t count, DataType type) {
    size_t element = dataTypeSize(type);
    if (count)
      std::memcpy(static_cast<char *>(dst) + dstOffset * element,
                  static_cast<const char *>(src) + srcOffset * element,
                  count * element);
  }
};

} // namespace

std::unique_ptr<Communicator> kiln::comm::makeSingleProcessCommunicator() {
  return std::make_unique<SingleProcessCommunicator>();
}
