//===- SelectHostKernels.cpp - Which kernels run as compiled x86 code -----===//
//
// kiln-select-host-kernels: the kernels the plans dispatch that the x86-64
// generator implements (passes/codegen/x86) go in the module attribute
// `kiln_plan.host_kernels`, sorted; the artifact writer compiles exactly
// those into the host code object, and the CPU runtime runs them there
// instead of its own C++ loops.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/plan/IR/PlanOps.h"
#include "passes/codegen/x86/X86Codegen.h"

#include <set>

namespace kiln {
#define GEN_PASS_DEF_KILNSELECTHOSTKERNELSPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct SelectHostKernelsPass
    : kiln::impl::KilnSelectHostKernelsPassBase<SelectHostKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::set<std::string> used;
    module.walk([&](plan::DispatchOp d) { used.insert(d.getKernel().str()); });
    std::set<std::string> selected;
    for (const std::string &k : x86::hostKernelNames())
      if (used.count(k))
        selected.insert(k);
    Builder b(module.getContext());
    SmallVector<Attribute> names;
    for (const std::string &k : selected)
      names.push_back(b.getStringAttr(k));
    module->setAttr(plan::PlanDialect::kHostKernelsAttrName,
                    b.getArrayAttr(names));
  }
};

} // namespace
