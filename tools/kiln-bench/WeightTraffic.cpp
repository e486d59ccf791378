//===- WeightTraffic.cpp --------------------------------------------------===//

#include "tools/kiln-bench/WeightTraffic.h"

#include "support/abi/KernelAbi.h"

#include <cmath>
#include <set>

using namespace kiln;

namespace {

double weightBytes(const fb::Weight *w) {
  double bytes = double(w->data()->size());
  if (w->scales())
    bytes += double(w->scales()->size());
  return bytes;
}

} // namespace

double kiln::bench::planWeightBytes(const artifact::Artifact &artifact,
                                    const fb::Plan &plan, int64_t batch) {
  const fb::Artifact *meta = artifact.meta();
  double total = 0;
  // A weight read by several dispatches of one step is read once from
  // memory only if it stays in cache; count each dispatch's read.
  for (const fb::Dispatch *d : *plan.dispatches()) {
    abi::Kernel kernel;
    if (!abi::kernelFromName(meta->kernels()->Get(d->kernel())->name()->str(),
                             kernel))
      continue;
    int argIndex = 0;
    for (const fb::Arg *a : *d->args()) {
      int i = argIndex++;
      if (a->kind() != fb::ArgKind::Weight)
        continue;
      const fb::Weight *w = meta->weights()->Get(a->index());
      double bytes = weightBytes(w);
      if (kernel == abi::Kernel::Embedding) {
        bytes = bytes / double(w->shape()->Get(0)) * double(batch);
      } else if (kernel == abi::Kernel::Moe && i >= 3 && i <= 5) {
        // Routed expert stacks: the experts the batch selects.
        double experts = double(w->shape()->Get(0));
        const fb::MoeParams *moe = d->params_as_MoeParams();
        double k = moe ? double(moe->top_k()) : experts;
        double distinct =
            experts * (1.0 - std::pow(1.0 - k / experts, double(batch)));
        bytes = bytes / experts * distinct;
      }
      total += bytes;
    }
  }
  return total;
}
