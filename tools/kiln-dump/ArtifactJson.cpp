//===- ArtifactJson.cpp - A loaded artifact as JSON -----------------------===//

#include "tools/kiln-dump/ArtifactJson.h"

#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/artifact/KernelParamsFb.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <type_traits>

namespace kiln::dump {
namespace {

using Json = nlohmann::ordered_json;
namespace fb = kiln::fb;

std::string str(const flatbuffers::String *s) { return s ? s->str() : ""; }

template <typename T> Json list(const flatbuffers::Vector<T> *v) {
  Json out = Json::array();
  if (v)
    for (uint32_t i = 0; i < v->size(); ++i)
      out.push_back(v->Get(i));
  return out;
}

Json strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *v) {
  Json out = Json::array();
  if (v)
    for (const auto *s : *v)
      out.push_back(s->str());
  return out;
}

// A float as the double with the same shortest decimal form, so 1e-5f prints
// as 1e-05 rather than 9.999999747378752e-06.
double shortestDouble(float value) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  if (ec != std::errc())
    return value;
  *end = '\0';
  return std::strtod(text, nullptr);
}

/// A GPU launch's arguments as "data:0", "scales:1", "rows", ...
Json gpuArgs(const flatbuffers::Vector<const fb::GpuArg *> *args) {
  Json out = Json::array();
  if (args)
    for (const fb::GpuArg *a : *args) {
      std::string part = fb::EnumNameGpuArgPart(a->part());
      bool indexed = a->part() != fb::GpuArgPart::Rows &&
                     a->part() != fb::GpuArgPart::CacheCapacity &&
                     a->part() != fb::GpuArgPart::PageTable &&
                     a->part() != fb::GpuArgPart::PageRows;
      out.push_back(indexed ? part + ":" + std::to_string(a->index()) : part);
    }
  return out;
}

/// A dispatch's parameters by name (Kernels.td), or the stored table's type
/// when it is not the one its kernel declares.
Json paramsJson(const std::string &kernelName, const fb::Dispatch &d) {
  abi::Kernel kernel;
  abi::Params params;
  if (!abi::kernelFromName(kernelName, kernel) ||
      !abi::readParams(kernel, d, params))
    return Json{{"!table", fb::EnumNameKernelParams(d.params_type())}};
  Json out = Json::object();
  abi::forEachParam(params, [&](const char *name, auto value) {
    if constexpr (std::is_same_v<decltype(value), float>)
      out[name] = shortestDouble(value);
    else
      out[name] = value;
  });
  return out;
}

Json extentJson(const fb::Extent &e) {
  return Json{{"file", e.file()},
              {"offset", e.offset()},
              {"bytes", e.size()},
              {"crc32c", artifact::formatCrc32c(e.crc32c())}};
}

double bitsPerParam(uint64_t bytes, uint64_t params) {
  return params ? static_cast<double>(bytes) * 8 / static_cast<double>(params)
                : 0.0;
}

Json configJson(const fb::ModelConfig &c) {
  Json out{{"family", str(c.family())},
           {"hidden_size", c.hidden_size()},
           {"vocab_size", c.vocab_size()},
           {"num_layers", c.num_layers()},
           {"max_position_embeddings", c.max_position_embeddings()},
           {"eos_token_ids", list(c.eos_token_ids())},
           {"pad_token_id", c.pad_token_id()},
           {"mtp_layers", c.mtp_layers()},
           {"default_spec_k", c.default_spec_k()}};
  if (c.config_json()) {
    Json parsed = Json::parse(c.config_json()->str(), nullptr, false);
    out["config_json"] = parsed.is_discarded() ? Json(c.config_json()->str())
                                               : std::move(parsed);
  }
  return out;
}

struct Totals {
  uint64_t count = 0, params = 0, bytes = 0;
  void add(uint64_t p, uint64_t b) {
    ++count;
    params += p;
    bytes += b;
  }
  Json json() const {
    return Json{{"count", count},
                {"params", params},
                {"bytes", bytes},
                {"bits_per_param", bitsPerParam(bytes, params)}};
  }
};

/// The weight bytes each kind of target reads, and every copy stored: a
/// weight with a GPU copy is read from it by GPUs and from its own layout
/// by the CPU; the CPU's row panels are for the CPU only, the GPU matmul
/// layout of a GPU-only artifact for GPUs only.
struct TargetBytes {
  uint64_t stored = 0, cpu = 0, gpu = 0;
  uint64_t cpuUnreadable = 0, gpuUnreadable = 0; // weights
  void add(const fb::Weight &w) {
    uint64_t own = w.data()->size() + (w.scales() ? w.scales()->size() : 0);
    uint64_t copy = w.gpu_data()
                        ? w.gpu_data()->size() +
                              (w.gpu_scales() ? w.gpu_scales()->size() : 0)
                        : 0;
    stored += own + copy;
    if (w.layout() == fb::WeightLayout::Mxfp4Gpu)
      ++cpuUnreadable;
    else
      cpu += own;
    if (w.gpu_data())
      gpu += copy;
    else if (w.layout() == fb::WeightLayout::DensePanel4 ||
             w.layout() == fb::WeightLayout::Mxfp4Panel4)
      ++gpuUnreadable;
    else
      gpu += own;
  }
  Json json(const fb::Artifact &meta) const {
    bool cpuTarget = false, gpuTarget = false;
    if (const auto *targets = meta.targets())
      for (const auto *t : *targets)
        (t->string_view() == "x86_64" ? cpuTarget : gpuTarget) = true;
    Json out = Json::object();
    if (cpuTarget)
      out["cpu"] = Json{{"bytes", cpu}, {"unreadable_weights", cpuUnreadable}};
    if (gpuTarget)
      out["gpu"] = Json{{"bytes", gpu}, {"unreadable_weights", gpuUnreadable}};
    return out;
  }
};

Result<Json> weightsJson(const fb::Artifact &meta, bool listEach) {
  Totals all;
  TargetBytes targets;
  std::map<std::string, Totals> byLayout;
  Json tensors = Json::array();
  if (const auto *weights = meta.weights())
    for (const fb::Weight *w : *weights) {
      KILN_ASSIGN_OR_RETURN(artifact::WeightBytes expected,
                            artifact::expectedWeightBytes(
                                w->layout(), w->dtype(), w->shape()->data(),
                                w->shape()->size(), str(w->name())));
      uint64_t bytes =
          w->data()->size() + (w->scales() ? w->scales()->size() : 0);
      all.add(expected.elements, bytes);
      targets.add(*w);
      byLayout[fb::EnumNameWeightLayout(w->layout())].add(expected.elements,
                                                          bytes);
      if (!listEach)
        continue;
      Json t{{"name", str(w->name())},
             {"layout", fb::EnumNameWeightLayout(w->layout())},
             {"dtype", fb::EnumNameDType(w->dtype())},
             {"shape", list(w->shape())},
             {"params", expected.elements},
             {"bytes", bytes},
             {"bits_per_param", bitsPerParam(bytes, expected.elements)},
             {"data", extentJson(*w->data())}};
      if (w->scales())
        t["scales"] = extentJson(*w->scales());
      if (w->gpu_data() && w->gpu_scales()) {
        t["gpu_layout"] = fb::EnumNameWeightLayout(w->gpu_layout());
        t["gpu_data"] = extentJson(*w->gpu_data());
        t["gpu_scales"] = extentJson(*w->gpu_scales());
      }
      if (w->source())
        t["source"] = w->source()->str();
      tensors.push_back(std::move(t));
    }
  Json out = all.json();
  out["stored_bytes"] = targets.stored;
  out["by_target"] = targets.json(meta);
  Json layouts = Json::object();
  for (const auto &[name, totals] : byLayout)
    layouts[name] = totals.json();
  out["by_layout"] = std::move(layouts);
  if (listEach)
    out["tensors"] = std::move(tensors);
  return out;
}

Json kernelsJson(const fb::Artifact &meta) {
  Json out = Json::array();
  if (const auto *kernels = meta.kernels())
    for (const fb::Kernel *k : *kernels) {
      Json symbols = Json::array();
      if (k->symbols())
        for (const fb::KernelSymbol *s : *k->symbols()) {
          Json symbol{{"target", str(s->target())},
                      {"symbol", str(s->symbol())},
                      {"code_object", s->code_object()},
                      {"workgroup_size", list(s->workgroup_size())},
                      {"lds_bytes", s->lds_bytes()}};
          if (s->launches()) {
            Json launches = Json::array();
            for (const fb::GpuLaunch *l : *s->launches())
              launches.push_back(Json{{"symbol", str(l->symbol())},
                                      {"workgroup_size", l->workgroup_size()},
                                      {"lds_bytes", l->lds_bytes()},
                                      {"grid_mul", list(l->grid_mul())},
                                      {"grid_add", list(l->grid_add())},
                                      {"grid_div", list(l->grid_div())},
                                      {"grid_rows_of", list(l->grid_rows_of())},
                                      {"args", gpuArgs(l->args())}});
            symbol["launches"] = std::move(launches);
          }
          if (s->scratch()) {
            Json scratch = Json::array();
            for (const fb::GpuScratch *g : *s->scratch())
              scratch.push_back(Json{{"per_row", g->per_row()},
                                     {"per_position", g->per_position()},
                                     {"fixed", g->fixed()}});
            symbol["scratch"] = std::move(scratch);
          }
          symbols.push_back(std::move(symbol));
        }
      out.push_back(Json{{"name", str(k->name())}, {"symbols", symbols}});
    }
  return out;
}

std::string bufferName(const fb::Plan &plan, uint32_t index) {
  const fb::Buffer *b = plan.buffers()->Get(index);
  return b->name() ? b->name()->str() : "#" + std::to_string(index);
}

std::string argName(const fb::Artifact &meta, const fb::Plan &plan,
                    const fb::Arg &arg) {
  switch (arg.kind()) {
  case fb::ArgKind::Buffer:
    return "buffer:" + bufferName(plan, arg.index());
  case fb::ArgKind::Weight:
    return "weight:" + str(meta.weights()->Get(arg.index())->name());
  case fb::ArgKind::Cache:
    return "cache:" + str(meta.caches()->Get(arg.index())->name());
  case fb::ArgKind::None:
    break;
  }
  return "none";
}

Json planJson(const fb::Artifact &meta, const fb::Plan &plan, bool detail) {
  auto bufferNames = [&](const flatbuffers::Vector<uint32_t> *v) {
    Json out = Json::array();
    if (v)
      for (uint32_t index : *v)
        out.push_back(bufferName(plan, index));
    return out;
  };
  uint32_t buffers = plan.buffers() ? plan.buffers()->size() : 0;
  uint32_t dispatches = plan.dispatches() ? plan.dispatches()->size() : 0;
  Json out{{"name", str(plan.name())},
           {"inputs", bufferNames(plan.inputs())},
           {"outputs", bufferNames(plan.outputs())},
           {"buffer_count", buffers},
           {"dispatch_count", dispatches}};
  if (!detail)
    return out;
  Json bufferList = Json::array();
  for (uint32_t i = 0; i < buffers; ++i) {
    const fb::Buffer *b = plan.buffers()->Get(i);
    bufferList.push_back(Json{{"name", bufferName(plan, i)},
                              {"dtype", fb::EnumNameDType(b->dtype())},
                              {"rows", fb::EnumNameRows(b->rows())},
                              {"row_shape", list(b->row_shape())}});
  }
  Json dispatchList = Json::array();
  for (uint32_t i = 0; i < dispatches; ++i) {
    const fb::Dispatch *d = plan.dispatches()->Get(i);
    Json args = Json::array();
    if (d->args())
      for (const fb::Arg *arg : *d->args())
        args.push_back(argName(meta, plan, *arg));
    std::string kernel = str(meta.kernels()->Get(d->kernel())->name());
    dispatchList.push_back(Json{{"kernel", kernel},
                                {"args", args},
                                {"params", paramsJson(kernel, *d)},
                                {"location", str(d->location())}});
  }
  out["buffers"] = std::move(bufferList);
  out["dispatches"] = std::move(dispatchList);
  return out;
}

Json tokenizerJson(const fb::Tokenizer *tok) {
  if (!tok)
    return nullptr;
  Json added = Json::array();
  if (tok->added_tokens())
    for (const fb::AddedToken *t : *tok->added_tokens())
      added.push_back(Json{{"id", t->id()},
                           {"content", str(t->content())},
                           {"special", t->special()}});
  return Json{{"vocab_size", tok->vocab() ? tok->vocab()->size() : 0},
              {"merges", tok->merges() ? tok->merges()->size() : 0},
              {"pre_tokenizer_pattern", str(tok->pre_tokenizer_pattern())},
              {"split_behavior", str(tok->split_behavior())},
              {"byte_level_use_regex", tok->byte_level_use_regex()},
              {"add_prefix_space", tok->add_prefix_space()},
              {"added_tokens", added},
              {"chat_template_bytes",
               tok->chat_template() ? tok->chat_template()->size() : 0}};
}

Status writeFile(const std::string &path, const uint8_t *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return makeError(StatusCode::InvalidArgument, path,
                     ": cannot create: ", std::strerror(errno));
  size_t written = std::fwrite(data, 1, size, f);
  int closed = std::fclose(f);
  if (written != size || closed != 0)
    return makeError(StatusCode::Internal, path, ": write of ", size,
                     " bytes failed: ", std::strerror(errno));
  return Status::ok();
}

Result<Json> codeObjectsJson(const artifact::Artifact &artifact,
                             const std::string &extractDir) {
  Json out = Json::array();
  const auto *objects = artifact.meta()->code_objects();
  if (!objects)
    return out;
  if (!extractDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(extractDir, ec);
    if (ec)
      return makeError(StatusCode::InvalidArgument, extractDir,
                       ": cannot create the folder: ", ec.message());
  }
  for (uint32_t i = 0; i < objects->size(); ++i) {
    const fb::CodeObject *o = objects->Get(i);
    Json j{{"index", i},
           {"target", str(o->target())},
           {"triple", str(o->triple())},
           {"data", extentJson(*o->data())}};
    if (!extractDir.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string name,
                            codeObjectFileName(str(o->target()), i));
      std::string path = extractDir + "/" + name;
      KILN_RETURN_IF_ERROR(
          writeFile(path, artifact.bytes(*o->data()), o->data()->size()));
      j["extracted"] = path;
    }
    out.push_back(std::move(j));
  }
  return out;
}

} // namespace

Result<std::string> codeObjectFileName(const std::string &target,
                                       uint32_t index) {
  bool plain = !target.empty();
  for (char c : target)
    plain &=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  if (!plain)
    return makeError(StatusCode::InvalidArgument, "code_objects[", index,
                     "]: target '", target,
                     "' is not a plain name ([A-Za-z0-9_-]), refusing to use "
                     "it in a file name");
  const char *ext = target == "x86_64"            ? ".so"
                    : target.rfind("gfx", 0) == 0 ? ".hsaco"
                                                  : ".bin";
  return target + "." + std::to_string(index) + ext;
}

Result<Json> dumpArtifact(const artifact::Artifact &artifact,
                          const DumpOptions &options) {
  const fb::Artifact &meta = *artifact.meta();
  Json files = Json::array();
  for (uint32_t i = 0; i < artifact.fileCount(); ++i)
    files.push_back(Json{{"index", i},
                         {"name", meta.files()->Get(i)->str()},
                         {"bytes", artifact.fileSize(i)}});
  const artifact::FileHeader &header = artifact.header();

  Json out;
  out["path"] = artifact.path();
  out["format_version"] = header.formatVersion;
  out["artifact_id"] = artifact::formatArtifactId(header.artifactId);
  out["producer"] = str(meta.producer());
  out["targets"] = strings(meta.targets());
  out["files"] = std::move(files);
  out["metadata"] =
      Json{{"offset", header.metadataOffset},
           {"bytes", header.metadataSize},
           {"crc32c", artifact::formatCrc32c(header.metadataCrc32c)}};
  out["config"] = configJson(*meta.config());
  KILN_ASSIGN_OR_RETURN(out["weights"], weightsJson(meta, options.weights));
  Json caches = Json::array();
  if (meta.caches())
    for (const fb::Cache *c : *meta.caches())
      caches.push_back(Json{{"name", str(c->name())},
                            {"width", c->width()},
                            {"dtype", fb::EnumNameDType(c->dtype())},
                            {"plan", str(c->plan())}});
  out["caches"] = std::move(caches);
  out["kernels"] = kernelsJson(meta);
  KILN_ASSIGN_OR_RETURN(out["code_objects"],
                        codeObjectsJson(artifact, options.extractKernelsDir));
  Json plans = Json::array();
  if (meta.plans())
    for (const fb::Plan *p : *meta.plans())
      plans.push_back(planJson(meta, *p, options.plans));
  out["plans"] = std::move(plans);
  out["tokenizer"] = tokenizerJson(meta.tokenizer());
  return out;
}

} // namespace kiln::dump
