//===- MoeRules.cpp - GLM MoE routing settings: the one rule -------------===//

#include "support/abi/MoeRules.h"

namespace kiln::abi {

MoeRuleError checkMoeRouting(const MoeRouting &r) {
  auto err = [](const char *field, std::string message) {
    return MoeRuleError{field, std::move(message)};
  };
  const std::string e = std::to_string(r.experts);
  if (r.topK < 1 || r.topK > r.experts)
    return err("top_k", "must be in [1, " + e + "] (the expert count), found " +
                            std::to_string(r.topK));
  if (r.nGroup < 1 || r.experts % r.nGroup != 0)
    return err("n_group", "must be positive and divide the expert count (" + e +
                              "), found " + std::to_string(r.nGroup));
  if (r.topkGroup < 1 || r.topkGroup > r.nGroup)
    return err("topk_group", "must be in [1, " + std::to_string(r.nGroup) +
                                 "] (n_group), found " +
                                 std::to_string(r.topkGroup));
  int64_t selectable = r.topkGroup * (r.experts / r.nGroup);
  if (r.topK > selectable)
    return err("top_k", std::to_string(r.topK) + " exceeds the " +
                            std::to_string(selectable) +
                            " experts in topk_group groups");
  return {};
}

MoeRuleError checkMoeBlockSize(int64_t blockSize) {
  if (blockSize < 1 || blockSize > kMaxMoeBlockSize)
    return {"block_size", "must be in [1, " + std::to_string(kMaxMoeBlockSize) +
                              "], found " + std::to_string(blockSize)};
  return {};
}

} // namespace kiln::abi
