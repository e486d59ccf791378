//===- MoeRules.h - GLM MoE routing settings: the one rule ------*- C++ -*-===//
//
// Which routing settings the router can honour (GLM.md §3.2): the dialect's
// kiln.moe verifier, the GLM config reader, the plan validator and the GPU
// route kernel's spec check all ask this function, so they agree.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_MOERULES_H
#define KILN_SUPPORT_ABI_MOERULES_H

#include <cstdint>
#include <string>

namespace kiln::abi {

struct MoeRouting {
  int64_t experts = 0;   // n_routed_experts
  int64_t topK = 0;      // num_experts_per_tok
  int64_t nGroup = 1;    // n_group
  int64_t topkGroup = 1; // topk_group
};

/// The largest block size a plan may ask for.
inline constexpr int64_t kMaxMoeBlockSize = 4096;

struct MoeRuleError {
  std::string field;   // "top_k", "n_group", "topk_group" or "block_size"
  std::string message; // "must be in [1, 4] (the expert count), found 5"
  explicit operator bool() const { return !field.empty(); }
};

/// The first rule `r` breaks, or an empty error.
MoeRuleError checkMoeRouting(const MoeRouting &r);
/// The rule for the token rows per expert block of the routed GEMMs.
MoeRuleError checkMoeBlockSize(int64_t blockSize);

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_MOERULES_H
