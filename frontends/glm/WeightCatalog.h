//===- WeightCatalog.h - How each weight is stored --------------*- C++ -*-===//
//
// Decides each linear layer's encoding from the tensors present (GLM.md 9.1:
// derive precision from the checkpoint, not from config globs alone):
//  * Dense:    `<m>.weight` BF16/F16/F32 [out, in];
//  * Fp8Block: `<m>.weight` F8_E4M3 [out, in] + `<m>.weight_scale_inv` F32
//              [ceil(out/bo), ceil(in/bi)] (block [bo, bi] from the config,
//              128 x 128 by default);
//  * Mxfp4:    `<m>.weight` U8 [out, in/2] + `<m>.weight_scale` U8
//              [out, in/32].
// It then cross-checks the config's quantization_config: a quantized tensor
// the config excludes (or a quantized tensor with no quantization_config, or
// of the other method) is an error, and so is a dense tensor the config says
// is quantized -- except in the MTP layers, whose format published configs
// do not describe reliably (GLM.md 9.4-9.5), unless `strictMtp` is set.
// Missing tensors, wrong shapes and wrong dtypes are errors naming the
// tensor, what was expected and what was found.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_WEIGHTCATALOG_H
#define KILN_FRONTENDS_GLM_WEIGHTCATALOG_H

#include "frontends/glm/Checkpoint.h"
#include "frontends/glm/Config.h"
#include "frontends/glm/ModelLayout.h"
#include "support/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::glm {

enum class WeightEncoding { Dense, Fp8Block, Mxfp4 };

const char *weightEncodingName(WeightEncoding encoding);

struct LinearWeight {
  std::string module;
  WeightEncoding encoding = WeightEncoding::Dense;
  int64_t out = 0;
  int64_t in = 0;
  const TensorInfo *weight = nullptr;
  /// weight_scale_inv (Fp8Block) or weight_scale (Mxfp4); null for Dense.
  const TensorInfo *scale = nullptr;
  /// `<m>.bias` when the layer has one.
  const TensorInfo *bias = nullptr;
};

struct CatalogOptions {
  /// Cross-check tensor encodings against quantization_config.
  bool checkQuantConfig = true;
  /// Also require MTP-layer linears the config says are quantized to be
  /// quantized.
  bool strictMtp = false;
};

/// Every weight of a ModelLayout, resolved.
struct ResolvedWeights {
  std::vector<LinearWeight> linears; // optional ones absent are skipped
  std::vector<const TensorInfo *> plains;
  /// Checkpoint tensors no spec claimed, sorted. Not an error by itself.
  std::vector<std::string> unclaimed;
};

class WeightCatalog {
public:
  /// `checkpoint` and `config` must outlive the catalog.
  WeightCatalog(const Checkpoint &checkpoint, const GlmConfig &config,
                CatalogOptions options = {});

  /// Resolves linear layer `module` (an HF module name without `.weight`)
  /// with logical shape [out, in]. With `hasBias`, `<m>.bias` [out] (BF16 or
  /// F32) is required; without, its presence is an error.
  Result<LinearWeight> linear(std::string_view module, int64_t out, int64_t in,
                              bool hasBias = false) const;

  /// A non-linear tensor (norm, bias, router, embedding) of exactly `shape`,
  /// stored as BF16 or F32.
  Result<const TensorInfo *> plain(std::string_view name,
                                   const std::vector<int64_t> &shape) const;

  /// Resolves every spec of `layout`; fails on the first missing, malformed
  /// or inconsistent weight, or on a tensor under a forbidden prefix.
  Result<ResolvedWeights> resolve(const ModelLayout &layout) const;

private:
  Status checkAgainstConfig(const LinearWeight &weight) const;
  bool isMtpModule(std::string_view module) const;

  const Checkpoint &ckpt_;
  const GlmConfig &config_;
  CatalogOptions options_;
};

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_WEIGHTCATALOG_H
