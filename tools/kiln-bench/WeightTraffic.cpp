//===- WeightTraffic.cpp --------------------------------------------------===//

#include "tools/kiln-bench/WeightTraffic.h"

#include "support/abi/KernelAbi.h"

#include <cmath>
#include <set>

using namespace kiln;

namespace {

double weightBytes(abi::Kernel, const fb::Weight *w) {
  double bytes = double(w->data()->size());
  if (w->scales())
    bytes += double(w->scales()->size());
  return bytes;
}

/// Multiply-adds per row of activations: a matrix's elements (one per output
/// and input column). Embedding lookups and vectors (norm weights) do none.
double weightMacs(abi::Kernel kernel, const fb::Weight *w) {
  if (kernel == abi::Kernel::Embedding || w->shape()->size() < 2)
    return 0;
  double elements = 1;
  for (uint32_t d : *w->shape())
    elements *= double(d);
  return elements;
}

/// Sums measure(kernel, weight) over the weights one step of `plan` reads
/// for `batch` sequences: each dispatch's weights once (a weight read by
/// several dispatches counts each time), an embedding's `batch` rows, and of
/// a routed-expert stack the expected number of distinct experts the batch
/// selects.
template <class Measure>
double sumOverWeights(const artifact::Artifact &artifact, const fb::Plan &plan,
                      int64_t batch, Measure measure) {
  const fb::Artifact *meta = artifact.meta();
  double total = 0;
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
      double amount = measure(kernel, w);
      if (kernel == abi::Kernel::Embedding) {
        amount = amount / double(w->shape()->Get(0)) * double(batch);
      } else if (kernel == abi::Kernel::Moe && i >= 3 && i <= 5) {
        // Routed expert stacks: the experts the batch selects.
        double experts = double(w->shape()->Get(0));
        const fb::MoeParams *moe = d->params_as_MoeParams();
        double k = moe ? double(moe->top_k()) : experts;
        double distinct =
            experts * (1.0 - std::pow(1.0 - k / experts, double(batch)));
        amount = amount / experts * distinct;
      }
      total += amount;
    }
  }
  return total;
}

} // namespace

double kiln::bench::planWeightBytes(const artifact::Artifact &artifact,
                                    const fb::Plan &plan, int64_t batch) {
  return sumOverWeights(artifact, plan, batch, weightBytes);
}

double kiln::bench::planMatmulFlopsPerToken(const artifact::Artifact &artifact,
                                            const fb::Plan &plan) {
  // One token: its own top-k experts (the batch-1 expectation is exactly k).
  return 2.0 * sumOverWeights(artifact, plan, 1, weightMacs);
}
