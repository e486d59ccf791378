//===- Model.cpp - A loaded artifact bound to the CPU kernels -------------===//

#include "runtime/engine/Model.h"
#include "runtime/cpu/CpuFeatures.h"

#include "runtime/artifact/TokenizerTable.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kiln::engine {

namespace {

constexpr int kMaxThreads = 1024;

/// Sets cpu::WeightView::int8Activations on the weights the draft plan reads
/// and no other plan does (the MTP layer, and the draft's own copy of the
/// head under kiln-compile --quantize-policy=mtp).
void markDraftOnlyWeights(const std::vector<std::unique_ptr<PlanRunner>> &plans,
                          std::vector<BoundWeight> &weights) {
  std::vector<uint8_t> draft(weights.size(), 0), other(weights.size(), 0);
  for (const auto &p : plans) {
    std::vector<uint8_t> &used = p->name() == kDraftPlan ? draft : other;
    for (const Step &s : p->plan().steps())
      for (const fb::Arg &a : s.args)
        if (a.kind() == fb::ArgKind::Weight && a.index() < used.size())
          used[a.index()] = 1;
  }
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i].view.int8Activations = draft[i] && !other[i];
}

} // namespace

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string &path,
                                           const LoadOptions &options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    return makeError(StatusCode::InvalidArgument, "threads ", options.threads,
                     ", expected 0 (all hardware threads) to ", kMaxThreads);
  if (options.pageRows < 1 || options.pageRows > (1 << 20))
    return makeError(StatusCode::InvalidArgument, "page rows ",
                     options.pageRows, ", expected 1 to ", 1 << 20);
  if (options.maxCachePages < 0)
    return makeError(StatusCode::InvalidArgument, "max cache pages ",
                     options.maxCachePages, ", expected >= 0");

  artifact::OpenOptions open;
  open.verifyChecksums = options.verifyChecksums;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<artifact::Artifact> art,
                        artifact::Artifact::open(path, open));
  std::unique_ptr<Model> model(new Model());
  const fb::Artifact &meta = *art->meta();
  model->artifact_ = std::move(art);
  auto fail = [&](const Status &s) { return s.withContext(path); };

  const fb::ModelConfig &config = *meta.config();
  ModelInfo &info = model->info_;
  info.family = config.family()->str();
  info.hiddenSize = config.hidden_size();
  info.vocabSize = config.vocab_size();
  info.numLayers = config.num_layers();
  info.maxPositions = std::max<int64_t>(0, config.max_position_embeddings());
  if (config.eos_token_ids())
    info.eosIds.assign(config.eos_token_ids()->begin(),
                       config.eos_token_ids()->end());
  info.padId = config.pad_token_id();
  info.mtpLayers = config.mtp_layers();
  info.defaultSpecK = config.default_spec_k();
  info.attentionDataParallel = config.attention_data_parallel();
  info.tensorParallel = std::max(1, config.tensor_parallel());
  // Expert-parallel artifacts run only beside their other ranks.
  const int worldSize = options.comm ? options.comm->size() : 1;
  const int worldRank = options.comm ? options.comm->rank() : 0;
  if (config.ranks() != worldSize || config.rank() != worldRank)
    return fail(makeError(
        StatusCode::FailedPrecondition, "compiled as rank ", config.rank(),
        " of ", config.ranks(), " ranks (kiln-compile --tp ",
        config.tensor_parallel(), " --ep ",
        config.ranks() / std::max(1, config.tensor_parallel()),
        "), but this process is rank ", worldRank, " of ", worldSize,
        config.ranks() > 1
            ? ": run it with mpirun -np " + std::to_string(config.ranks())
            : std::string()));

  int threads = options.threads;
  if (threads == 0)
    threads = int(std::clamp(cpu::availableCpus(), 1, kMaxThreads));
  cpu::PoolOptions poolOptions;
  poolOptions.pinThreads = options.pinThreads;
  model->pool_ = std::make_unique<cpu::ThreadPool>(threads, poolOptions);
  if (!model->pool_->pinError().empty())
    return makeError(StatusCode::InvalidArgument, model->pool_->pinError());

  uint32_t nWeights = meta.weights() ? meta.weights()->size() : 0;
  model->weights_.resize(nWeights);
  for (uint32_t i = 0; i < nWeights; ++i) {
    bindWeight(*model->artifact_, i, model->weights_[i]);
    if (model->deviceOnly_.empty())
      model->deviceOnly_ = model->weights_[i].deviceOnly;
  }
  if (!model->deviceOnly_.empty() && !options.forDevice) {
    std::string targets;
    if (meta.targets())
      for (const auto *t : *meta.targets())
        targets += (targets.empty() ? "" : ",") + t->str();
    return fail(makeError(StatusCode::FailedPrecondition,
                          "the artifact's targets are '", targets,
                          "', without cpu: ", model->deviceOnly_,
                          ". The CPU cannot run it: run it on the GPU "
                          "(kiln-run or kiln-bench --device=hip), or compile "
                          "it with --target=cpu,",
                          targets));
  }

  if (const fb::Tokenizer *table = meta.tokenizer()) {
    Result<TokenizerData> data = artifact::tokenizerFromFlatbuffer(*table);
    if (!data.isOk())
      return fail(data.status());
    Result<Tokenizer> tok = Tokenizer::create(std::move(data).value());
    if (!tok.isOk())
      return fail(tok.status().withContext("tokenizer"));
    model->tokenizer_.emplace(std::move(tok).value());
  }

  uint32_t nCaches = meta.caches() ? meta.caches()->size() : 0;
  for (uint32_t i = 0; i < nCaches; ++i) {
    const fb::Cache &c = *meta.caches()->Get(i);
    std::string owner = c.plan() ? c.plan()->str() : kMainCaches;
    if (owner.empty())
      owner = kMainCaches;
    if (owner != kMainCaches && owner != kDraftCaches)
      return fail(makeError(StatusCode::InvalidArgument, "caches[", i, "] '",
                            c.name()->str(), "': plan '", owner,
                            "', expected 'main' or 'draft'"));
    cpu::CacheElem elem = c.dtype() == fb::DType::BF16 ? cpu::CacheElem::BF16
                                                       : cpu::CacheElem::F32;
    model->caches_.push_back(std::make_unique<cpu::PagedKvCache>(
        c.width(), elem, options.pageRows, options.maxCachePages));
    model->cacheOwners_.push_back(owner);
  }

  const char *hostEnv = std::getenv("KILN_HOST_KERNELS");
  // The compiled kernels are AVX2 code: the forced scalar path runs none.
  if (options.hostKernels && !(hostEnv && std::string(hostEnv) == "0") &&
      cpu::cpuPath() != cpu::CpuPath::Scalar) {
    std::string note;
    Result<std::unique_ptr<HostKernels>> host =
        HostKernels::fromArtifact(*model->artifact_, &note);
    if (!host.isOk())
      return fail(host.status());
    if (!note.empty())
      std::fprintf(stderr, "kiln: note: %s\n", note.c_str());
    model->hostKernels_ = std::move(host).value();
  }

  ExecContext ctx;
  ctx.meta = &meta;
  ctx.host = model->hostKernels_.get();
  ctx.weights = &model->weights_;
  ctx.caches = &model->caches_;
  ctx.pool = model->pool_.get();
  ctx.workspace = &model->workspace_;
  ctx.arena = &model->arena_;
  ctx.profile = &model->profile_;
  ctx.maxPositions = info.maxPositions;
  ctx.comm = options.comm;
  ctx.rankTokens = &model->rankTokens_;
  ctx.rowGroup = std::max(1, config.tensor_parallel());
  model->rowGroup_ = ctx.rowGroup;
  model->comm_ = options.comm;
  uint32_t nPlans = meta.plans() ? meta.plans()->size() : 0;
  for (uint32_t i = 0; i < nPlans; ++i) {
    Result<std::unique_ptr<PlanRunner>> plan = PlanRunner::create(meta, i, ctx);
    if (!plan.isOk())
      return fail(plan.status());
    const ValidatedPlan &p = (*plan)->plan();
    if (info.vocabSize > 0 && p.vocab() != info.vocabSize)
      return fail(makeError(StatusCode::InvalidArgument, "plan '", p.name(),
                            "': logits have ", p.vocab(),
                            " values per row, but config.vocab_size is ",
                            info.vocabSize));
    if (info.hiddenSize > 0 && p.hiddenSize() != 0 &&
        p.hiddenSize() != info.hiddenSize)
      return fail(makeError(StatusCode::InvalidArgument, "plan '", p.name(),
                            "': the hidden state has ", p.hiddenSize(),
                            " values per row, but config.hidden_size is ",
                            info.hiddenSize));
    model->plans_.push_back(std::move(plan).value());
  }
  if (options.draftInt8Activations)
    markDraftOnlyWeights(model->plans_, model->weights_);
  return model;
}

PlanRunner *Model::findPlan(std::string_view name) const {
  for (const auto &p : plans_)
    if (p->name() == name)
      return p.get();
  return nullptr;
}

Result<PlanOutputs> Model::run(std::string_view name,
                               const PlanInputs &inputs) {
  PlanRunner *plan = findPlan(name);
  if (!plan) {
    std::string names;
    for (const auto &p : plans_)
      names += (names.empty() ? "" : ", ") + p->name();
    return makeError(
        StatusCode::NotFound, artifact_->path(), ": no plan '", name,
        "' (the artifact has: ", names.empty() ? "none" : names, ")");
  }
  if (!device_ && !deviceOnly_.empty())
    return makeError(StatusCode::FailedPrecondition, artifact_->path(),
                     ": plan '", name, "' runs only on a GPU: ", deviceOnly_);
  if (!meets())
    return device_ ? device_->run(plan->plan(), inputs) : plan->run(inputs);
  // Checked before the meeting: once the ranks have met, every one of them
  // must run the plan to its end, or their collectives no longer match.
  KILN_RETURN_IF_ERROR(device_ ? device_->checkInputs(plan->plan(), inputs)
                               : plan->checkInputs(inputs));
  int mine = 0;
  while (plans_[size_t(mine)].get() != plan)
    ++mine;
  for (;;) {
    KILN_ASSIGN_OR_RETURN(int now, meet(mine, inputs.tokens));
    if (now == mine) // idle calls in between appended nothing
      return device_ ? device_->run(plan->plan(), inputs)
                     : plan->runChecked(inputs);
    KILN_RETURN_IF_ERROR(runIdle(size_t(now)));
    ++idlePlanCalls_;
  }
}

Status Model::runIdle(size_t plan) {
  return device_ ? device_->runIdle(plans_[plan]->plan())
                 : plans_[plan]->runIdle();
}

Status Model::idle() {
  if (!meets())
    return Status::ok();
  for (;;) {
    KILN_ASSIGN_OR_RETURN(int now, meet(-1, 0));
    if (now < 0)
      return Status::ok();
    KILN_RETURN_IF_ERROR(runIdle(size_t(now)));
    ++idlePlanCalls_;
  }
}

bool Model::meets() const {
  return info_.attentionDataParallel && comm_ && comm_->size() > 1;
}

Result<int> Model::meet(int plan, int64_t tokens) {
  const size_t n = size_t(comm_->size());
  std::array<int64_t, 2> mine = {plan, tokens};
  std::vector<int64_t> all(2 * n);
  Status st = comm_->allGather(mine, all);
  if (!st.isOk())
    return makeError(
        StatusCode::Unavailable,
        "data-parallel ranks meeting before a plan call: ", st.message());
  int now = -1;
  for (size_t r = 0; r < n; ++r) {
    int64_t wish = all[2 * r];
    if (wish < -1 || wish >= int64_t(plans_.size()))
      return makeError(StatusCode::Internal, "rank ", r, " asks for plan ",
                       wish, " of ", plans_.size());
    if (wish >= 0 && (now < 0 || wish < now))
      now = int(wish);
  }
  rankTokens_.assign(n, 0);
  for (size_t r = 0; r < n; ++r)
    if (all[2 * r] == now)
      rankTokens_[r] = all[2 * r + 1];
  return now;
}

Status Model::attachDevice(std::unique_ptr<PlanDevice> device) {
  for (size_t i = 0; i < sequenceUsed_.size(); ++i)
    if (sequenceLength(int32_t(i)) > 0)
      return makeError(StatusCode::FailedPrecondition,
                       "attachDevice: sequence ", i, " already holds rows");
  device_ = std::move(device);
  return Status::ok();
}

Status Model::usePool(int64_t pages, int64_t pageRows) {
  for (size_t i = 0; i < sequenceUsed_.size(); ++i)
    if (sequenceLength(int32_t(i)) > 0 ||
        sequenceLength(int32_t(i), kDraftCaches) > 0)
      return makeError(StatusCode::FailedPrecondition, "usePool: sequence ", i,
                       " already holds rows");
  if (device_)
    return device_->usePool(pages, pageRows);
  for (auto &cache : caches_) {
    auto pooled = std::make_unique<cpu::PagedKvCache>(cache->width(),
                                                      cache->elem(), pageRows);
    KILN_RETURN_IF_ERROR(pooled->usePool(pages).withContext(
        "KV pool of " + std::to_string(pages) + " pages"));
    cache = std::move(pooled);
  }
  return Status::ok();
}

Status Model::setPageTable(int32_t seq, const int32_t *pages, int64_t count,
                           int64_t mainRows, int64_t draftRows) {
  if (device_)
    return device_->setPageTable(seq, pages, count, mainRows, draftRows);
  for (size_t i = 0; i < caches_.size(); ++i)
    KILN_RETURN_IF_ERROR(caches_[i]->setTable(
        seq, pages, count,
        cacheOwners_[i] == kDraftCaches ? draftRows : mainRows));
  return Status::ok();
}

Result<int32_t> Model::openSequence() {
  for (size_t i = 0; i < sequenceUsed_.size(); ++i)
    if (!sequenceUsed_[i]) {
      sequenceUsed_[i] = true;
      return int32_t(i);
    }
  if (sequenceUsed_.size() >= size_t(cpu::PagedKvCache::kMaxSequences))
    return makeError(StatusCode::ResourceExhausted, "all ",
                     cpu::PagedKvCache::kMaxSequences,
                     " sequence ids are in use");
  sequenceUsed_.push_back(true);
  return int32_t(sequenceUsed_.size() - 1);
}

void Model::closeSequence(int32_t seq) {
  truncate(seq, 0);
  if (seq >= 0 && size_t(seq) < sequenceUsed_.size())
    sequenceUsed_[seq] = false;
}

void Model::truncate(int32_t seq, int64_t length) {
  for (size_t i = 0; i < caches_.size(); ++i) {
    if (device_)
      device_->truncate(i, seq, std::max<int64_t>(length, 0));
    else
      caches_[i]->truncate(seq, std::max<int64_t>(length, 0));
  }
}

void Model::truncate(int32_t seq, int64_t length, std::string_view owner) {
  for (size_t i = 0; i < caches_.size(); ++i)
    if (cacheOwners_[i] == owner) {
      if (device_)
        device_->truncate(i, seq, std::max<int64_t>(length, 0));
      else
        caches_[i]->truncate(seq, std::max<int64_t>(length, 0));
    }
}

int64_t Model::sequenceLength(int32_t seq, std::string_view owner) const {
  int64_t length = -1;
  for (size_t i = 0; i < caches_.size(); ++i)
    if (cacheOwners_[i] == owner) {
      int64_t rows =
          device_ ? device_->cacheRows(i, seq) : caches_[i]->rows(seq);
      length = length < 0 ? rows : std::min(length, rows);
    }
  return std::max<int64_t>(length, 0);
}

Result<Session> Session::open(Model &model) {
  KILN_ASSIGN_OR_RETURN(int32_t seq, model.openSequence());
  return Session(model, seq);
}

Session::Session(Session &&other) noexcept
    : model_(other.model_), seq_(other.seq_) {
  other.model_ = nullptr;
  other.seq_ = -1;
}

Session &Session::operator=(Session &&other) noexcept {
  if (this != &other) {
    if (model_)
      model_->closeSequence(seq_);
    model_ = other.model_;
    seq_ = other.seq_;
    other.model_ = nullptr;
    other.seq_ = -1;
  }
  return *this;
}

Session::~Session() {
  if (model_)
    model_->closeSequence(seq_);
}

} // namespace kiln::engine
