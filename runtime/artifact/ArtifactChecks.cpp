//===- ArtifactChecks.cpp - The semantic walk over an artifact ------------===//

#include "runtime/artifact/ArtifactChecks.h"

#include "runtime/artifact/Artifact.h"

#include <set>
#include <string_view>

namespace kiln::artifact {
namespace {

std::string quoted(const flatbuffers::String *s) {
  return s ? "'" + s->str() + "'" : std::string("(unnamed)");
}

bool empty(const flatbuffers::String *s) { return !s || s->size() == 0; }

// The FlatBuffers 2.0 verifier checks vectors' alignment only to 4 bytes;
// reading 8-byte elements through a misaligned pointer is undefined
// behaviour, so such vectors are checked here before anything reads them.
bool misaligned(const flatbuffers::Vector<int64_t> *v) {
  return v && v->size() > 0 &&
         reinterpret_cast<uintptr_t>(v->data()) % alignof(int64_t) != 0;
}

class Checker {
public:
  explicit Checker(const Artifact &artifact)
      : artifact_(artifact), meta_(*artifact.meta()), path_(artifact.path()) {}

  Status run() {
    KILN_RETURN_IF_ERROR(checkConfig());
    KILN_RETURN_IF_ERROR(checkWeights());
    KILN_RETURN_IF_ERROR(checkCaches());
    KILN_RETURN_IF_ERROR(checkCodeObjects());
    KILN_RETURN_IF_ERROR(checkKernels());
    KILN_RETURN_IF_ERROR(checkPlans());
    return checkTokenizer();
  }

private:
  template <typename... Args>
  Status error(StatusCode code, const Args &...args) const {
    return makeError(code, path_, ": ", args...);
  }

  template <typename T> static uint32_t count(const flatbuffers::Vector<T> *v) {
    return v ? v->size() : 0;
  }

  Status checkConfig();
  Status checkExtent(const fb::Extent &extent, const std::string &what);
  Status checkWeights();
  Status checkGpuCopy(const fb::Weight &w, const std::string &what);
  Status checkCaches();
  Status checkCodeObjects();
  Status checkKernels();
  Status checkLaunches(const fb::KernelSymbol &s, const std::string &what);
  Status checkPlans();
  Status checkPlan(const fb::Plan &plan, const std::string &what);
  Status checkTokenizer();

  const Artifact &artifact_;
  const fb::Artifact &meta_;
  const std::string &path_;
  int64_t vocabSize_ = 0;
};

Status Checker::checkConfig() {
  const fb::ModelConfig *config = meta_.config();
  if (!config)
    return error(StatusCode::InvalidArgument, "config: missing (required)");
  if (empty(config->family()))
    return error(StatusCode::InvalidArgument,
                 "config.family: missing, expected e.g. \"glm_moe_dsa\"");
  struct Bounded {
    const char *name;
    int64_t value;
    const char *limitName;
    int64_t limit;
  };
  for (Bounded field :
       {Bounded{"hidden_size", config->hidden_size(), "MAX_HIDDEN_SIZE",
                MAX_HIDDEN_SIZE},
        Bounded{"vocab_size", config->vocab_size(), "MAX_VOCAB_SIZE",
                MAX_VOCAB_SIZE},
        Bounded{"num_layers", config->num_layers(), "MAX_LAYERS", MAX_LAYERS},
        Bounded{"max_position_embeddings", config->max_position_embeddings(),
                "MAX_DIM", MAX_DIM}}) {
    if (field.value <= 0)
      return error(StatusCode::InvalidArgument, "config.", field.name, " is ",
                   field.value, ", expected > 0");
    if (field.value > field.limit)
      return error(StatusCode::ResourceExhausted, "config.", field.name,
                   " exceeds the limit ", field.limitName, " (", field.limit,
                   "): ", field.value);
  }
  vocabSize_ = config->vocab_size();
  if (const auto *eos = config->eos_token_ids())
    for (uint32_t i = 0; i < eos->size(); ++i)
      if (eos->Get(i) < 0 || eos->Get(i) >= vocabSize_)
        return error(StatusCode::OutOfRange, "config.eos_token_ids[", i,
                     "] is ", eos->Get(i), ", expected 0 to ", vocabSize_ - 1);
  if (config->mtp_layers() < 0 || config->default_spec_k() < 0)
    return error(StatusCode::InvalidArgument,
                 "config.mtp_layers and config.default_spec_k are ",
                 config->mtp_layers(), " and ", config->default_spec_k(),
                 ", expected >= 0");
  if (config->mtp_layers() > MAX_MTP_LAYERS)
    return error(StatusCode::ResourceExhausted,
                 "config.mtp_layers exceeds the limit MAX_MTP_LAYERS (",
                 MAX_MTP_LAYERS, "): ", config->mtp_layers());
  return Status::ok();
}

Status Checker::checkExtent(const fb::Extent &extent, const std::string &what) {
  uint32_t file = extent.file();
  uint64_t offset = extent.offset();
  if (file >= artifact_.fileCount())
    return error(StatusCode::OutOfRange, what, ": extent file ", file,
                 ", expected < ", artifact_.fileCount(), " (the artifact has ",
                 artifact_.fileCount(), " files)");
  if (offset % SEGMENT_ALIGNMENT != 0)
    return error(StatusCode::InvalidArgument, what, ": extent offset ", offset,
                 " is not a multiple of ", SEGMENT_ALIGNMENT);
  if (offset < HEADER_SIZE)
    return error(StatusCode::InvalidArgument, what, ": extent offset ", offset,
                 " overlaps the ", HEADER_SIZE, "-byte file header");
  uint64_t end;
  if (__builtin_add_overflow(offset, extent.size(), &end) ||
      end > artifact_.fileSize(file))
    return error(StatusCode::OutOfRange, what, ": extent at offset ", offset,
                 " with ", extent.size(), " bytes ends past the end of file ",
                 file, " (", artifact_.filePath(file), ", ",
                 artifact_.fileSize(file), " bytes)");
  const FileHeader &header = artifact_.header();
  uint64_t metaBegin = header.metadataOffset;
  uint64_t metaEnd = metaBegin + header.metadataSize;
  if (file == 0 && extent.size() > 0 && offset < metaEnd && end > metaBegin)
    return error(StatusCode::InvalidArgument, what, ": extent [", offset, ", ",
                 end, ") overlaps the metadata [", metaBegin, ", ", metaEnd,
                 ") in file 0");
  return Status::ok();
}

Status Checker::checkWeights() {
  const auto *weights = meta_.weights();
  for (uint32_t i = 0; i < count(weights); ++i) {
    const fb::Weight &w = *weights->Get(i);
    std::string what = "weights[" + std::to_string(i) + "] " + quoted(w.name());
    if (empty(w.name()) || !w.shape() || !w.data())
      return error(StatusCode::InvalidArgument, what,
                   ": name, shape and data are required");
    if (misaligned(w.shape()))
      return error(StatusCode::InvalidArgument, what,
                   ": shape is misaligned: the metadata is corrupt");
    KILN_ASSIGN_OR_RETURN(
        WeightBytes expected,
        expectedWeightBytes(w.layout(), w.dtype(), w.shape()->data(),
                            w.shape()->size(), path_ + ": " + what));
    KILN_RETURN_IF_ERROR(checkExtent(*w.data(), what + " data"));
    if (w.data()->size() != expected.data)
      return error(StatusCode::InvalidArgument, what, ": data extent is ",
                   w.data()->size(), " bytes, expected ", expected.data, " (",
                   fb::EnumNameWeightLayout(w.layout()), " ",
                   fb::EnumNameDType(w.dtype()), ", ", expected.elements,
                   " elements)");
    KILN_RETURN_IF_ERROR(checkGpuCopy(w, what));
    if (expected.scales == 0) {
      if (w.scales())
        return error(StatusCode::InvalidArgument, what,
                     ": has scales, but layout ",
                     fb::EnumNameWeightLayout(w.layout()), " has none");
      continue;
    }
    if (!w.scales())
      return error(StatusCode::InvalidArgument, what,
                   ": scales missing, layout ",
                   fb::EnumNameWeightLayout(w.layout()), " needs ",
                   expected.scales, " bytes of them");
    KILN_RETURN_IF_ERROR(checkExtent(*w.scales(), what + " scales"));
    if (w.scales()->size() != expected.scales)
      return error(StatusCode::InvalidArgument, what, ": scales extent is ",
                   w.scales()->size(), " bytes, expected ", expected.scales,
                   " (", fb::EnumNameWeightLayout(w.layout()), ")");
  }
  return Status::ok();
}

Status Checker::checkGpuCopy(const fb::Weight &w, const std::string &what) {
  if (!w.gpu_data() && !w.gpu_scales())
    return Status::ok();
  if (w.layout() != fb::WeightLayout::Mxfp4 ||
      w.gpu_layout() != fb::WeightLayout::Mxfp4Gpu || !w.gpu_data() ||
      !w.gpu_scales())
    return error(StatusCode::InvalidArgument, what, ": a GPU copy needs an ",
                 "Mxfp4 weight with gpu_layout Mxfp4Gpu, gpu_data and ",
                 "gpu_scales; found layout ",
                 fb::EnumNameWeightLayout(w.layout()), ", gpu_layout ",
                 fb::EnumNameWeightLayout(w.gpu_layout()));
  WeightBytes gpu = mxfp4GpuBytes(w.shape()->data(), w.shape()->size());
  KILN_RETURN_IF_ERROR(checkExtent(*w.gpu_data(), what + " gpu_data"));
  KILN_RETURN_IF_ERROR(checkExtent(*w.gpu_scales(), what + " gpu_scales"));
  if (w.gpu_data()->size() != gpu.data || w.gpu_scales()->size() != gpu.scales)
    return error(StatusCode::InvalidArgument, what, ": GPU copy extents are ",
                 w.gpu_data()->size(), " + ", w.gpu_scales()->size(),
                 " bytes, expected ", gpu.data, " + ", gpu.scales,
                 " (Mxfp4Gpu)");
  return Status::ok();
}

Status Checker::checkCaches() {
  const auto *caches = meta_.caches();
  for (uint32_t i = 0; i < count(caches); ++i) {
    const fb::Cache &c = *caches->Get(i);
    std::string what = "caches[" + std::to_string(i) + "] " + quoted(c.name());
    if (empty(c.name()))
      return error(StatusCode::InvalidArgument, what, ": name is required");
    if (c.width() <= 0 || c.width() > MAX_DIM)
      return error(StatusCode::InvalidArgument, what, ": width ", c.width(),
                   ", expected 1 to ", MAX_DIM);
    if (c.dtype() != fb::DType::F32 && c.dtype() != fb::DType::BF16)
      return error(StatusCode::InvalidArgument, what, ": dtype ",
                   static_cast<int>(c.dtype()), " (",
                   fb::EnumNameDType(c.dtype()), "), expected F32 or BF16");
  }
  return Status::ok();
}

Status Checker::checkCodeObjects() {
  const auto *objects = meta_.code_objects();
  for (uint32_t i = 0; i < count(objects); ++i) {
    const fb::CodeObject &o = *objects->Get(i);
    std::string what = "code_objects[" + std::to_string(i) + "]";
    if (empty(o.target()) || !o.data())
      return error(StatusCode::InvalidArgument, what,
                   ": target and data are required");
    KILN_RETURN_IF_ERROR(checkExtent(*o.data(), what + " data"));
    if (o.data()->size() == 0)
      return error(StatusCode::InvalidArgument, what,
                   ": data is empty, expected an ELF");
  }
  return Status::ok();
}

Status Checker::checkKernels() {
  const auto *kernels = meta_.kernels();
  const auto *objects = meta_.code_objects();
  for (uint32_t i = 0; i < count(kernels); ++i) {
    const fb::Kernel &k = *kernels->Get(i);
    std::string what = "kernels[" + std::to_string(i) + "] " + quoted(k.name());
    if (empty(k.name()))
      return error(StatusCode::InvalidArgument, what, ": name is required");
    for (uint32_t j = 0; j < count(k.symbols()); ++j) {
      const fb::KernelSymbol &s = *k.symbols()->Get(j);
      std::string sym = what + " symbols[" + std::to_string(j) + "]";
      if (empty(s.target()) || empty(s.symbol()))
        return error(StatusCode::InvalidArgument, sym,
                     ": target and symbol are required");
      if (s.code_object() >= count(objects))
        return error(StatusCode::OutOfRange, sym, ": code_object ",
                     s.code_object(), ", expected < ", count(objects));
      const auto *objectTarget = objects->Get(s.code_object())->target();
      if (objectTarget->str() != s.target()->str())
        return error(StatusCode::InvalidArgument, sym, ": target '",
                     s.target()->str(), "', but code_objects[", s.code_object(),
                     "] is for '", objectTarget->str(), "'");
      KILN_RETURN_IF_ERROR(checkLaunches(s, sym));
    }
  }
  return Status::ok();
}

Status Checker::checkLaunches(const fb::KernelSymbol &s,
                              const std::string &what) {
  uint32_t scratch = count(s.scratch());
  for (uint32_t i = 0; i < scratch; ++i) {
    const fb::GpuScratch &g = *s.scratch()->Get(i);
    if (g.per_row() < 0 || g.fixed() < 0 || g.per_position() < 0 ||
        g.per_row() > MAX_SCRATCH_BYTES || g.fixed() > MAX_SCRATCH_BYTES ||
        g.per_position() > MAX_SCRATCH_BYTES)
      return error(StatusCode::InvalidArgument, what, " scratch[", i,
                   "]: sizes must be 0 to ", MAX_SCRATCH_BYTES, " bytes");
  }
  for (uint32_t i = 0; i < count(s.launches()); ++i) {
    const fb::GpuLaunch &l = *s.launches()->Get(i);
    std::string launch = what + " launches[" + std::to_string(i) + "]";
    if (empty(l.symbol()))
      return error(StatusCode::InvalidArgument, launch, ": symbol is required");
    auto three = [](const auto *v) { return v && v->size() == 3; };
    if (!three(l.grid_mul()) || !three(l.grid_add()) || !three(l.grid_div()) ||
        (l.grid_rows_of() && l.grid_rows_of()->size() != 3))
      return error(StatusCode::InvalidArgument, launch,
                   ": grid_mul, grid_add and grid_div need 3 entries");
    for (uint32_t a = 0; a < 3; ++a)
      if (l.grid_div()->Get(a) < 1 || l.grid_mul()->Get(a) < 0 ||
          l.grid_add()->Get(a) < 0 || l.grid_mul()->Get(a) > MAX_DIM ||
          l.grid_add()->Get(a) > MAX_DIM || l.grid_div()->Get(a) > MAX_DIM)
        return error(StatusCode::InvalidArgument, launch, ": grid axis ", a,
                     " must have mul, add in [0, ", MAX_DIM,
                     "] and div in [1, ", MAX_DIM, "]");
    if (l.workgroup_size() < 1 || l.workgroup_size() > 1024)
      return error(StatusCode::InvalidArgument, launch, ": workgroup_size ",
                   l.workgroup_size(), ", expected 1 to 1024");
    for (uint32_t a = 0; a < count(l.args()); ++a) {
      const fb::GpuArg &arg = *l.args()->Get(a);
      if (arg.part() > fb::GpuArgPart::MAX)
        return error(StatusCode::InvalidArgument, launch, " args[", a,
                     "]: unknown part ", int(arg.part()));
      if (arg.part() == fb::GpuArgPart::Scratch && arg.index() >= scratch)
        return error(StatusCode::InvalidArgument, launch, " args[", a,
                     "]: scratch ", arg.index(), ", the symbol has ", scratch);
    }
  }
  return Status::ok();
}

Status Checker::checkPlans() {
  const auto *plans = meta_.plans();
  std::set<std::string_view> names;
  for (uint32_t i = 0; i < count(plans); ++i) {
    const fb::Plan &p = *plans->Get(i);
    std::string what = "plans[" + std::to_string(i) + "] " + quoted(p.name());
    if (empty(p.name()))
      return error(StatusCode::InvalidArgument, what, ": name is required");
    if (!names.insert(p.name()->string_view()).second)
      return error(StatusCode::InvalidArgument, what,
                   ": duplicate plan name, expected unique names");
    KILN_RETURN_IF_ERROR(checkPlan(p, what));
  }
  return Status::ok();
}

Status Checker::checkPlan(const fb::Plan &plan, const std::string &what) {
  uint32_t buffers = count(plan.buffers());
  for (uint32_t i = 0; i < buffers; ++i) {
    const fb::Buffer &b = *plan.buffers()->Get(i);
    std::string buf =
        what + " buffers[" + std::to_string(i) + "] " + quoted(b.name());
    if (dtypeBits(b.dtype()) == 0)
      return error(StatusCode::InvalidArgument, buf, ": dtype ",
                   static_cast<int>(b.dtype()), " is not a known DType");
    if (b.rows() > fb::Rows::MAX)
      return error(StatusCode::InvalidArgument, buf, ": rows ",
                   static_cast<int>(b.rows()), " is not a known Rows");
    if (misaligned(b.row_shape()))
      return error(StatusCode::InvalidArgument, buf,
                   ": row_shape is misaligned: the metadata is corrupt");
    uint32_t rank = count(b.row_shape());
    if (rank + 1 > MAX_RANK)
      return error(StatusCode::InvalidArgument, buf, ": row_shape has ", rank,
                   " dims, expected at most ", MAX_RANK - 1);
    uint64_t rowElements = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      int64_t dim = b.row_shape()->Get(d);
      if (dim < 1 || dim > MAX_DIM)
        return error(StatusCode::InvalidArgument, buf, ": row_shape[", d,
                     "] is ", dim, ", expected 1 to ", MAX_DIM);
      if (__builtin_mul_overflow(rowElements, static_cast<uint64_t>(dim),
                                 &rowElements) ||
          rowElements > MAX_ELEMENTS) {
        std::string shape;
        for (uint32_t k = 0; k < rank; ++k)
          shape += (k ? ", " : "") + std::to_string(b.row_shape()->Get(k));
        return error(StatusCode::ResourceExhausted, buf, ": row_shape [", shape,
                     "] has more elements than the limit MAX_ELEMENTS (",
                     MAX_ELEMENTS, ")");
      }
    }
  }
  for (auto [list, field] : {std::pair{plan.inputs(), "inputs"},
                             std::pair{plan.outputs(), "outputs"}})
    for (uint32_t i = 0; i < count(list); ++i)
      if (list->Get(i) >= buffers)
        return error(StatusCode::OutOfRange, what, " ", field, "[", i,
                     "]: buffer ", list->Get(i), ", expected < ", buffers);

  uint32_t kernels = count(meta_.kernels());
  uint32_t weights = count(meta_.weights());
  uint32_t caches = count(meta_.caches());
  for (uint32_t i = 0; i < count(plan.dispatches()); ++i) {
    const fb::Dispatch &d = *plan.dispatches()->Get(i);
    std::string dis = what + " dispatches[" + std::to_string(i) + "]";
    if (d.kernel() >= kernels)
      return error(StatusCode::OutOfRange, dis, ": kernel ", d.kernel(),
                   ", expected < ", kernels);
    for (uint32_t j = 0; j < count(d.args()); ++j) {
      const fb::Arg &arg = *d.args()->Get(j);
      uint32_t limit;
      switch (arg.kind()) {
      case fb::ArgKind::Buffer:
        limit = buffers;
        break;
      case fb::ArgKind::Weight:
        limit = weights;
        break;
      case fb::ArgKind::Cache:
        limit = caches;
        break;
      case fb::ArgKind::None:
        continue;
      default:
        return error(StatusCode::InvalidArgument, dis, " args[", j, "]: kind ",
                     static_cast<int>(arg.kind()), " is not a known ArgKind");
      }
      if (arg.index() >= limit)
        return error(StatusCode::OutOfRange, dis, " args[", j,
                     "]: ", fb::EnumNameArgKind(arg.kind()), " index ",
                     arg.index(), ", expected < ", limit);
    }
  }
  return Status::ok();
}

Status Checker::checkTokenizer() {
  const fb::Tokenizer *tok = meta_.tokenizer();
  if (!tok)
    return Status::ok();
  uint32_t vocab = count(tok->vocab());
  if (vocab == 0)
    return error(StatusCode::InvalidArgument,
                 "tokenizer.vocab: empty, expected the id -> token list");
  if (vocab > vocabSize_)
    return error(StatusCode::InvalidArgument, "tokenizer.vocab has ", vocab,
                 " tokens, more than config.vocab_size ", vocabSize_);
  const auto *added = tok->added_tokens();
  for (uint32_t i = 0; i < count(added); ++i) {
    const fb::AddedToken &t = *added->Get(i);
    if (t.id() < 0 || t.id() >= vocabSize_)
      return error(StatusCode::OutOfRange, "tokenizer.added_tokens[", i, "] ",
                   quoted(t.content()), ": id ", t.id(), ", expected 0 to ",
                   vocabSize_ - 1, " (config.vocab_size)");
  }
  return Status::ok();
}

} // namespace

Status checkSemantics(const Artifact &artifact) {
  return Checker(artifact).run();
}

} // namespace kiln::artifact
