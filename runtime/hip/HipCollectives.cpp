//===- HipCollectives.cpp - A plan's collectives on the GPU ranks ---------===//
//
// all_reduce, all_gather_rows and reduce_scatter_rows over RCCL, with the
// rows the CPU ranks exchange (engine/RowExchange.h) and the same fixed
// order of every float sum: the parts are gathered into a device buffer,
// then the dispatch's rank_sum launch adds them rank after rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/RowExchange.h"
#include "runtime/hip/HipPlanDevice.h"
#include "support/abi/Signature.h"

#include <algorithm>

using namespace kiln;
using namespace kiln::hip;
using engine::RowExchange;
using engine::ValidatedPlan;

Result<void *> HipPlanDevice::exchangeBuffer(size_t bytes) {
  if (gatheredBytes_ < bytes) {
    KILN_RETURN_IF_ERROR(release(gathered_));
    gathered_ = nullptr;
    gatheredBytes_ = 0;
    KILN_ASSIGN_OR_RETURN(gathered_, allocate(bytes));
    gatheredBytes_ = bytes;
  }
  return gathered_;
}

Status HipPlanDevice::rankSum(const Launch &l, const void *parts, void *out,
                              size_t count, int ranks) {
  if (count == 0)
    return Status::ok();
  LaunchDims dims;
  int64_t per = std::max<int64_t>(1, l.div[0]);
  int64_t workgroups = (int64_t(count) + per - 1) / per;
  dims.grid = {uint32_t(std::max<int64_t>(workgroups, 1)), 1, 1};
  dims.block = {l.workgroupSize, 1, 1};
  KernelArgs args;
  args.pointer(const_cast<void *>(parts));
  args.pointer(out);
  args.i32(int32_t(count));
  args.i32(ranks);
  return device_->launch(l.function, dims, args);
}

Status HipPlanDevice::collective(const ValidatedPlan &plan,
                                 const engine::Step &step,
                                 const Dispatch &dispatch, PlanState &state,
                                 int64_t rows) {
  const uint32_t inBuffer = step.args[0].index();
  void *in = state.buffers[inBuffer];
  void *out = state.buffers[step.args[1].index()];
  const size_t width = size_t(plan.buffers()[inBuffer].rowElems);
  const size_t n = size_t(rows) * width;
  const bool allReduce = step.kernel == abi::Kernel::AllReduce;
  // One rank (for the exchanges: ranks that all run the same tokens): the
  // identity.
  if (!rccl_ || (!allReduce && !dataParallel()))
    return in == out || n == 0 ? Status::ok()
                               : device_->copyOnDevice(out, in, n * 4);
  auto f32 = [](void *p, size_t count) {
    return comm::Span<float>(static_cast<float *>(p), count);
  };
  auto cf32 = [](const void *p, size_t count) {
    return comm::Span<const float>(static_cast<const float *>(p), count);
  };

  if (!dataParallel()) {
    // The communicator gathers, then calls back for the sum.
    const Launch &l = dispatch.launches[0];
    comm::DeviceRankOrderSum sum;
    sum.scratch = [this](size_t bytes) { return exchangeBuffer(bytes); };
    sum.sum = [&](const void *gathered, void *result, size_t count, int ranks,
                  void *) {
      return rankSum(l, gathered, result, count, ranks);
    };
    // Installed for this call only: the sum refers to this step's launch.
    rccl_->setRankOrderSum(std::move(sum));
    Status s = rccl_->allReduceSum(cf32(in, n), f32(out, n),
                                   int(step.get<abi::AllReduceParams>().group));
    rccl_->setRankOrderSum({});
    return s;
  }

  KILN_ASSIGN_OR_RETURN(
      RowExchange x, RowExchange::create(model_.rankTokens(), model_.rowGroup(),
                                         engine::collectiveGroup(step)));
  const int rank = rccl_->rank();
  const size_t mine = size_t(callTokens_) * width;
  const size_t gathered = size_t(callGathered_) * width;

  if (step.kernel == abi::Kernel::AllGatherRows)
    return rccl_->allGatherV(cf32(in, x.gatherSend(rank, width)),
                             f32(out, gathered), x.gatherCounts(width));

  const Launch &l = dispatch.launches[0];
  if (allReduce) {
    // A sum inside this rank's group, whose row count differs from other
    // groups'.
    if (plan.buffers()[inBuffer].rows != fb::Rows::Tokens)
      return makeError(
          StatusCode::FailedPrecondition,
          "under data-parallel attention a sum runs over Tokens "
          "rows, found ",
          abi::rowsKindName(abi::RowsKind(plan.buffers()[inBuffer].rows)),
          " rows");
    size_t total = 0;
    comm::Counts counts = x.partCounts(width, total);
    KILN_ASSIGN_OR_RETURN(void *all,
                          exchangeBuffer(std::max<size_t>(total, 1) * 4));
    KILN_RETURN_IF_ERROR(
        rccl_->allGatherV(cf32(in, mine), f32(all, total), counts));
    return rankSum(l,
                   static_cast<float *>(all) + x.groupPartsOffset(rank, width),
                   out, mine, int(x.groupSize()));
  }

  // reduce_scatter_rows.
  comm::Counts sendCounts, sendDispls, recvCounts, recvDispls;
  x.scatterCounts(width, mine, sendCounts, sendDispls, recvCounts, recvDispls);
  const size_t ranks = size_t(x.ranks());
  KILN_ASSIGN_OR_RETURN(void *parts,
                        exchangeBuffer(std::max<size_t>(ranks * mine, 1) * 4));
  KILN_RETURN_IF_ERROR(rccl_->allToAllV(cf32(in, gathered), sendCounts,
                                        sendDispls, f32(parts, ranks * mine),
                                        recvCounts, recvDispls));
  return rankSum(l, parts, out, mine, int(ranks));
}
