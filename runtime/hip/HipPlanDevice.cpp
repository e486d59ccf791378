//===- HipPlanDevice.cpp --------------------------------------------------===//

#include "runtime/hip/HipPlanDevice.h"
#include "runtime/comm/CommFactory.h"
#include "runtime/engine/RowExchange.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace kiln;
using namespace kiln::hip;
using engine::PlanInputs;
using engine::PlanOutputs;
using engine::ValidatedPlan;

namespace {

// The parts of a GPU kernel argument (kiln_artifact.fbs GpuArg).
using Part = fb::GpuArgPart;
constexpr Part kData = Part::Data, kScales = Part::Scales,
               kScratch = Part::Scratch, kRows = Part::Rows,
               kCapacity = Part::CacheCapacity, kRawData = Part::RawData,
               kRawScales = Part::RawScales, kRowsOf = Part::RowsOf,
               kPageTable = Part::PageTable, kPageRows = Part::PageRows;

bool isGpuTarget(const fb::CodeObject &o) {
  return o.target()->string_view() != "x86_64";
}

} // namespace

HipPlanDevice::~HipPlanDevice() {
  for (void *p : allocations_)
    (void)device_->release(p);
}

Result<std::unique_ptr<HipPlanDevice>>
HipPlanDevice::create(engine::Model &model, const HipPlanOptions &options) {
  const fb::Artifact &meta = *model.artifact().meta();
  bool anyGpu = false;
  if (meta.code_objects())
    for (const fb::CodeObject *o : *meta.code_objects())
      anyGpu = anyGpu || isGpuTarget(*o);
  // Say what is wrong with the artifact before looking for a GPU.
  if (!anyGpu)
    return makeError(StatusCode::FailedPrecondition, model.artifact().path(),
                     " has no GPU code object: compile it with kiln-compile "
                     "--target=cpu,gfx950,gfx942 to run it on an AMD GPU");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<HipDevice> device,
                        HipDevice::open(options.device));
  std::unique_ptr<HipPlanDevice> self(
      new HipPlanDevice(model, std::move(device)));
  KILN_RETURN_IF_ERROR(self->prepare(options));
  return self;
}

Result<void *> HipPlanDevice::allocate(size_t bytes) {
  KILN_ASSIGN_OR_RETURN(void *p, device_->allocate(std::max<size_t>(bytes, 4)));
  ++generation_;
  allocations_.push_back(p);
  deviceBytes_ += bytes;
  return p;
}

Status HipPlanDevice::prepare(const HipPlanOptions &options) {
  const artifact::Artifact &art = model_.artifact();
  const fb::Artifact &meta = *art.meta();
  // The first GPU code object this GPU loads (or the one asked for).
  std::string tried;
  for (uint32_t i = 0; i < meta.code_objects()->size() && !module_; ++i) {
    const fb::CodeObject &o = *meta.code_objects()->Get(i);
    std::string target = o.target()->str();
    if (!isGpuTarget(o) ||
        (!options.target.empty() && target != options.target))
      continue;
    Result<hipModule_t> module =
        device_->loadModule(art.bytes(*o.data()), o.data()->size());
    if (!module.isOk()) {
      tried += (tried.empty() ? "" : "; ") + target + ": " +
               module.status().message();
      continue;
    }
    module_ = module.value();
    target_ = target;
    codeObject_ = i;
  }
  if (!module_)
    return makeError(StatusCode::FailedPrecondition, art.path(),
                     ": the GPU loads none of the artifact's code objects",
                     options.target.empty() ? "" : " for " + options.target,
                     tried.empty() ? "" : " (" + tried + ")");

  // The ranks' collectives: RCCL, bootstrapped over an MPI communicator of
  // its own, on this device's stream.
  if (const comm::Communicator *ranks = model_.comm();
      ranks && ranks->size() > 1) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> bootstrap,
                          comm::makeCommunicator(comm::CommKind::Mpi));
    comm::CommOptions commOptions;
    commOptions.stream = device_->stream();
    commOptions.rcclLibraries = options.rcclLibraries;
    auto rccl = comm::makeRcclCommunicator(std::move(bootstrap), commOptions);
    if (!rccl.isOk())
      return rccl.status().withContext(
          "the collectives of a model split over " +
          std::to_string(ranks->size()) + " ranks, on the GPU");
    rccl_ = std::move(rccl).value();
    KILN_ASSIGN_OR_RETURN(waitSeconds_, comm::resolveTimeout(commOptions));
  }
  const char *graphsEnv = std::getenv("KILN_HIP_GRAPHS");
  graphs_ = options.graphs && device_->supportsGraphs() &&
            !(graphsEnv && std::string(graphsEnv) == "0");
  slots_ = options.slots;
  capacity_ = options.capacity;
  if (capacity_ <= 0)
    capacity_ = model_.info().maxPositions > 0
                    ? std::min<int64_t>(model_.info().maxPositions, 8192)
                    : 4096;
  if (slots_ < 1 || slots_ > 4096 || capacity_ < 1 || capacity_ > (1 << 24))
    return makeError(StatusCode::InvalidArgument, "HIP device: ", slots_,
                     " slots of ", capacity_,
                     " positions, expected 1 to 4096 slots of 1 to 2^24");
  if (options.pageRows < 1 || options.pageRows > (1 << 16))
    return makeError(StatusCode::InvalidArgument, "HIP device: pages of ",
                     options.pageRows, " rows, expected 1 to 65536");
  pageRows_ = std::min(options.pageRows, capacity_);
  capacity_ = (capacity_ + pageRows_ - 1) / pageRows_ * pageRows_;
  slotSeq_.assign(size_t(slots_), -1);
  if (const auto *caches = meta.caches())
    lengths_.assign(caches->size(), std::vector<int64_t>(size_t(slots_), 0));
  for (uint32_t i = 0; i < meta.plans()->size(); ++i) {
    std::string name = meta.plans()->Get(i)->name()->str();
    KILN_RETURN_IF_ERROR(loadPlan(i, plans_[name]));
  }
  return Status::ok();
}

Status HipPlanDevice::release(void *p) {
  if (!p)
    return Status::ok();
  auto it = std::find(allocations_.begin(), allocations_.end(), p);
  if (it != allocations_.end())
    allocations_.erase(it);
  ++generation_;
  return device_->release(p);
}

Status HipPlanDevice::loadPlan(uint32_t planIndex, PlanState &state) {
  const fb::Artifact &meta = *model_.artifact().meta();
  const fb::Plan &plan = *meta.plans()->Get(planIndex);
  const ValidatedPlan *runner = model_.plan(plan.name()->string_view());
  if (!runner)
    return makeError(StatusCode::Internal, "plan '", plan.name()->str(),
                     "' was not validated");
  for (const engine::Step &step : runner->steps()) {
    const fb::Dispatch &d = *plan.dispatches()->Get(step.dispatch);
    const fb::Kernel &kernel = *meta.kernels()->Get(d.kernel());
    // A row gather is the communicator's alone: no launch.
    const bool noLaunch = step.kernel == abi::Kernel::AllGatherRows;
    const fb::KernelSymbol *symbol = nullptr;
    if (kernel.symbols())
      for (const fb::KernelSymbol *s : *kernel.symbols())
        if (s->target()->string_view() == target_ && s->launches() &&
            (s->launches()->size() > 0 || noLaunch))
          symbol = s;
    auto where = [&] {
      return "plan '" + plan.name()->str() + "' dispatches[" +
             std::to_string(step.dispatch) + "] " + kernel.name()->str() +
             (d.location() ? " (" + d.location()->str() + ")" : "");
    };
    if (!symbol)
      return makeError(StatusCode::FailedPrecondition, where(), " has no ",
                       target_,
                       " kernel in this artifact: no GPU kernel covers its "
                       "shape, so it cannot run on --device=hip");
    Dispatch out;
    out.collective = step.kernel == abi::Kernel::AllReduce ||
                     step.kernel == abi::Kernel::AllGatherRows ||
                     step.kernel == abi::Kernel::ReduceScatterRows;
    state.hasCollective = state.hasCollective || out.collective;
    const size_t expected = noLaunch ? 0 : 1;
    if (out.collective && symbol->launches()->size() != expected)
      return makeError(StatusCode::InvalidArgument, where(), ": expected ",
                       expected,
                       noLaunch ? " launches"
                                : " launch (the "
                                  "rank-order sum)",
                       ", found ", symbol->launches()->size());
    for (const fb::GpuLaunch *l : *symbol->launches()) {
      Launch launch;
      launch.symbol = l->symbol()->str();
      launch.workgroupSize = l->workgroup_size();
      auto axis = [&](const auto *v, int i, auto fallback) {
        return v && v->size() == 3 ? v->Get(i) : fallback;
      };
      for (int i = 0; i < 3; ++i) {
        launch.mul[i] = axis(l->grid_mul(), i, int64_t(0));
        launch.add[i] = axis(l->grid_add(), i, int64_t(1));
        launch.div[i] = axis(l->grid_div(), i, int64_t(1));
        launch.rowsOf[i] = axis(l->grid_rows_of(), i, int32_t(-1));
        if (launch.div[i] < 1 || launch.mul[i] < 0 || launch.add[i] < 0 ||
            launch.rowsOf[i] >= int32_t(step.args.size()))
          return makeError(StatusCode::InvalidArgument, where(), ": launch ",
                           launch.symbol, " has an invalid grid axis ", i);
      }
      if (launch.workgroupSize < 1 || launch.workgroupSize > 1024)
        return makeError(StatusCode::InvalidArgument, where(), ": launch ",
                         launch.symbol, " has workgroup size ",
                         launch.workgroupSize);
      if (l->args())
        for (const fb::GpuArg *a : *l->args())
          launch.args.push_back(*a);
      for (const fb::GpuArg &ref : launch.args) {
        Part part = ref.part();
        uint32_t index = ref.index();
        bool dispatchArg = part == kData || part == kScales ||
                           part == kRawData || part == kRawScales ||
                           part == kRowsOf;
        if (dispatchArg && index >= step.args.size())
          return makeError(StatusCode::InvalidArgument, where(), ": launch ",
                           launch.symbol, " names argument ", index, " of ",
                           step.args.size());
        if (part == kScratch &&
            (!symbol->scratch() || index >= symbol->scratch()->size()))
          return makeError(StatusCode::InvalidArgument, where(), ": launch ",
                           launch.symbol, " names scratch ", index);
        if (dispatchArg && part != kData && part != kRowsOf &&
            step.args[index].kind() != fb::ArgKind::Weight)
          return makeError(StatusCode::InvalidArgument, where(), ": launch ",
                           launch.symbol, " reads scales of argument ", index,
                           ", which is not a weight");
        if (dispatchArg && step.args[index].kind() == fb::ArgKind::Weight &&
            part != kRowsOf)
          KILN_RETURN_IF_ERROR(
              weightPointer(step.args[index].index(), part).status());
      }
      KILN_ASSIGN_OR_RETURN(launch.function,
                            device_->function(module_, launch.symbol));
      out.launches.push_back(std::move(launch));
    }
    if (symbol->scratch())
      for (const fb::GpuScratch *s : *symbol->scratch())
        out.scratch.push_back({s->per_row(), s->fixed(), s->per_position()});
    state.dispatches.push_back(std::move(out));
  }
  return Status::ok();
}

Result<void *> HipPlanDevice::weightPointer(uint32_t weight, Part part) {
  uint64_t key = uint64_t(weight) << 3 | uint64_t(part);
  auto it = weights_.find(key);
  if (it != weights_.end())
    return it->second;
  const artifact::Artifact &art = model_.artifact();
  const fb::Weight &w = *art.meta()->weights()->Get(weight);
  const engine::BoundWeight &bound = model_.weight(weight);
  const void *host = nullptr;
  size_t bytes = 0;
  const fb::Extent *extent = nullptr;
  if (part == kData && w.shape()->size() == 1 && bound.values) {
    host = bound.values; // 1-D weights: f32 values, whatever the stored type
    bytes = size_t(w.shape()->Get(0)) * 4;
  } else if (part == kData) {
    extent = w.gpu_data() ? w.gpu_data() : w.data();
  } else if (part == kScales) {
    extent = w.gpu_scales() ? w.gpu_scales() : w.scales();
  } else if (part == kRawData) {
    extent = w.data();
  } else if (part == kRawScales) {
    extent = w.scales();
  }
  if (extent) {
    host = art.bytes(*extent);
    bytes = size_t(extent->size());
  }
  if (!host)
    return makeError(StatusCode::InvalidArgument, "weight '", w.name()->str(),
                     "' has no ",
                     part == kScales || part == kRawScales ? "scales" : "data",
                     " for the GPU kernels");
  KILN_ASSIGN_OR_RETURN(void *p, allocate(bytes));
  KILN_RETURN_IF_ERROR(device_->copyToDevice(p, host, bytes));
  weights_[key] = p;
  return p;
}

Status HipPlanDevice::reserve(const ValidatedPlan &plan, PlanState &state,
                              int64_t tokens, int64_t selected,
                              int64_t gathered) {
  if (!state.buffers.empty() && tokens <= state.capTokens &&
      selected <= state.capSelected && gathered <= state.capGathered)
    return Status::ok();
  int64_t capT = std::max(tokens, state.capTokens);
  int64_t capR = std::max({selected, state.capSelected, int64_t(1)});
  int64_t capG = std::max(gathered, state.capGathered);
  for (void *p : state.buffers)
    KILN_RETURN_IF_ERROR(release(p));
  state.buffers.clear();
  for (const engine::BufferInfo &b : plan.buffers()) {
    int64_t rows = b.rows == fb::Rows::Tokens     ? capT
                   : b.rows == fb::Rows::Gathered ? capG
                   : b.rows == fb::Rows::Selected ? capR
                                                  : 1;
    KILN_ASSIGN_OR_RETURN(void *p, allocate(size_t(rows * b.rowElems) * 4));
    state.buffers.push_back(p);
  }
  state.capTokens = capT;
  state.capSelected = capR;
  state.capGathered = capG;
  return Status::ok();
}

Result<PlanOutputs> HipPlanDevice::run(const ValidatedPlan &plan,
                                       const PlanInputs &in) {
  auto it = plans_.find(plan.name());
  if (it == plans_.end())
    return makeError(StatusCode::NotFound, name(), ": no plan '", plan.name(),
                     "'");
  PlanState &state = it->second;
  if (caches_.empty() && !pooled_) {
    // No pool: each slot its own pages, in order, which is the layout
    // [slots, capacity, width]. Allocated at the first call, so that an
    // engine's pool never shares the device with them.
    KILN_RETURN_IF_ERROR(allocateCaches(slots_ * (capacity_ / pageRows_)));
    for (size_t i = 0; i < table_.size(); ++i)
      table_[i] = int32_t(i);
  }
  std::vector<int32_t> slots;
  if (in.tokens > 0 || !dataParallel()) // an idle rank has none to check
    KILN_RETURN_IF_ERROR(checkInputs(plan, in, slots));
  callTokens_ = in.tokens;
  callGathered_ = dataParallel() ? engine::RowExchange::gatheredRows(
                                       model_.rankTokens(), model_.rowGroup())
                                 : in.tokens;
  KILN_RETURN_IF_ERROR(
      reserve(plan, state, in.tokens, in.logitCount, callGathered_));
  KILN_RETURN_IF_ERROR(execute(plan, state, in, slots));
  // The caches now hold the appended rows.
  for (uint32_t c : plan.appendedCaches())
    for (int64_t t = 0; t < in.tokens; ++t) {
      int64_t &rows = lengths_[c][size_t(slots[t])];
      rows = std::max<int64_t>(rows, in.positions[t] + 1);
    }
  PlanOutputs out;
  out.logits = state.logits.data();
  out.logitRows = in.logitCount;
  out.vocab = plan.vocab();
  if (plan.hasHiddenOutput()) {
    out.hidden = state.hidden.data();
    out.hiddenRows = in.tokens;
    out.hiddenSize = plan.hiddenSize();
  }
  return out;
}

Status HipPlanDevice::checkInputs(const ValidatedPlan &plan,
                                  const PlanInputs &in) const {
  std::vector<int32_t> slots;
  return checkInputs(plan, in, slots);
}

Status HipPlanDevice::runIdle(const ValidatedPlan &plan) {
  return run(plan, PlanInputs{}).status();
}

int64_t HipPlanDevice::bufferRows(const ValidatedPlan &plan, uint32_t buffer,
                                  const PlanInputs &in) const {
  switch (plan.buffers()[buffer].rows) {
  case fb::Rows::Tokens:
    return in.tokens;
  case fb::Rows::Gathered:
    return callGathered_;
  case fb::Rows::Selected:
    return in.logitCount;
  case fb::Rows::One:
    return 1;
  case fb::Rows::Routed: // dispatch_rows has no GPU kernel (loadPlan refuses)
    break;
  }
  return 0;
}

int64_t HipPlanDevice::argRows(const ValidatedPlan &plan,
                               const engine::Step &step, size_t arg,
                               const PlanInputs &in) const {
  return step.args[arg].kind() == fb::ArgKind::Buffer
             ? bufferRows(plan, step.args[arg].index(), in)
             : 0;
}

int64_t HipPlanDevice::stepRows(const ValidatedPlan &plan,
                                const engine::Step &step,
                                const PlanInputs &in) const {
  for (size_t a = 0; a < step.args.size(); ++a)
    if (step.args[a].kind() == fb::ArgKind::Buffer)
      return argRows(plan, step, a, in);
  return 0;
}

Status HipPlanDevice::reserveScratch(const ValidatedPlan &plan,
                                     const PlanState &state,
                                     const PlanInputs &in) {
  const auto &steps = plan.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    const engine::Step &step = steps[i];
    const int64_t rows = stepRows(plan, step, in);
    const Dispatch &dispatch = state.dispatches[i];
    for (size_t j = 0; j < dispatch.scratch.size(); ++j) {
      const Scratch &s = dispatch.scratch[j];
      __int128 wide = __int128(s.perRow) * rows +
                      __int128(s.perPosition) * rows * capacity_ + s.fixed;
      if (wide > (__int128(1) << 42))
        return makeError(StatusCode::ResourceExhausted, "plan '", plan.name(),
                         "' dispatches[", step.dispatch, "]: scratch ", j,
                         " would need more than 4 TiB for ", rows, " rows");
      size_t bytes = size_t(wide);
      if (j >= scratch_.size()) {
        scratch_.push_back(nullptr);
        scratchBytes_.push_back(0);
      }
      if (scratchBytes_[j] < bytes) {
        KILN_ASSIGN_OR_RETURN(scratch_[j], allocate(bytes));
        scratchBytes_[j] = bytes;
      }
    }
  }
  return Status::ok();
}

Status HipPlanDevice::launchSteps(const ValidatedPlan &plan, PlanState &state,
                                  const PlanInputs &in) {
  const auto &steps = plan.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    const engine::Step &step = steps[i];
    const Dispatch &dispatch = state.dispatches[i];
    auto rowsOfArg = [&](size_t a) { return argRows(plan, step, a, in); };
    const int64_t rows = stepRows(plan, step, in);
    if (dispatch.collective) {
      KILN_RETURN_IF_ERROR(collective(plan, step, dispatch, state, rows));
      continue;
    }
    for (const Launch &l : dispatch.launches) {
      LaunchDims dims;
      bool empty = false;
      for (int a = 0; a < 3; ++a) {
        int64_t r = l.rowsOf[a] >= 0 ? rowsOfArg(size_t(l.rowsOf[a])) : rows;
        int64_t n = (r * l.mul[a] + l.add[a] + l.div[a] - 1) / l.div[a];
        if (n <= 0)
          empty = true;
        dims.grid[a] = uint32_t(std::max<int64_t>(n, 0));
      }
      if (empty)
        continue;
      dims.block = {l.workgroupSize, 1, 1};
      KernelArgs args;
      for (const fb::GpuArg &ref : l.args) {
        Part part = ref.part();
        uint32_t index = ref.index();
        switch (part) {
        case kData: {
          const fb::Arg &arg = step.args[index];
          if (arg.kind() == fb::ArgKind::Buffer)
            args.pointer(state.buffers[arg.index()]);
          else if (arg.kind() == fb::ArgKind::Cache)
            args.pointer(caches_[arg.index()]);
          else if (arg.kind() == fb::ArgKind::Weight) {
            KILN_ASSIGN_OR_RETURN(void *p, weightPointer(arg.index(), part));
            args.pointer(p);
          } else
            args.pointer(nullptr);
          break;
        }
        case kScales:
        case kRawData:
        case kRawScales: {
          KILN_ASSIGN_OR_RETURN(void *p,
                                weightPointer(step.args[index].index(), part));
          args.pointer(p);
          break;
        }
        case kScratch:
          args.pointer(scratch_[index]);
          break;
        case kRows:
          args.i32(int32_t(rows));
          break;
        case kCapacity:
          args.i32(int32_t(capacity_));
          break;
        case kPageTable:
          args.pointer(deviceTable_);
          break;
        case kPageRows:
          args.i32(int32_t(pageRows_));
          break;
        case kRowsOf:
          args.i32(int32_t(rowsOfArg(index)));
          break;
        default:
          return makeError(StatusCode::InvalidArgument, "launch ", l.symbol,
                           ": unknown argument part ", int(part));
        }
      }
      Status s = device_->launch(l.function, dims, args);
      if (!s.isOk())
        return s.withContext("plan '" + plan.name() + "' dispatches[" +
                             std::to_string(step.dispatch) + "] " + l.symbol);
    }
  }
  return Status::ok();
}

Status HipPlanDevice::launchPlan(const ValidatedPlan &plan, PlanState &state,
                                 const PlanInputs &in) {
  // A graph per (tokens, logit rows, gathered rows) seen twice: the launch
  // arguments that change between calls are those rows and the buffers'
  // addresses, and any allocation since a capture (generation_) drops
  // every graph. Never across ranks (the collectives' host side differs
  // per call), nor for a plan with collectives on one rank (their copies
  // are synchronous).
  if (!graphs_ || rccl_ || state.hasCollective)
    return launchSteps(plan, state, in);
  if (state.graphGeneration != generation_) {
    state.graphs.clear();
    state.seen.clear();
    state.graphGeneration = generation_;
  }
  const std::array<int64_t, 3> key = {in.tokens, in.logitCount, callGathered_};
  auto it = state.graphs.find(key);
  if (it != state.graphs.end()) {
    ++graphLaunches_;
    return device_->launchGraph(*it->second);
  }
  // Shapes seen once (prefill lengths, mostly) are forgotten in bulk so a
  // long-running server's count stays bounded.
  if (state.seen.size() >= kMaxShapesSeen)
    state.seen.clear();
  if (++state.seen[key] < 2 || state.graphs.size() >= kMaxGraphsPerPlan)
    return launchSteps(plan, state, in);
  KILN_RETURN_IF_ERROR(device_->beginCapture());
  Status launched = launchSteps(plan, state, in);
  Result<std::unique_ptr<HipGraph>> graph = device_->endCapture();
  KILN_RETURN_IF_ERROR(launched.withContext("plan '" + plan.name() +
                                            "' captured into a HIP graph"));
  KILN_RETURN_IF_ERROR(graph.status());
  ++graphsCaptured_;
  ++graphLaunches_;
  const HipGraph &g = **graph;
  state.graphs[key] = std::move(graph).value();
  return device_->launchGraph(g);
}

Status HipPlanDevice::execute(const ValidatedPlan &plan, PlanState &state,
                              const PlanInputs &in,
                              const std::vector<int32_t> &slots) {
  auto upload = [&](uint32_t buffer, const void *host, size_t bytes) {
    // An idle data-parallel rank has no inputs.
    return bytes == 0
               ? Status::ok()
               : device_->copyToDevice(state.buffers[buffer], host, bytes);
  };
  size_t tokenBytes = size_t(in.tokens) * 4;
  if (tableChanged_) {
    KILN_RETURN_IF_ERROR(
        device_->copyToDevice(deviceTable_, table_.data(), table_.size() * 4));
    tableChanged_ = false;
  }
  KILN_RETURN_IF_ERROR(upload(plan.tokenIdsBuffer(), in.tokenIds, tokenBytes));
  KILN_RETURN_IF_ERROR(upload(plan.seqIdsBuffer(), slots.data(), tokenBytes));
  KILN_RETURN_IF_ERROR(
      upload(plan.positionsBuffer(), in.positions, tokenBytes));
  if (in.logitCount > 0)
    KILN_RETURN_IF_ERROR(upload(plan.logitRowsBuffer(), in.logitRows,
                                size_t(in.logitCount) * 4));
  if (plan.hasHiddenInput())
    KILN_RETURN_IF_ERROR(upload(uint32_t(plan.hiddenInBuffer()), in.hiddenIn,
                                tokenBytes * size_t(plan.hiddenSize())));
  KILN_RETURN_IF_ERROR(reserveScratch(plan, state, in));
  KILN_RETURN_IF_ERROR(launchPlan(plan, state, in));
  if (rccl_) {
    // A peer that died inside a collective leaves this rank's stream
    // waiting forever: give up after the collectives' timeout, naming RCCL's
    // own error when it has one.
    Status done = device_->synchronize(
        waitSeconds_, "a rank died or hangs inside a collective, or a kernel "
                      "never ends; timeout from KILN_COMM_TIMEOUT_S");
    if (!done.isOk()) {
      Status async = rccl_->asyncError();
      return (async.isOk() ? done : async)
          .withContext(name() + ": plan '" + plan.name() + "'");
    }
  } else {
    KILN_RETURN_IF_ERROR(device_->synchronize());
  }
  state.logits.resize(size_t(in.logitCount * plan.vocab()));
  if (!state.logits.empty())
    KILN_RETURN_IF_ERROR(device_->copyToHost(state.logits.data(),
                                             state.buffers[plan.logitsBuffer()],
                                             state.logits.size() * 4));
  if (plan.hasHiddenOutput()) {
    state.hidden.resize(size_t(in.tokens * plan.hiddenSize()));
    KILN_RETURN_IF_ERROR(device_->copyToHost(
        state.hidden.data(), state.buffers[size_t(plan.hiddenOutBuffer())],
        state.hidden.size() * 4));
  }
  return Status::ok();
}
