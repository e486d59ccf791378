//===- PlanReader.cpp - kiln_plan IR to the artifact's program ------------===//

#include "passes/emit/ProgramSpec.h"

#include "dialects/plan/IR/PlanOps.h"
#include "passes/Passes.h"
#include "passes/emit/EmitPasses.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::emit;

namespace {

Result<ElemType> elemType(plan::WeightOp w) {
  Type t = w.getDtype();
  if (t.isF32())
    return ElemType::F32;
  if (t.isBF16())
    return ElemType::BF16;
  if (t.isF16())
    return ElemType::F16;
  if (isa<Float8E4M3FNType>(t))
    return ElemType::F8E4M3;
  if (isa<Float4E2M1FNType>(t))
    return ElemType::F4E2M1;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return makeError(StatusCode::InvalidArgument, "weight @",
                   w.getSymName().str(), ": no artifact element type for ", s);
}

WeightKind weightKind(plan::WeightKind kind) {
  switch (kind) {
  case plan::WeightKind::dense:
    return WeightKind::Dense;
  case plan::WeightKind::fp8_block:
    return WeightKind::Fp8Block;
  case plan::WeightKind::mxfp4_raw:
    return WeightKind::Mxfp4Raw;
  case plan::WeightKind::mxfp4_quant:
    return WeightKind::Mxfp4Quant;
  case plan::WeightKind::mxfp4_dequant:
    return WeightKind::Mxfp4Dequant;
  }
  return WeightKind::Dense;
}

} // namespace

Result<ProgramSpec> kiln::emit::readPrograms(ModuleOp module) {
  ProgramSpec program;
  llvm::StringMap<ArgSpec> symbols;
  for (auto w : module.getOps<plan::WeightOp>()) {
    WeightSpec spec;
    spec.kind = weightKind(w.getKind());
    spec.name = w.getSource().str();
    spec.scaleName = w.getScales() ? w.getScales()->str() : "";
    spec.shape.assign(w.getShape().begin(), w.getShape().end());
    KILN_ASSIGN_OR_RETURN(spec.dtype, elemType(w));
    spec.evenRule = !w.getFloor();
    spec.experts = w.getExperts();
    spec.firstExpert = w.getExpertsFrom();
    if (auto slice = w.getSlice()) {
      spec.sliceAxis = (*slice)[0];
      spec.sliceFirst = (*slice)[1];
    }
    symbols[w.getSymName()] = {ArgKind::Weight,
                               uint32_t(program.weights.size())};
    program.weights.push_back(std::move(spec));
  }
  for (auto c : module.getOps<plan::CacheOp>()) {
    symbols[c.getSymName()] = {ArgKind::Cache, uint32_t(program.caches.size())};
    program.caches.push_back({c.getSymName().str(), int64_t(c.getWidth()),
                              c.getElementType().isBF16(), c.getOwner().str()});
  }
  for (auto p : module.getOps<plan::PlanOp>()) {
    PlanSpec spec;
    spec.name = p.getSymName().str();
    llvm::DenseMap<Value, uint32_t> index;
    for (Operation &op : p.getBody().front()) {
      if (auto b = dyn_cast<plan::BufferOp>(op)) {
        index[b] = uint32_t(spec.buffers.size());
        if (b.getInput())
          spec.inputs.push_back(index[b]);
        spec.buffers.push_back(
            {b.getName().str(), static_cast<abi::RowsKind>(b.getRows()),
             b.getElementType().isInteger(32),
             std::vector<int64_t>(b.getRow().begin(), b.getRow().end())});
      } else if (auto d = dyn_cast<plan::DispatchOp>(op)) {
        DispatchSpec ds;
        ds.kernel = *plan::kernelNamed(d.getKernel());
        for (Attribute a : d.getArgs()) {
          if (auto i = dyn_cast<IntegerAttr>(a))
            ds.args.push_back(
                {ArgKind::Buffer, index.lookup(d.getBuffers()[i.getInt()])});
          else if (auto s = dyn_cast<FlatSymbolRefAttr>(a))
            ds.args.push_back(symbols.lookup(s.getValue()));
          else
            ds.args.push_back({ArgKind::None, 0});
        }
        (void)plan::paramsFromAttr(ds.kernel, d.getParams(), ds.params);
        llvm::raw_string_ostream os(ds.location);
        d.getLoc().print(os);
        spec.dispatches.push_back(std::move(ds));
      } else if (auto r = dyn_cast<plan::ReturnOp>(op)) {
        for (Value v : r.getOutputs())
          spec.outputs.push_back(index.lookup(v));
      }
    }
    program.plans.push_back(std::move(spec));
  }
  if (auto names = module->getAttrOfType<ArrayAttr>(
          plan::PlanDialect::kHostKernelsAttrName))
    for (Attribute a : names)
      program.hostKernels.push_back(cast<StringAttr>(a).str());
  return program;
}

Result<ProgramSpec> kiln::emit::buildPrograms(
    ModuleOp module, bool hostKernels, const std::string &gpuTargets,
    const std::string &decodeAttention, const std::string &fp8Gemm) {
  MLIRContext *context = module.getContext();
  std::string errors;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return success();
    llvm::raw_string_ostream os(errors);
    if (!errors.empty())
      os << "; ";
    os << d.getLocation() << ": " << d.str();
    return success();
  });
  PassManager pm(context);
  buildPlanPipeline(pm, hostKernels);
  if (!gpuTargets.empty()) {
    KilnLowerGpuLaunchesPassOptions gpu;
    gpu.targets = gpuTargets;
    gpu.decodeAttention = decodeAttention;
    gpu.fp8Gemm = fp8Gemm;
    pm.addPass(createKilnLowerGpuLaunchesPass(gpu));
  }
  if (failed(pm.run(module)))
    return makeError(StatusCode::InvalidArgument, errors);
  return readPrograms(module);
}
