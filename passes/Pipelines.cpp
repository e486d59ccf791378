//===- Pipelines.cpp - Kiln's named pipelines and registration ------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildFusePipeline(OpPassManager &pm,
                             const FusePipelineOptions &options) {
  if (options.quantize) {
    KilnQuantizeMxfp4PassOptions q;
    q.policy = options.quantizePolicy;
    q.rule = options.scaleRule;
    pm.addPass(createKilnQuantizeMxfp4Pass(q));
  }
  pm.addPass(createCanonicalizerPass());
  KilnFuseMoeRoutingPassOptions moe;
  moe.blockSize = options.moeBlockSize;
  pm.addPass(createKilnFuseMoeRoutingPass(moe));
  pm.addPass(createKilnFuseMxDequantGemmPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createKilnCheckFusedPass());
}

void kiln::buildPlanPipeline(OpPassManager &pm, bool hostKernels) {
  pm.addPass(createKilnBuildPlanPass());
  pm.addPass(createKilnReuseBuffersPass());
  if (hostKernels)
    pm.addPass(createKilnSelectHostKernelsPass());
}

namespace {
struct FusePipelineCLOptions
    : public PassPipelineOptions<FusePipelineCLOptions> {
  Option<bool> quantize{*this, "quantize",
                        llvm::cl::desc("Quantize weights to MXFP4 first"),
                        llvm::cl::init(false)};
  Option<std::string> policy{*this, "policy",
                             llvm::cl::desc("Weight groups to quantize"),
                             llvm::cl::init("experts")};
  Option<std::string> rule{*this, "rule",
                           llvm::cl::desc("MXFP4 scale rule: even or floor"),
                           llvm::cl::init("even")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("MoE token-group block size"),
                            llvm::cl::init(16)};
};
} // namespace

void kiln::registerAllKilnPasses() {
  registerKilnPasses();
  PassPipelineRegistration<FusePipelineCLOptions>(
      "kiln-fuse-graph",
      "Graph level to fused level: [quantize] -> fuse MoE routing -> fuse "
      "dequant GEMMs -> check the backend contract",
      [](OpPassManager &pm, const FusePipelineCLOptions &cl) {
        FusePipelineOptions o;
        o.quantize = cl.quantize;
        o.quantizePolicy = cl.policy;
        o.scaleRule = cl.rule;
        o.moeBlockSize = cl.blockSize;
        buildFusePipeline(pm, o);
      });
  PassPipelineRegistration<>(
      "kiln-build-plans",
      "Fused level to the plan level: build plans -> reuse buffers -> "
      "select host kernels",
      [](OpPassManager &pm) { buildPlanPipeline(pm, /*hostKernels=*/true); });
}
