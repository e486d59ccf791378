//===- kiln-compile.cpp - Kiln's ahead-of-time compiler driver ------------===//
//
//   kiln-compile <checkpoint-dir> --emit=graph|fused|plan [--config-only]
//   kiln-compile <checkpoint-dir> -o model.kiln [--target=cpu,...]
//                [--quantize=mxfp4 --quantize-policy=experts,...]
//
// A thin wrapper: the work is in frontends/glm (checkpoint and graph),
// passes/ (fusion, plans) and passes/emit (the artifact).
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "frontends/glm/Checkpoint.h"
#include "frontends/glm/Config.h"
#include "frontends/glm/GraphBuilder.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include "passes/emit/EmitArtifact.h"
#include "passes/emit/EmitPasses.h"
#include "passes/emit/GpuKernels.h"
#include "passes/emit/HostKernels.h"
#include "runtime/artifact/ArtifactFormat.h"

using namespace llvm;
using namespace kiln;

static cl::OptionCategory category("kiln-compile options");
static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<checkpoint-dir>"),
                                      cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                       cl::value_desc("path"), cl::init("-"),
                                       cl::cat(category));
static cl::opt<std::string>
    emitWhat("emit",
             cl::desc("What to produce: graph (graph-level IR), fused (after "
                      "the fusion passes), plan (the kiln_plan level, "
                      "docs/plans.md), memory (each rank's weight and KV "
                      "bytes, kiln-report-memory) or artifact (the default "
                      "with -o)"),
             cl::init(""), cl::cat(category));
static cl::opt<double> deviceGb(
    "device-gb",
    cl::desc("--emit=memory: one device's memory in GB, for the KV tokens "
             "that fit beside each rank's weights (default: 288, one "
             "MI355X)"),
    cl::init(288), cl::cat(category));
static cl::opt<bool> configOnly(
    "config-only",
    cl::desc("Build the graph from config.json alone (no weights needed)"),
    cl::cat(category));
static cl::opt<std::string>
    quantize("quantize", cl::desc("Quantize weights: none or mxfp4"),
             cl::init("none"), cl::cat(category));
static cl::opt<std::string> quantizePolicy(
    "quantize-policy",
    cl::desc("Weight groups to quantize: experts, shared, dense, attention, "
             "mtp, lm_head, all (comma separated)"),
    cl::init("experts"), cl::cat(category));
static cl::opt<std::string>
    scaleRule("quantize-rule", cl::desc("MXFP4 scale rule: even or floor"),
              cl::init("even"), cl::cat(category));
static cl::opt<std::string> cacheType("kv-cache-type",
                                      cl::desc("KV cache elements: f32, bf16"),
                                      cl::init("f32"), cl::cat(category));
static cl::opt<std::string> targets("target",
                                    cl::desc("Targets: cpu, gfx950, gfx942"),
                                    cl::init("cpu"), cl::cat(category));
static cl::opt<bool> noWeightPanels(
    "no-weight-panels",
    cl::desc("Store every BF16 matrix row-major, also those only the CPU "
             "matmul reads (by default they are stored in row panels of 4, "
             "which the matmul streams faster; the values are the same)"),
    cl::cat(category));
static cl::opt<bool> noHostKernels(
    "no-host-kernels",
    cl::desc("Do not compile the x86-64 host kernels (the runtime's built-in "
             "kernels run)"),
    cl::init(false), cl::cat(category));
static cl::opt<uint64_t> maxFileBytes(
    "max-file-size",
    cl::desc("Split the artifact into files of at most this many bytes"),
    cl::init(uint64_t(64) << 30), cl::cat(category));
static cl::opt<int>
    specDefault("spec-default",
                cl::desc("Default draft tokens per round for kiln-run"),
                cl::init(3), cl::cat(category));

static cl::opt<int> expertParallel(
    "ep",
    cl::desc("Expert-parallel ranks: write one artifact per rank "
             "(NAME.rank<r>.kiln), each holding its share of the routed "
             "experts (kiln-partition-experts); run them with mpirun -np N"),
    cl::init(1), cl::cat(category));

static cl::opt<int> tensorParallel(
    "tp",
    cl::desc("Tensor-parallel ranks: attention heads and MLP/expert columns "
             "split over N ranks (kiln-partition-tensor); with --ep M the "
             "job has N x M ranks, rank r holding heads share r % N and "
             "experts share r / N"),
    cl::init(1), cl::cat(category));

static cl::opt<bool> dpAttention(
    "dp-attention",
    cl::desc("Data-parallel attention (with --ep N, N > 1): each expert "
             "group (the --tp ranks of one expert share) runs attention, the "
             "dense layers and the head on its own requests and keeps its "
             "own KV cache; every MoE gathers the groups' rows "
             "(kiln.all_gather_rows) and hands each group back its own "
             "(kiln.reduce_scatter_rows)"),
    cl::init(false), cl::cat(category));

static cl::opt<std::string> moeExchange(
    "moe-exchange",
    cl::desc("With --dp-attention, how rows reach the experts: gather "
             "(default: every rank's rows to every rank, each rank's rows of "
             "the sum back) or all-to-all (each row only to the ranks that "
             "hold its experts, the parts back to its rank, the shared expert "
             "on each rank for its own rows; --tp 1, CPU ranks)"),
    cl::init("gather"), cl::cat(category));

static cl::opt<std::string> gpuDecodeAttention(
    "gpu-decode-attention",
    cl::desc("GPU targets: MLA attention and the DSA indexer's scores in "
             "decode plans, vector (default: a workgroup per (token, head), "
             "the keys split over workgroups; fills the GPU at batch 1) or "
             "mfma (the matrix units: 16 heads a workgroup, each latent row "
             "read once per 16 heads; the indexer 16 keys x 16 heads a "
             "tile; for large batches)"),
    cl::init("vector"), cl::cat(category));

static cl::opt<std::string> gpuFp8Gemm(
    "gpu-fp8-gemm",
    cl::desc("GPU targets: GEMMs over FP8 block-scaled weights, bf16 "
             "(default: the weights decoded to bf16 in registers, bf16 "
             "activations and MFMAs) or fp8 (the activations quantized to "
             "FP8 per 1 x 128 block in the kernel, FP8 MFMAs; W8A8 "
             "numerics, docs/gpu.md)"),
    cl::init("bf16"), cl::cat(category));

static int fail(const Twine &message) {
  errs() << "kiln-compile: " << message << "\n";
  return 1;
}

/// Rank `rank`'s share of the module: its experts (kiln-partition-experts,
/// share rank / tp of ep), then its heads and columns
/// (kiln-partition-tensor, share rank % tp of tp).
static mlir::LogicalResult partition(mlir::MLIRContext &context,
                                     mlir::ModuleOp module, int rank) {
  mlir::PassManager pm(&context);
  KilnPartitionExpertsPassOptions experts;
  experts.ranks = expertParallel;
  experts.rank = rank / tensorParallel;
  experts.dpAttention = dpAttention;
  experts.dpGroup = tensorParallel;
  experts.exchange = moeExchange;
  KilnPartitionTensorPassOptions tensor;
  tensor.ranks = tensorParallel;
  tensor.rank = rank % tensorParallel;
  pm.addPass(createKilnPartitionExpertsPass(experts));
  pm.addPass(createKilnPartitionTensorPass(tensor));
  return pm.run(module);
}

/// What the artifact records about the model, from its config.json.
static kiln::ModelFacts modelFacts(const glm::GlmConfig &config) {
  kiln::ModelFacts m;
  m.family = glm::modelTypeName(config.modelType);
  m.hiddenSize = config.hiddenSize;
  m.vocabSize = config.vocabSize;
  m.numLayers = config.numHiddenLayers;
  m.maxPositions = config.maxPositionEmbeddings;
  m.eosTokenIds.assign(config.eosTokenIds.begin(), config.eosTokenIds.end());
  m.padTokenId = int32_t(config.padTokenId.value_or(-1));
  return m;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Kiln ahead-of-time compiler\n");

  if (quantize != "none" && quantize != "mxfp4")
    return fail("--quantize must be none or mxfp4, found '" + quantize + "'");
  std::string mode = emitWhat;
  if (mode.empty())
    mode = outputPath == "-" ? "graph" : "artifact";
  if (mode != "graph" && mode != "fused" && mode != "plan" &&
      mode != "memory" && mode != "artifact")
    return fail("--emit must be graph, fused, plan, memory or artifact, "
                "found '" +
                mode + "'");
  if (mode == "artifact" && configOnly)
    return fail(
        "--config-only builds IR only; use --emit=graph, fused or plan");
  if (expertParallel < 1 || expertParallel > 4096)
    return fail("--ep must be 1 to 4096, found " + Twine(int(expertParallel)));
  if (tensorParallel < 1 || tensorParallel > 4096 ||
      int64_t(tensorParallel) * expertParallel > 4096)
    return fail("--tp must be 1 to 4096 and --tp x --ep at most 4096, found "
                "--tp " +
                Twine(int(tensorParallel)) + " --ep " +
                Twine(int(expertParallel)));
  if (dpAttention && expertParallel < 2)
    return fail("--dp-attention splits the requests over the expert-parallel "
                "groups: it needs --ep N with N > 1 (found --tp " +
                Twine(int(tensorParallel)) + " --ep " +
                Twine(int(expertParallel)) + ")");
  if (gpuDecodeAttention != "vector" && gpuDecodeAttention != "mfma")
    return fail("--gpu-decode-attention must be vector or mfma, found '" +
                gpuDecodeAttention + "'");
  if (gpuFp8Gemm != "bf16" && gpuFp8Gemm != "fp8")
    return fail("--gpu-fp8-gemm must be bf16 or fp8, found '" + gpuFp8Gemm +
                "'");
  if (moeExchange != "gather" && moeExchange != "all-to-all")
    return fail("--moe-exchange must be gather or all-to-all, found '" +
                moeExchange + "'");
  if (moeExchange == "all-to-all" && (!dpAttention || tensorParallel != 1))
    return fail("--moe-exchange all-to-all exchanges the rows of "
                "data-parallel attention: it needs --dp-attention and --tp 1 "
                "(found --tp " +
                Twine(int(tensorParallel)) +
                (dpAttention ? "" : ", no --dp-attention") + ")");
  if (moeExchange == "all-to-all") {
    auto chips = kiln::emit::parseGpuTargets(targets);
    if (chips.isOk() && !chips->empty())
      return fail("--moe-exchange all-to-all runs on CPU ranks only: "
                  "dispatch_rows and combine_rows have no GPU kernels (GPU "
                  "ranks gather rows over RCCL: leave --moe-exchange out), "
                  "found --target=" +
                  targets);
  }
  const int ranks = tensorParallel * expertParallel;
  if (mode == "artifact" && outputPath == "-")
    return fail("an artifact needs an output file: -o model.kiln");

  auto config = glm::parseConfigFile(inputPath);
  if (!config.isOk())
    return fail(config.status().message());

  mlir::MLIRContext context;
  context.loadDialect<KilnDialect, mlir::func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);

  std::optional<glm::Checkpoint> checkpoint;
  std::unique_ptr<glm::WeightSource> weights;
  if (configOnly) {
    weights = glm::makeConfigWeightSource(*config);
  } else {
    auto opened = glm::Checkpoint::open(inputPath);
    if (!opened.isOk())
      return fail(opened.status().message());
    checkpoint.emplace(std::move(opened).value());
    weights = glm::makeCheckpointWeightSource(*checkpoint, *config);
  }

  glm::GraphOptions graphOptions;
  graphOptions.cacheType = cacheType;
  auto loc = mlir::FileLineColLoc::get(&context, inputPath, 0, 0);
  auto module =
      glm::buildGlmModule(&context, loc, *config, *weights, graphOptions);
  if (!module || failed(mlir::verify(*module)))
    return 1;

  if (mode != "graph") {
    mlir::PassManager pm(&context);
    FusePipelineOptions options;
    options.quantize = quantize == "mxfp4";
    options.quantizePolicy = quantizePolicy;
    options.scaleRule = scaleRule;
    buildFusePipeline(pm, options);
    if (failed(pm.run(*module)))
      return 1;
  }

  if (mode == "artifact") {
    CompileOptions options;
    options.targets = targets;
    options.maxFileBytes = maxFileBytes;
    options.specDefault = specDefault;
    options.hostKernels = !noHostKernels;
    options.weightPanels = !noWeightPanels;
    options.ranks = ranks;
    options.tensorParallel = tensorParallel;
    options.attentionDataParallel = dpAttention;
    options.decodeAttention = gpuDecodeAttention;
    options.fp8Gemm = gpuFp8Gemm;
    for (int rank = 0; rank < ranks; ++rank) {
      // Each rank's share, from its own copy of the module.
      mlir::OwningOpRef<mlir::ModuleOp> part = module->clone();
      if (failed(partition(context, *part, rank)))
        return 1;
      options.rank = rank;
      options.outputPath =
          ranks > 1 ? artifact::rankArtifactPath(std::string(outputPath), rank)
                    : std::string(outputPath);
      Status status = compileArtifact(*part, modelFacts(*config), *checkpoint,
                                      inputPath, options);
      if (!status.isOk())
        return fail(status.message());
    }
    return 0;
  }
  if (mode == "memory") {
    bool host = !noHostKernels && kiln::emit::targetsIncludeCpu(targets);
    for (int rank = 0; rank < ranks; ++rank) {
      mlir::OwningOpRef<mlir::ModuleOp> part = module->clone();
      mlir::PassManager pm(&context);
      buildPlanPipeline(pm, host);
      KilnReportMemoryPassOptions report;
      report.label =
          "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
          " (--tp " + std::to_string(int(tensorParallel)) + " --ep " +
          std::to_string(int(expertParallel)) +
          (dpAttention ? " --dp-attention" : "") +
          (moeExchange == "all-to-all" ? " --moe-exchange all-to-all" : "") +
          ")";
      report.deviceGb = deviceGb;
      pm.addPass(createKilnReportMemoryPass(report));
      if (failed(partition(context, *part, rank)) || failed(pm.run(*part)))
        return 1;
    }
    return 0;
  }
  if (failed(partition(context, *module, 0)))
    return 1;
  if (mode == "plan") {
    mlir::PassManager pm(&context);
    buildPlanPipeline(pm, /*hostKernels=*/!noHostKernels &&
                              kiln::emit::targetsIncludeCpu(targets));
    // GPU targets: each dispatch's launches, as the artifact records them.
    auto chips = kiln::emit::parseGpuTargets(targets);
    if (!chips.isOk())
      return fail(chips.status().message());
    if (!chips->empty()) {
      kiln::KilnLowerGpuLaunchesPassOptions gpu;
      gpu.targets = targets;
      gpu.decodeAttention = gpuDecodeAttention;
      gpu.fp8Gemm = gpuFp8Gemm;
      pm.addPass(kiln::createKilnLowerGpuLaunchesPass(gpu));
    }
    if (failed(pm.run(*module)))
      return 1;
  }

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}
