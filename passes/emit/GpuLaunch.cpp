//===- GpuLaunch.cpp ------------------------------------------------------===//

#include "passes/emit/GpuLaunch.h"

#include <sstream>

using namespace kiln;
using namespace kiln::emit;

std::string GpuDispatchLowering::key() const {
  std::ostringstream os;
  if (communicatorOnly)
    os << "communicator";
  for (const GpuLaunchSpec &l : launches) {
    std::string symbol = l.spec.symbol();
    os << symbol.substr(0, symbol.rfind('_')) << "(";
    for (const GpuGridAxis &g : l.grid)
      os << g.mul << "," << g.add << "," << g.div << "," << g.rowsOf << ";";
    for (const GpuArgRef &a : l.args)
      os << int(a.part) << ":" << a.index << ",";
    os << ")";
  }
  for (const GpuScratchSpec &s : scratch)
    os << "[" << s.perRow << "," << s.fixed << "," << s.perPosition << "]";
  return os.str();
}

bool GpuDispatchContext::isBuffer(size_t i) const {
  return i < dispatch.args.size() && dispatch.args[i].kind == ArgKind::Buffer;
}
bool GpuDispatchContext::isWeight(size_t i) const {
  return i < dispatch.args.size() && dispatch.args[i].kind == ArgKind::Weight;
}
bool GpuDispatchContext::isCache(size_t i) const {
  return i < dispatch.args.size() && dispatch.args[i].kind == ArgKind::Cache;
}
bool GpuDispatchContext::isNone(size_t i) const {
  return i < dispatch.args.size() && dispatch.args[i].kind == ArgKind::None;
}
const BufferSpec &GpuDispatchContext::buffer(size_t i) const {
  return plan.buffers[dispatch.args[i].index];
}
const WeightSpec &GpuDispatchContext::weight(size_t i) const {
  return program.weights[dispatch.args[i].index];
}
const StoredForm &GpuDispatchContext::stored(size_t i) const {
  return weights[dispatch.args[i].index];
}
const CacheSpec &GpuDispatchContext::cache(size_t i) const {
  return program.caches[dispatch.args[i].index];
}

std::optional<GpuDispatchLowering>
kiln::emit::lowerGpuDispatch(const GpuDispatchContext &context) {
  using Lower =
      std::optional<GpuDispatchLowering> (*)(const GpuDispatchContext &);
  for (Lower lower : {lowerBasicDispatch, lowerDataDispatch, lowerMoeDispatch,
                      lowerAttentionDispatch}) {
    std::optional<GpuDispatchLowering> lowering = lower(context);
    if (!lowering)
      continue;
    // A shape the kernels do not cover stays on the CPU.
    bool valid = lowering->communicatorOnly != !lowering->launches.empty();
    for (const GpuLaunchSpec &l : lowering->launches)
      valid = valid && l.spec.validate().empty();
    if (valid)
      return lowering;
  }
  return std::nullopt;
}
