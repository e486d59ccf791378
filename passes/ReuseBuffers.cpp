//===- ReuseBuffers.cpp - Share plan buffers between dead values ----------===//
//
// kiln-reuse-buffers: a linear scan over each kiln_plan.plan's dispatches.
// A buffer is live from the first dispatch that names it to the last (to
// the end when it is an input or an output); when a buffer first appears,
// it takes the most recently freed buffer of the same rows, element type
// and row shape (row kernels read their width from it), else it stays a
// buffer of its own. A buffer is freed after its last dispatch, so no
// dispatch's output shares a buffer with one of its inputs.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/plan/IR/PlanOps.h"

#include "llvm/ADT/DenseMap.h"

#include <limits>
#include <map>
#include <tuple>
#include <vector>

namespace kiln {
#define GEN_PASS_DEF_KILNREUSEBUFFERSPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::plan;

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

using Shape = std::tuple<int32_t, bool, std::vector<int64_t>>;

Shape shapeOf(BufferOp b) {
  return {int32_t(b.getRows()), b.getElementType().isInteger(32),
          std::vector<int64_t>(b.getRow().begin(), b.getRow().end())};
}

void reuse(PlanOp plan) {
  Block &body = plan.getBody().front();
  std::vector<DispatchOp> dispatches(body.getOps<DispatchOp>().begin(),
                                     body.getOps<DispatchOp>().end());
  // Last dispatch naming each buffer; inputs and outputs live to the end.
  llvm::DenseMap<Operation *, int64_t> last;
  for (auto b : body.getOps<BufferOp>())
    last[b] = b.getInput() ? kForever : -1;
  for (auto [i, d] : llvm::enumerate(dispatches))
    for (Value v : d.getBuffers())
      last[v.getDefiningOp()] = std::max(last[v.getDefiningOp()], int64_t(i));
  for (Value v : cast<ReturnOp>(body.back()).getOutputs())
    last[v.getDefiningOp()] = kForever;

  // Buffers that stay, in the order they were first named; when each is
  // free again.
  std::vector<BufferOp> kept;
  llvm::DenseMap<Operation *, int64_t> freeAfter;
  for (auto b : body.getOps<BufferOp>())
    if (b.getInput()) {
      kept.push_back(b);
      freeAfter[b] = kForever;
    }
  std::map<Shape, std::vector<BufferOp>> pool;
  llvm::DenseMap<Operation *, bool> seen;
  for (auto [i, d] : llvm::enumerate(dispatches)) {
    for (Value v : llvm::to_vector(d.getBuffers())) {
      auto b = v.getDefiningOp<BufferOp>();
      if (b.getInput() || seen[b])
        continue;
      seen[b] = true;
      std::vector<BufferOp> &free = pool[shapeOf(b)];
      int64_t until = std::max(int64_t(i), last[b]);
      if (free.empty()) {
        kept.push_back(b);
        freeAfter[b] = until;
        continue;
      }
      BufferOp into = free.back();
      free.pop_back();
      b.getResult().replaceAllUsesWith(into.getResult());
      b.erase();
      freeAfter[into] = until;
    }
    for (BufferOp b : kept)
      if (freeAfter[b] == int64_t(i)) {
        pool[shapeOf(b)].push_back(b);
        freeAfter[b] = -1;
      }
  }
  nameBuffers(plan);
}

struct ReuseBuffersPass
    : kiln::impl::KilnReuseBuffersPassBase<ReuseBuffersPass> {
  void runOnOperation() override {
    for (auto plan : getOperation().getOps<PlanOp>())
      reuse(plan);
  }
};

} // namespace
