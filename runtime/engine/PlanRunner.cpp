//===- PlanRunner.cpp - Running a validated plan on the CPU kernels -------===//

#include "runtime/engine/PlanRunner.h"
#include "runtime/engine/RowExchange.h"

#include "runtime/cpu/Elementwise.h"
#include "runtime/cpu/Embedding.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Moe.h"
#include "runtime/cpu/Norm.h"
#include "runtime/cpu/RowOps.h"
#include "runtime/cpu/attention/Gqa.h"
#include "runtime/cpu/attention/Indexer.h"
#include "runtime/cpu/attention/KvCache.h"
#include "runtime/engine/HostKernels.h"
#include "support/abi/Signature.h"

#include <chrono>
#include <cstring>
#include <new>
#include <unordered_map>

namespace kiln::engine {

using abi::Kernel;

namespace {

constexpr size_t kBufferAlign = 64;

size_t alignUp(size_t n) {
  return (n + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
}

} // namespace

Result<std::unique_ptr<PlanRunner>>
PlanRunner::create(const fb::Artifact &meta, uint32_t index,
                   const ExecContext &context) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ValidatedPlan> plan,
                        ValidatedPlan::create(meta, index, *context.weights));
  std::unique_ptr<PlanRunner> runner(new PlanRunner());
  runner->plan_ = std::move(plan);
  runner->ctx_ = context;
  return runner;
}

void PlanRunner::AlignedFree::operator()(uint8_t *p) const {
  ::operator delete[](p, std::align_val_t(kBufferAlign));
}

int64_t PlanRunner::rowCount(uint32_t buffer) const {
  switch (plan_->buffers()[buffer].rows) {
  case fb::Rows::Tokens:
    return tokens_;
  case fb::Rows::Selected:
    return selected_;
  case fb::Rows::One:
    return 1;
  case fb::Rows::Gathered:
    return gathered_;
  case fb::Rows::Routed:
    return routed_;
  }
  return 0;
}

int64_t PlanRunner::gatheredTokens(int64_t tokens) const {
  if (!ctx_.rankTokens || ctx_.rankTokens->empty())
    return tokens;
  return RowExchange::gatheredRows(*ctx_.rankTokens, ctx_.rowGroup);
}

Status PlanRunner::reserve(int64_t tokens, int64_t selected, int64_t gathered) {
  if (storage_ && tokens <= capTokens_ && selected <= capSelected_ &&
      gathered <= capGathered_)
    return Status::ok();
  int64_t capT = std::max(tokens, capTokens_);
  int64_t capR = std::max({selected, capSelected_, int64_t(1)});
  int64_t capG = std::max(gathered, capGathered_);
  std::vector<size_t> offsets(plan_->buffers().size());
  size_t total = 0;
  for (size_t i = 0; i < plan_->buffers().size(); ++i) {
    const BufferInfo &b = plan_->buffers()[i];
    int64_t rows = b.rows == fb::Rows::Tokens     ? capT
                   : b.rows == fb::Rows::Selected ? capR
                   : b.rows == fb::Rows::Gathered ? capG
                   : b.rows == fb::Rows::Routed   ? capG
                                                  : 1;
    offsets[i] = total;
    total += alignUp(size_t(rows) * size_t(b.rowElems) * 4);
  }
  auto *raw = static_cast<uint8_t *>(
      ::operator new[](std::max(total, kBufferAlign),
                       std::align_val_t(kBufferAlign), std::nothrow));
  if (!raw)
    return makeError(StatusCode::ResourceExhausted, "plan '", plan_->name(),
                     "': cannot allocate ", total, " bytes of buffers for ",
                     capT, " tokens and ", capR, " selected rows");
  storage_.reset(raw);
  data_.resize(plan_->buffers().size());
  for (size_t i = 0; i < plan_->buffers().size(); ++i)
    data_[i] = raw + offsets[i];
  capTokens_ = capT;
  capSelected_ = capR;
  capGathered_ = capG;
  ++allocations_;
  return Status::ok();
}

Status PlanRunner::checkInputs(const PlanInputs &in) const {
  return plan_->checkInputs(
      in, ctx_.maxPositions,
      [&](uint32_t cache, int32_t seq) {
        return (*ctx_.caches)[cache]->rows(seq);
      },
      "", "");
}

Result<PlanOutputs> PlanRunner::run(const PlanInputs &in) {
  KILN_RETURN_IF_ERROR(checkInputs(in));
  return runChecked(in);
}

Result<PlanOutputs> PlanRunner::runChecked(const PlanInputs &in) {
  int64_t gathered = gatheredTokens(in.tokens);
  KILN_RETURN_IF_ERROR(reserve(in.tokens, in.logitCount, gathered));
  tokens_ = in.tokens;
  selected_ = in.logitCount;
  gathered_ = gathered;
  std::memcpy(data_[plan_->tokenIdsBuffer()], in.tokenIds,
              size_t(in.tokens) * 4);
  std::memcpy(data_[plan_->seqIdsBuffer()], in.seqIds, size_t(in.tokens) * 4);
  std::memcpy(data_[plan_->positionsBuffer()], in.positions,
              size_t(in.tokens) * 4);
  if (in.logitCount > 0)
    std::memcpy(data_[plan_->logitRowsBuffer()], in.logitRows,
                size_t(in.logitCount) * 4);
  if (plan_->hiddenInBuffer() >= 0)
    std::memcpy(data_[plan_->hiddenInBuffer()], in.hiddenIn,
                size_t(in.tokens) *
                    size_t(plan_->buffers()[plan_->hiddenInBuffer()].rowElems) *
                    4);

  KILN_RETURN_IF_ERROR(runSteps(&in));

  PlanOutputs out;
  out.logits = f32(plan_->logitsBuffer());
  out.logitRows = selected_;
  out.vocab = plan_->buffers()[plan_->logitsBuffer()].rowElems;
  if (plan_->hiddenOutBuffer() >= 0) {
    out.hidden = f32(uint32_t(plan_->hiddenOutBuffer()));
    out.hiddenRows = tokens_;
    out.hiddenSize = plan_->buffers()[plan_->hiddenOutBuffer()].rowElems;
  }
  return out;
}

Status PlanRunner::runIdle() {
  int64_t gathered = gatheredTokens(0);
  KILN_RETURN_IF_ERROR(reserve(0, 0, gathered));
  tokens_ = 0;
  selected_ = 0;
  gathered_ = gathered;
  return runSteps(nullptr);
}

Status PlanRunner::runSteps(const PlanInputs *inputs) {
  // Lengths to roll back to if a dispatch fails half way.
  std::vector<std::pair<int32_t, std::vector<int64_t>>> before;
  if (inputs && !plan_->appendedCaches().empty()) {
    const PlanInputs &in = *inputs;
    for (int64_t t = 0; t < in.tokens; ++t) {
      int32_t seq = in.seqIds[t];
      bool seen = false;
      for (const auto &b : before)
        seen = seen || b.first == seq;
      if (seen)
        continue;
      std::vector<int64_t> lengths;
      for (uint32_t c : plan_->appendedCaches())
        lengths.push_back((*ctx_.caches)[c]->rows(seq));
      before.emplace_back(seq, std::move(lengths));
    }
  }

  ctx_.arena->reset();
  StepProfile *profile =
      ctx_.profile && ctx_.profile->enabled ? ctx_.profile : nullptr;
  for (const Step &step : plan_->steps()) {
    std::chrono::steady_clock::time_point t0;
    if (profile)
      t0 = std::chrono::steady_clock::now();
    Status s = execute(step);
    if (profile)
      profile->add(step.kernel, std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count());
    if (!s.isOk()) {
      for (const auto &[seq, lengths] : before)
        for (size_t i = 0; i < plan_->appendedCaches().size(); ++i)
          (*ctx_.caches)[plan_->appendedCaches()[i]]->truncate(seq, lengths[i]);
      return s;
    }
  }
  return Status::ok();
}

const float *PlanRunner::vectorOperand(const fb::Arg &arg) const {
  if (arg.kind() == fb::ArgKind::Weight)
    return (*ctx_.weights)[arg.index()].values;
  return f32(arg.index());
}

Status PlanRunner::checkCacheRows(const Step &step, uint32_t cacheArg) const {
  // The seq and pos arguments of each attention kernel (Kernels.td).
  size_t seqArg = step.kernel == Kernel::MlaAttention ? 4 : 3;
  const cpu::PagedKvCache &cache = *(*ctx_.caches)[step.args[cacheArg].index()];
  const int32_t *seq = i32(step.args[seqArg].index());
  const int32_t *pos = i32(step.args[seqArg + 1].index());
  int64_t n = rowCount(step.args[seqArg].index());
  for (int64_t t = 0; t < n; ++t)
    if (pos[t] < 0 || cache.rows(seq[t]) <= pos[t])
      return makeError(
          StatusCode::FailedPrecondition, "plan '", plan_->name(),
          "' dispatches[", step.dispatch, "] ",
          abi::kKernelNames[size_t(step.kernel)], ": cache '",
          ctx_.meta->caches()->Get(step.args[cacheArg].index())->name()->str(),
          "' holds ", cache.rows(seq[t]), " rows of sequence ", seq[t],
          ", but position ", pos[t], " is read");
  return Status::ok();
}

Status PlanRunner::execute(const Step &s) {
  const auto &a = s.args;
  auto buf = [&](size_t i) { return a[i].index(); };
  auto rows = [&](size_t i) { return rowCount(buf(i)); };
  auto elems = [&](size_t i) { return plan_->buffers()[buf(i)].rowElems; };
  auto weight = [&](size_t i) -> const BoundWeight & {
    return (*ctx_.weights)[a[i].index()];
  };
  auto cacheAt = [&](size_t i) -> cpu::PagedKvCache & {
    return *(*ctx_.caches)[a[i].index()];
  };
  auto fail = [&](StatusCode code, const auto &...args) {
    return makeError(code, "plan '", plan_->name(), "' dispatches[", s.dispatch,
                     "] ", abi::kKernelNames[size_t(s.kernel)], ": ", args...);
  };
  cpu::ThreadPool &pool = *ctx_.pool;
  const HostKernels *host = ctx_.host;

  switch (s.kernel) {
  case Kernel::Embedding: {
    const cpu::WeightView &table = weight(1).view;
    const int32_t *ids = i32(buf(0));
    int64_t n = rows(0);
    for (int64_t t = 0; t < n; ++t)
      if (ids[t] < 0 || ids[t] >= table.rows)
        return fail(StatusCode::OutOfRange, "id ", ids[t], " at row ", t,
                    ", expected 0 to ", table.rows - 1);
    cpu::embedding(table, ids, n, f32(buf(2)));
    return Status::ok();
  }
  case Kernel::RmsNorm: {
    // Rows are independent: split over the pool (prefill), any split the
    // same bits.
    const float *x = f32(buf(0));
    float *y = f32(buf(2));
    const float eps = s.get<abi::RmsNormParams>().eps;
    pool.parallelFor(
        rows(0) * elems(0) / s.cols,
        [&](int64_t r0, int64_t r1, int) {
          const float *xr = x + r0 * s.cols;
          float *yr = y + r0 * s.cols;
          if (host && host->rmsNorm && weight(1).values)
            host->rmsNorm(xr, weight(1).values, yr, r1 - r0, s.cols, eps);
          else
            cpu::rmsNorm(xr, r1 - r0, s.cols, weight(1).values, eps, yr);
        },
        /*grain=*/1, /*unitCost=*/4 * s.cols);
    return Status::ok();
  }
  case Kernel::LayerNorm:
    cpu::layerNorm(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols,
                   weight(1).values, weight(2).values,
                   s.get<abi::LayerNormParams>().eps, f32(buf(3)));
    return Status::ok();
  case Kernel::Matmul:
    if (rows(0) > 0)
      cpu::matmul(pool, f32(buf(0)), rows(0), weight(1).view, f32(buf(2)));
    return Status::ok();
  case Kernel::Rope: {
    float *out = f32(buf(2));
    int64_t n = rows(0);
    if (buf(2) != buf(0))
      std::memcpy(out, f32(buf(0)), size_t(n * elems(0)) * 4);
    const auto &p = s.get<abi::RopeParams>();
    const int32_t *positions = i32(buf(1));
    const int64_t rowElems = elems(0);
    pool.parallelFor(
        n,
        [&](int64_t t0, int64_t t1, int) {
          cpu::rope(out + t0 * rowElems, t1 - t0, s.heads, s.headDim,
                    positions + t0, s.ropeStyle, p.theta, p.offset,
                    p.rotaryDim);
        },
        /*grain=*/1, /*unitCost=*/16 * s.heads * s.headDim);
    return Status::ok();
  }
  case Kernel::Sigmoid:
    if (host && host->sigmoid)
      host->sigmoid(f32(buf(0)), f32(buf(1)), rows(0) * elems(0));
    else
      cpu::sigmoid(f32(buf(0)), rows(0) * elems(0), f32(buf(1)));
    return Status::ok();
  case Kernel::Silu:
    if (host && host->silu)
      host->silu(f32(buf(0)), f32(buf(1)), rows(0) * elems(0));
    else
      cpu::silu(f32(buf(0)), rows(0) * elems(0), f32(buf(1)));
    return Status::ok();
  case Kernel::Relu:
    if (host && host->relu)
      host->relu(f32(buf(0)), f32(buf(1)), rows(0) * elems(0));
    else
      cpu::relu(f32(buf(0)), rows(0) * elems(0), f32(buf(1)));
    return Status::ok();
  case Kernel::Scale:
    if (host && host->scale)
      host->scale(f32(buf(0)), f32(buf(1)), rows(0) * elems(0),
                  s.get<abi::ScaleParams>().factor);
    else
      cpu::scale(f32(buf(0)), rows(0) * elems(0),
                 s.get<abi::ScaleParams>().factor, f32(buf(1)));
    return Status::ok();
  case Kernel::Add:
  case Kernel::Mul: {
    size_t full = s.swap ? 1 : 0, other = s.swap ? 0 : 1;
    const float *x = f32(buf(full));
    const float *y = s.broadcast ? vectorOperand(a[other]) : f32(buf(other));
    int64_t total = rows(2) * elems(2);
    int64_t cols = s.broadcast ? s.cols : elems(2);
    int64_t n = cols > 0 ? total / cols : 0;
    HostBinaryFn compiled = nullptr;
    if (host)
      compiled = s.kernel == Kernel::Add ? host->add : host->mul;
    if (compiled)
      compiled(x, y, f32(buf(2)), n, cols, s.broadcast ? 1 : 0);
    else if (s.kernel == Kernel::Add)
      cpu::add(x, y, n, cols, f32(buf(2)), s.broadcast);
    else
      cpu::mul(x, y, n, cols, f32(buf(2)), s.broadcast);
    return Status::ok();
  }
  case Kernel::Softmax:
    cpu::softmax(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols, f32(buf(1)));
    return Status::ok();
  case Kernel::Normalize:
    cpu::normalize(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols,
                   s.get<abi::NormalizeParams>().eps, f32(buf(1)));
    return Status::ok();
  case Kernel::GroupLimit:
    cpu::groupLimit(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols,
                    s.get<abi::GroupLimitParams>().nGroup,
                    s.get<abi::GroupLimitParams>().topkGroup, f32(buf(1)));
    return Status::ok();
  case Kernel::Argmax:
    cpu::argmax(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols, i32(buf(1)));
    return Status::ok();
  case Kernel::TopK:
    cpu::topK(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols, s.k,
              f32(buf(1)), i32(buf(2)));
    return Status::ok();
  case Kernel::Gather:
    cpu::gather(f32(buf(0)), rows(0) * elems(0) / s.cols, s.cols, i32(buf(1)),
                s.k, f32(buf(2)));
    return Status::ok();
  case Kernel::Split:
  case Kernel::Concat: {
    bool split = s.kernel == Kernel::Split;
    size_t whole = split ? 0 : a.size() - 1;
    int64_t blocks = rows(whole) * s.k;
    int64_t stride = elems(whole) / s.k;
    uint8_t *w = data_[buf(whole)];
    int64_t offset = 0;
    size_t piece = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (i == whole)
        continue;
      int64_t chunk = s.chunks[piece++];
      uint8_t *p = data_[buf(i)];
      for (int64_t b = 0; b < blocks; ++b) {
        uint8_t *wp = w + size_t(b * stride + offset) * 4;
        uint8_t *pp = p + size_t(b * chunk) * 4;
        if (split)
          std::memcpy(pp, wp, size_t(chunk) * 4);
        else
          std::memcpy(wp, pp, size_t(chunk) * 4);
      }
      offset += chunk;
    }
    return Status::ok();
  }
  case Kernel::TakeRows: {
    const int32_t *idx = i32(buf(1));
    int64_t n = rows(1), limit = rows(0);
    size_t rowBytes = size_t(elems(0)) * 4;
    for (int64_t r = 0; r < n; ++r) {
      if (idx[r] < 0 || idx[r] >= limit)
        return fail(StatusCode::OutOfRange, "row index ", idx[r], " at ", r,
                    ", expected 0 to ", limit - 1);
      std::memcpy(data_[buf(2)] + r * rowBytes,
                  data_[buf(0)] + size_t(idx[r]) * rowBytes, rowBytes);
    }
    return Status::ok();
  }
  case Kernel::KvAppend: {
    cpu::PagedKvCache &cache = cacheAt(0);
    const int32_t *seq = i32(buf(1));
    const int32_t *pos = i32(buf(2));
    int64_t n = rows(1);
    for (int64_t t = 0; t < n; ++t)
      KILN_RETURN_IF_ERROR(
          cache.ensure(seq[t], int64_t(pos[t]) + 1)
              .withContext("plan '" + plan_->name() + "' kv_append"));
    cpu::kvAppend(cache.view(), seq, pos, n, f32(buf(3)));
    return Status::ok();
  }
  case Kernel::MlaAttention: {
    KILN_RETURN_IF_ERROR(checkCacheRows(s, 3));
    cpu::MlaArgs m;
    m.dims = s.mla;
    m.tokens = rows(0);
    m.seqIds = i32(buf(4));
    m.positions = i32(buf(5));
    m.qNope = f32(buf(0));
    m.qPe = f32(buf(1));
    m.kvB = weight(2).view;
    m.latent = cacheAt(3).view();
    if (a[6].kind() != fb::ArgKind::None) {
      m.topk = i32(buf(6));
      m.topkWidth = s.k;
    }
    m.scale = s.get<abi::MlaAttentionParams>().scale;
    KILN_RETURN_IF_ERROR(ctx_.workspace->reserve(
        cpu::mlaWorkspaceBytes(m.dims, m.tokens, pool.size())));
    cpu::mlaAttention(pool, m, f32(buf(7)), *ctx_.workspace);
    return Status::ok();
  }
  case Kernel::IndexerTopK: {
    KILN_RETURN_IF_ERROR(checkCacheRows(s, 2));
    cpu::IndexerArgs x;
    x.tokens = rows(0);
    x.seqIds = i32(buf(3));
    x.positions = i32(buf(4));
    x.heads = s.heads;
    x.dim = s.headDim;
    x.q = f32(buf(0));
    x.weights = f32(buf(1));
    x.keys = cacheAt(2).view();
    x.scale = s.get<abi::IndexerTopKParams>().scale;
    x.k = s.k;
    KILN_RETURN_IF_ERROR(
        ctx_.workspace->reserve(cpu::indexerWorkspaceBytes(x, pool.size())));
    cpu::indexerTopK(pool, x, i32(buf(5)), *ctx_.workspace);
    return Status::ok();
  }
  case Kernel::GqaAttention: {
    KILN_RETURN_IF_ERROR(checkCacheRows(s, 1));
    KILN_RETURN_IF_ERROR(checkCacheRows(s, 2));
    cpu::GqaArgs g;
    g.tokens = rows(0);
    g.seqIds = i32(buf(3));
    g.positions = i32(buf(4));
    g.qHeads = s.heads;
    g.kvHeads = s.kvHeads;
    g.headDim = s.headDim;
    g.valueDim = s.valueDim;
    g.q = f32(buf(0));
    g.keys = cacheAt(1).view();
    g.values = cacheAt(2).view();
    g.scale = s.get<abi::GqaAttentionParams>().scale;
    KILN_RETURN_IF_ERROR(
        ctx_.workspace->reserve(cpu::gqaWorkspaceBytes(g, pool.size())));
    cpu::gqaAttention(pool, g, f32(buf(5)), *ctx_.workspace);
    return Status::ok();
  }
  case Kernel::Moe: {
    cpu::MoeWeights w;
    w.router = weight(1).view;
    w.bias = weight(2).values;
    w.gate = weight(3).view;
    w.up = weight(4).view;
    w.down = weight(5).view;
    if (a[6].kind() != fb::ArgKind::None) {
      w.sharedGate = weight(6).view;
      w.sharedUp = weight(7).view;
      w.sharedDown = weight(8).view;
    }
    int64_t n = rows(0);
    if (n > 0) {
      cpu::Arena::Scope scope(*ctx_.arena);
      cpu::MoeParams p = s.moe;
      // After dispatch_rows: this rank's own rows come first.
      if (s.get<abi::MoeParams>().sharedOwnRows)
        p.sharedRows = tokens_;
      cpu::moeForward(pool, f32(buf(0)), n, w, p, *ctx_.arena, f32(buf(9)));
    }
    return Status::ok();
  }
  case Kernel::DispatchRows:
  case Kernel::CombineRows:
    if (Status st = exchangeRows(s); !st.isOk())
      return fail(st.code(), st.message());
    return Status::ok();
  case Kernel::AllReduce:
  case Kernel::AllGatherRows:
  case Kernel::ReduceScatterRows:
    if (Status st = collective(s); !st.isOk())
      return fail(StatusCode::Unavailable, st.message());
    return Status::ok();
  case Kernel::Count:
    break;
  }
  return fail(StatusCode::Internal, "kernel not handled");
}

Status PlanRunner::collective(const Step &s) {
  const uint32_t in = s.args[0].index(), out = s.args[1].index();
  const size_t width = size_t(plan_->buffers()[in].rowElems);
  const size_t n = size_t(rowCount(in)) * width;
  const bool multiRank = ctx_.comm && ctx_.comm->size() > 1;
  const bool dataParallel =
      multiRank && ctx_.rankTokens && !ctx_.rankTokens->empty();
  // One rank (for the exchanges: ranks that all run the same tokens): a
  // copy.
  if (!multiRank || (s.kernel != Kernel::AllReduce && !dataParallel)) {
    if (out != in)
      std::memcpy(f32(out), f32(in), n * sizeof(float));
    return Status::ok();
  }
  // Bytes this rank sends to the others, for kiln-bench --profile.
  const int peers = ctx_.comm->size() - 1;
  auto sent = [&](size_t floats) {
    recordSent(s, int64_t(floats * sizeof(float)));
  };
  // The fixed-order sum of runtime/comm: the same bits whatever the timing.
  if (!dataParallel) {
    const int group = int(s.get<abi::AllReduceParams>().group);
    sent(n * size_t(group == 0 ? peers : group - 1));
    return ctx_.comm->allReduceSum(comm::Span<const float>(f32(in), n),
                                   comm::Span<float>(f32(out), n), group);
  }
  KILN_ASSIGN_OR_RETURN(
      RowExchange x,
      RowExchange::create(*ctx_.rankTokens, ctx_.rowGroup, collectiveGroup(s)));
  const int rank = ctx_.comm->rank();
  const size_t mine = size_t(tokens_) * width;
  const size_t gathered = size_t(gathered_) * width;
  cpu::Arena::Scope scope(*ctx_.arena);

  if (s.kernel == Kernel::AllGatherRows) {
    sent(x.gatherSend(rank, width) * size_t(peers));
    return ctx_.comm->allGatherV(
        comm::Span<const float>(f32(in), x.gatherSend(rank, width)),
        comm::Span<float>(f32(out), gathered), x.gatherCounts(width));
  }

  if (s.kernel == Kernel::AllReduce) {
    // A sum inside this rank's group, whose row count differs from other
    // groups'.
    if (plan_->buffers()[in].rows != fb::Rows::Tokens)
      return makeError(
          StatusCode::FailedPrecondition,
          "under data-parallel attention a sum runs over "
          "Tokens rows, found ",
          abi::rowsKindName(abi::RowsKind(plan_->buffers()[in].rows)), " rows");
    size_t total = 0;
    comm::Counts counts = x.partCounts(width, total);
    float *all = ctx_.arena->alloc<float>(int64_t(std::max<size_t>(total, 1)));
    sent(mine * size_t(peers));
    KILN_RETURN_IF_ERROR(
        ctx_.comm->allGatherV(comm::Span<const float>(f32(in), mine),
                              comm::Span<float>(all, total), counts));
    comm::sumInRankOrder(all + x.groupPartsOffset(rank, width), f32(out), mine,
                         int(x.groupSize()), comm::DataType::F32);
    return Status::ok();
  }

  // reduce_scatter_rows.
  comm::Counts sendCounts, sendDispls, recvCounts, recvDispls;
  x.scatterCounts(width, mine, sendCounts, sendDispls, recvCounts, recvDispls);
  size_t toPeers = 0;
  for (size_t r = 0; r < sendCounts.size(); ++r)
    toPeers += int(r) == rank ? 0 : sendCounts[r];
  sent(toPeers);
  const size_t size = size_t(x.ranks());
  float *parts =
      ctx_.arena->alloc<float>(int64_t(std::max<size_t>(size * mine, 1)));
  KILN_RETURN_IF_ERROR(ctx_.comm->allToAllV(
      comm::Span<const float>(f32(in), gathered), sendCounts, sendDispls,
      comm::Span<float>(parts, size * mine), recvCounts, recvDispls));
  comm::sumInRankOrder(parts, f32(out), mine, int(size), comm::DataType::F32);
  return Status::ok();
}

Status PlanRunner::exchangeRows(const Step &s) {
  const bool multiRank = ctx_.comm && ctx_.comm->size() > 1;
  if (multiRank && (!ctx_.rankTokens || ctx_.rankTokens->empty()))
    return makeError(StatusCode::FailedPrecondition,
                     abi::kKernelNames[size_t(s.kernel)],
                     " exchanges the rows of data-parallel attention, but the "
                     "ranks run the same tokens");
  comm::Communicator *comm = multiRank ? ctx_.comm : nullptr;
  const uint32_t x = s.args[0].index();
  const int64_t width = plan_->buffers()[x].rowElems;
  const int rank = comm ? comm->rank() : 0;
  if (s.kernel == Kernel::CombineRows) {
    recordSent(s, exchange_.rowsFromPeers(rank) * width * 4);
    return exchange_.combine(comm, f32(x), i32(s.args[1].index()), tokens_,
                             width, *ctx_.arena, f32(s.args[2].index()));
  }
  ExpertExchange::Dispatch d;
  d.x = f32(x);
  d.tokens = tokens_;
  d.width = width;
  const BoundWeight &router = (*ctx_.weights)[s.args[1].index()];
  const BoundWeight &bias = (*ctx_.weights)[s.args[2].index()];
  d.router = router.view;
  d.bias = bias.values;
  d.routing = s.moe;
  const auto &params = s.get<abi::DispatchRowsParams>();
  d.expertsPerRank = params.expertsPerRank;
  d.ownRows = params.ownRows;
  KILN_RETURN_IF_ERROR(exchange_.dispatch(
      comm, *ctx_.pool, *ctx_.arena, d, i32(s.args[4].index()),
      f32(s.args[3].index()), capGathered_, routed_));
  recordSent(s, exchange_.rowsToPeers(rank) * width * 4);
  return Status::ok();
}

} // namespace kiln::engine
