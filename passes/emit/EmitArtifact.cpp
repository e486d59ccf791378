//===- EmitArtifact.cpp - Fused kiln IR + checkpoint to a .kiln artifact --===//
//
// Plans from the IR (the kiln_plan level, ProgramSpec.h), weights streamed
// from the checkpoint (WeightStreamer), tokenizer and config from the
// checkpoint folder, all written through the runtime's ArtifactWriter.
//
//===----------------------------------------------------------------------===//

#include "passes/emit/EmitArtifact.h"

#include "passes/emit/GpuKernels.h"
#include "passes/emit/HostKernels.h"
#include "passes/emit/ProgramSpec.h"
#include "passes/emit/WeightStreamer.h"
#include "runtime/artifact/ArtifactWriter.h"
#include "runtime/artifact/PlanTable.h"
#include "runtime/artifact/TokenizerTable.h"
#include "support/abi/Signature.h"
#include "support/tokenizer/TokenizerData.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace kiln;
using namespace kiln::emit;

namespace {

Result<std::string> readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return makeError(StatusCode::NotFound, path, ": cannot be read");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

fb::DType weightDtype(const StreamedWeight &w) { return w.dtype; }

/// tokenizer_config.json's chat_template, verbatim; empty when absent.
std::string readChatTemplate(const std::string &path) {
  auto text = readText(path);
  if (!text.isOk())
    return "";
  auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("chat_template") &&
      json["chat_template"].is_string())
    return json["chat_template"].get<std::string>();
  return "";
}

flatbuffers::Offset<fb::ModelConfig>
buildConfig(flatbuffers::FlatBufferBuilder &fbb, const ModelFacts &model,
            const std::string &configJson, bool hasDraft,
            const CompileOptions &options) {
  auto family = fbb.CreateString(model.family);
  auto json = fbb.CreateString(configJson);
  auto eosVec = fbb.CreateVector(model.eosTokenIds);
  fb::ModelConfigBuilder b(fbb);
  b.add_family(family);
  b.add_config_json(json);
  b.add_hidden_size(model.hiddenSize);
  b.add_vocab_size(model.vocabSize);
  b.add_num_layers(model.numLayers);
  b.add_max_position_embeddings(model.maxPositions);
  b.add_eos_token_ids(eosVec);
  b.add_pad_token_id(model.padTokenId);
  b.add_mtp_layers(hasDraft ? 1 : 0);
  b.add_default_spec_k(hasDraft ? options.specDefault : 0);
  b.add_ranks(options.ranks);
  b.add_rank(options.rank);
  b.add_tensor_parallel(options.tensorParallel);
  b.add_attention_data_parallel(options.attentionDataParallel);
  return b.Finish();
}

/// A dispatch's launches on one GPU target.
flatbuffers::Offset<fb::KernelSymbol>
buildGpuSymbol(flatbuffers::FlatBufferBuilder &fbb, const GpuCodeObject &object,
               uint32_t codeObject,
               const std::vector<GpuLaunchBinary> &binaries,
               const GpuDispatchLowering &lowering) {
  std::vector<flatbuffers::Offset<fb::GpuLaunch>> launches;
  for (size_t i = 0; i < binaries.size(); ++i) {
    const GpuLaunchSpec &l = lowering.launches[i];
    std::vector<int64_t> mul, add, div;
    std::vector<int32_t> rowsOf;
    for (const GpuGridAxis &g : l.grid) {
      mul.push_back(g.mul);
      add.push_back(g.add);
      div.push_back(g.div);
      rowsOf.push_back(g.rowsOf);
    }
    std::vector<fb::GpuArg> args;
    for (const GpuArgRef &a : l.args)
      args.push_back(a.toArtifact());
    auto symbol = fbb.CreateString(binaries[i].symbol);
    auto mulV = fbb.CreateVector(mul), addV = fbb.CreateVector(add),
         divV = fbb.CreateVector(div);
    auto rowsOfV = fbb.CreateVector(rowsOf);
    auto argV = fbb.CreateVectorOfStructs(args);
    fb::GpuLaunchBuilder lb(fbb);
    lb.add_symbol(symbol);
    lb.add_workgroup_size(binaries[i].workgroupSize);
    lb.add_lds_bytes(binaries[i].ldsBytes);
    lb.add_grid_mul(mulV);
    lb.add_grid_add(addV);
    lb.add_grid_div(divV);
    lb.add_grid_rows_of(rowsOfV);
    lb.add_args(argV);
    launches.push_back(lb.Finish());
  }
  std::vector<fb::GpuScratch> scratch;
  for (const GpuScratchSpec &s : lowering.scratch)
    scratch.emplace_back(s.perRow, s.fixed, s.perPosition);
  auto target = fbb.CreateString(object.target);
  // A dispatch the device communicator runs alone has no kernel to name.
  const GpuLaunchBinary none{"communicator", 1, 0};
  const GpuLaunchBinary &first = binaries.empty() ? none : binaries.front();
  auto symbol = fbb.CreateString(first.symbol);
  auto workgroup =
      fbb.CreateVector(std::vector<uint32_t>{first.workgroupSize, 1, 1});
  auto launchV = fbb.CreateVector(launches);
  auto scratchV = fbb.CreateVectorOfStructs(scratch);
  fb::KernelSymbolBuilder sb(fbb);
  sb.add_target(target);
  sb.add_symbol(symbol);
  sb.add_code_object(codeObject);
  sb.add_workgroup_size(workgroup);
  sb.add_lds_bytes(first.ldsBytes);
  sb.add_launches(launchV);
  sb.add_scratch(scratchV);
  return sb.Finish();
}

} // namespace

Status kiln::compileArtifact(mlir::ModuleOp module, const ModelFacts &model,
                             const TensorSource &source,
                             const std::string &checkpointDir,
                             const CompileOptions &options) {
  // The CPU kernels are always there; GPU targets add code objects.
  KILN_ASSIGN_OR_RETURN(std::vector<rocdl::Chip> chips,
                        parseGpuTargets(options.targets));
  const bool cpu = targetsIncludeCpu(options.targets);
  if (!cpu && chips.empty())
    return makeError(StatusCode::InvalidArgument, "targets '", options.targets,
                     "' name no target: expected cpu, gfx950 or gfx942");
  KILN_ASSIGN_OR_RETURN(
      ProgramSpec program,
      buildPrograms(module, options.hostKernels && cpu,
                    chips.empty() ? std::string() : options.targets,
                    options.decodeAttention, options.fp8Gemm));
  KILN_ASSIGN_OR_RETURN(auto gpuLaunches, readGpuLaunches(module));

  std::string dir = checkpointDir;
  if (dir.size() > 5 && dir.substr(dir.size() - 5) == ".json")
    dir = dir.substr(0, dir.find_last_of('/'));
  KILN_ASSIGN_OR_RETURN(std::string configJson, readText(dir + "/config.json"));
  KILN_ASSIGN_OR_RETURN(TokenizerData tokenizer,
                        parseTokenizerJson(dir + "/tokenizer.json"));
  std::string chatTemplate = readChatTemplate(dir + "/tokenizer_config.json");

  chooseWeightLayouts(program, options.weightPanels, !chips.empty(), cpu);

  KILN_ASSIGN_OR_RETURN(auto writer,
                        artifact::ArtifactWriter::create(options.outputPath,
                                                         options.maxFileBytes));
  KILN_ASSIGN_OR_RETURN(
      std::vector<StreamedWeight> streamed,
      streamWeights(program.weights, source, *writer, stderr));
  // The GPU launches were lowered for the forms the specs promise.
  for (size_t i = 0; i < streamed.size() && !chips.empty(); ++i)
    if (storedForm(streamed[i]) != storedForm(program.weights[i]))
      return makeError(StatusCode::Internal, "weight '",
                       program.weights[i].name,
                       "' was stored in another form than its GPU launches "
                       "were lowered for");
  // What the CPU-and-GPU form costs: the GPU copies beside the CPU layout.
  uint64_t copies = 0, stored = 0;
  size_t copied = 0;
  for (const StreamedWeight &w : streamed) {
    stored += w.data.size() + (w.scales ? w.scales->size() : 0);
    if (w.gpuData && w.gpuScales) {
      copies += w.gpuData->size() + w.gpuScales->size();
      ++copied;
    }
  }
  auto size = [](uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof(text),
                  bytes >= 1000000000 ? "%.2f GB" : "%.1f MB",
                  double(bytes) / (bytes >= 1000000000 ? 1e9 : 1e6));
    return std::string(text);
  };
  if (copied > 0)
    std::fprintf(stderr,
                 "kiln-compile: note: %zu MXFP4 weights are stored twice, in "
                 "the CPU layout and the GPU one: %s of GPU copies beside %s; "
                 "--target without cpu stores each once\n",
                 copied, size(copies).c_str(), size(stored).c_str());

  flatbuffers::FlatBufferBuilder fbb(1 << 20);
  // Weights.
  std::vector<flatbuffers::Offset<fb::Weight>> weights;
  for (size_t i = 0; i < program.weights.size(); ++i) {
    const WeightSpec &spec = program.weights[i];
    const StreamedWeight &s = streamed[i];
    auto name = fbb.CreateString(spec.name);
    auto shape = fbb.CreateVector(spec.shape);
    auto source = fbb.CreateString(s.source);
    fb::WeightBuilder wb(fbb);
    wb.add_name(name);
    wb.add_layout(s.layout);
    wb.add_dtype(weightDtype(s));
    wb.add_shape(shape);
    wb.add_data(&s.data);
    if (s.scales)
      wb.add_scales(&*s.scales);
    if (s.gpuData && s.gpuScales) {
      wb.add_gpu_layout(fb::WeightLayout::Mxfp4Gpu);
      wb.add_gpu_data(&*s.gpuData);
      wb.add_gpu_scales(&*s.gpuScales);
    }
    wb.add_source(source);
    weights.push_back(wb.Finish());
  }
  // Caches.
  std::vector<flatbuffers::Offset<fb::Cache>> caches;
  for (const CacheSpec &c : program.caches)
    caches.push_back(artifact::writeCache(fbb, c));
  // How each dispatch runs on a GPU (chip-independent), by key; the kernel
  // table gets one entry per kernel the plans use and GPU lowering (none
  // for a cpu-only artifact).
  std::map<std::pair<abi::Kernel, std::string>, uint32_t> kernelIndex;
  std::map<std::string, GpuDispatchLowering> lowerings;
  std::vector<std::vector<std::string>> keys;
  // Plans with a dispatch no GPU kernel covers, and those kernels.
  std::set<std::string> hostOnlyPlans, hostOnlyKernels;
  for (size_t pi = 0; pi < program.plans.size(); ++pi) {
    const PlanSpec &p = program.plans[pi];
    keys.emplace_back();
    for (size_t di = 0; di < p.dispatches.size(); ++di) {
      const DispatchSpec &d = p.dispatches[di];
      std::string key;
      if (std::optional<GpuDispatchLowering> &lowering = gpuLaunches[pi][di]) {
        key = lowering->key();
        lowerings.emplace(key, std::move(*lowering));
      }
      // kiln-lower-gpu-launches refused the artifact otherwise.
      if (key.empty() && !cpu)
        return makeError(StatusCode::Internal, "plan '", p.name, "' dispatch ",
                         di, " has no GPU launches");
      kernelIndex.emplace(std::make_pair(d.kernel, key), 0);
      keys.back().push_back(key);
      if (key.empty() && !chips.empty()) {
        hostOnlyPlans.insert(p.name);
        hostOnlyKernels.insert(
            std::string(abi::kKernelNames[size_t(d.kernel)]));
      }
    }
  }
  // The plans a GPU cannot run: kiln-run --device=hip would refuse them.
  if (!hostOnlyPlans.empty()) {
    auto join = [](const std::set<std::string> &names) {
      std::string out;
      for (const std::string &n : names)
        out += (out.empty() ? "" : ", ") + n;
      return out;
    };
    std::fprintf(stderr,
                 "kiln-compile: note: %s: plans %s run only on the CPU: no GPU "
                 "kernel covers their %s dispatches\n",
                 options.outputPath.c_str(), join(hostOnlyPlans).c_str(),
                 join(hostOnlyKernels).c_str());
  }
  // GPU code objects, one per target.
  std::vector<GpuCodeObject> gpuObjects;
  std::vector<flatbuffers::Offset<fb::CodeObject>> codeObjects;
  for (rocdl::Chip chip : chips) {
    KILN_ASSIGN_OR_RETURN(GpuCodeObject object,
                          buildGpuCodeObject(chip, lowerings));
    if (object.elf.empty()) {
      gpuObjects.push_back(std::move(object));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(
        fb::Extent extent,
        writer->writeSegment(object.elf.data(), object.elf.size()));
    auto target = fbb.CreateString(object.target);
    auto triple = fbb.CreateString(object.triple);
    fb::CodeObjectBuilder cb(fbb);
    cb.add_target(target);
    cb.add_triple(triple);
    cb.add_data(&extent);
    codeObjects.push_back(cb.Finish());
    object.elf.clear();
    gpuObjects.push_back(std::move(object));
  }
  // Compiled x86-64 host kernels (HostKernels.cpp): one more code object.
  HostKernelObject host;
  uint32_t hostCodeObject = uint32_t(codeObjects.size());
  if (!program.hostKernels.empty()) {
    std::set<std::string> selected(program.hostKernels.begin(),
                                   program.hostKernels.end());
    KILN_ASSIGN_OR_RETURN(host, emitHostKernels(*writer, selected));
    if (!host.symbols.empty()) {
      auto target = fbb.CreateString(host.target);
      auto triple = fbb.CreateString(host.triple);
      fb::CodeObjectBuilder cb(fbb);
      cb.add_target(target);
      cb.add_triple(triple);
      cb.add_data(&host.data);
      codeObjects.push_back(cb.Finish());
    }
  }
  // Kernels, served on the CPU by the runtime's kernels and on each GPU
  // target by its launches.
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (auto &[kernelAndKey, index] : kernelIndex) {
    index = uint32_t(kernels.size());
    std::vector<flatbuffers::Offset<fb::KernelSymbol>> symbols;
    uint32_t codeObject = 0;
    for (const GpuCodeObject &object : gpuObjects) {
      auto it = object.dispatches.find(kernelAndKey.second);
      if (it != object.dispatches.end())
        symbols.push_back(buildGpuSymbol(fbb, object, codeObject, it->second,
                                         lowerings.at(kernelAndKey.second)));
      if (!object.dispatches.empty())
        ++codeObject;
    }
    std::string kernelName(abi::kKernelNames[size_t(kernelAndKey.first)]);
    auto hostIt = host.symbols.find(kernelName);
    if (hostIt != host.symbols.end()) {
      auto target = fbb.CreateString(host.target);
      auto symbol = fbb.CreateString(hostIt->second);
      fb::KernelSymbolBuilder sb(fbb);
      sb.add_target(target);
      sb.add_symbol(symbol);
      sb.add_code_object(hostCodeObject);
      symbols.push_back(sb.Finish());
    }
    auto name = fbb.CreateString(kernelName);
    flatbuffers::Offset<
        flatbuffers::Vector<flatbuffers::Offset<fb::KernelSymbol>>>
        symbolVec;
    if (!symbols.empty())
      symbolVec = fbb.CreateVector(symbols);
    fb::KernelBuilder kb(fbb);
    kb.add_name(name);
    if (!symbols.empty())
      kb.add_symbols(symbolVec);
    kernels.push_back(kb.Finish());
  }
  std::vector<flatbuffers::Offset<fb::Plan>> plans;
  bool hasDraft = false;
  for (size_t i = 0; i < program.plans.size(); ++i) {
    const PlanSpec &p = program.plans[i];
    std::vector<uint32_t> kernelOf;
    for (size_t j = 0; j < p.dispatches.size(); ++j)
      kernelOf.push_back(
          kernelIndex.at(std::make_pair(p.dispatches[j].kernel, keys[i][j])));
    plans.push_back(artifact::writePlan(fbb, p, kernelOf));
    hasDraft |= p.name == "draft";
  }
  KILN_ASSIGN_OR_RETURN(auto tokenizerTable, artifact::tokenizerToFlatbuffer(
                                                 fbb, tokenizer, chatTemplate));
  auto configTable = buildConfig(fbb, model, configJson, hasDraft, options);
  auto producer = fbb.CreateString("kiln-compile 0.1");
  std::vector<std::string> targetNames;
  if (cpu)
    targetNames.emplace_back("x86_64");
  for (rocdl::Chip chip : chips)
    targetNames.emplace_back(rocdl::chipInfo(chip).name);
  auto targets = fbb.CreateVectorOfStrings(targetNames);
  auto files = fbb.CreateVectorOfStrings(writer->fileNames());
  auto weightVec = fbb.CreateVector(weights);
  auto cacheVec = fbb.CreateVector(caches);
  auto kernelVec = fbb.CreateVector(kernels);
  auto planVec = fbb.CreateVector(plans);
  auto codeObjectVec = fbb.CreateVector(codeObjects);
  fb::ArtifactBuilder ab(fbb);
  ab.add_producer(producer);
  ab.add_targets(targets);
  ab.add_files(files);
  ab.add_config(configTable);
  ab.add_tokenizer(tokenizerTable);
  ab.add_weights(weightVec);
  ab.add_caches(cacheVec);
  ab.add_kernels(kernelVec);
  ab.add_plans(planVec);
  if (!codeObjects.empty())
    ab.add_code_objects(codeObjectVec);
  fbb.Finish(ab.Finish(), fb::ArtifactIdentifier());
  return writer->finish(fbb);
}
