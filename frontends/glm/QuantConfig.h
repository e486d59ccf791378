//===- QuantConfig.h - config.json `quantization_config` --------*- C++ -*-===//
//
// The two quantized formats Kiln reads (GLM.md section 6):
//  * official block FP8: quant_method "fp8", fmt e4m3, dynamic activations,
//    `weight_block_size` [128, 128], `modules_to_not_convert`;
//  * AMD Quark MXFP4: quant_method "quark", global_quant_config.weight =
//    fp4 per_group 32 with e8m0 scales, static; `exclude` fnmatch globs.
// Anything else (compressed-tensors, NVFP4, per-layer Quark overrides, static
// activation scales) is rejected with a message naming the field.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_QUANTCONFIG_H
#define KILN_FRONTENDS_GLM_QUANTCONFIG_H

#include "support/Status.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

enum class QuantMethod {
  None,
  Fp8Block,   // quant_method "fp8"
  QuarkMxfp4, // quant_method "quark"
};

const char *quantMethodName(QuantMethod method);

struct QuantConfig {
  QuantMethod method = QuantMethod::None;

  // Fp8Block: weight_block_size [out, in].
  int64_t fp8BlockOut = 128;
  int64_t fp8BlockIn = 128;

  // QuarkMxfp4: elements per E8M0 scale, and export.pack_method ("reorder"
  // when absent) which decides nibble order (GLM.md 6.2).
  int64_t mxfp4GroupSize = 32;
  std::string quarkPackMethod = "reorder";

  /// FP8 `modules_to_not_convert` or Quark `exclude`, as written.
  std::vector<std::string> excluded;

  /// True when the config says module `moduleName` (an HF module name such
  /// as `model.layers.3.mlp.experts.5.gate_proj`) stays unquantized.
  ///  * None: always true.
  ///  * Quark: some `exclude` entry fnmatch-matches the whole name.
  ///  * FP8: some entry matches whole dot-separated components of the name
  ///    (`mlp.gate` hits `model.layers.1.mlp.gate`, not `...mlp.gate_proj`);
  ///    entries with glob characters are fnmatch-matched. The GLM-5.1 alias
  ///    `self_attn.indexers_proj` also covers `self_attn.indexer.weights_proj`.
  bool isExcluded(std::string_view moduleName) const;
};

/// Parses `quantization_config` (`value` may be null: no quantization).
/// `origin` names the config file in messages.
Result<QuantConfig> parseQuantConfig(const nlohmann::json &value,
                                     const std::string &origin);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_QUANTCONFIG_H
