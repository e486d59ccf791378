//===- WeightSource.h - What the graph builder knows of weights -*- C++ -*-===//
//
// The graph builder asks, per linear layer and per plain tensor, how it is
// stored. Two answers: from a real checkpoint (the tensors present, through
// WeightCatalog), or from config.json alone (`--config-only`), where the
// quantization_config decides the encodings.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_WEIGHTSOURCE_H
#define KILN_FRONTENDS_GLM_WEIGHTSOURCE_H

#include "frontends/glm/Checkpoint.h"
#include "frontends/glm/Config.h"
#include "frontends/glm/WeightCatalog.h"

#include <memory>

namespace kiln::glm {

struct LinearDesc {
  WeightEncoding encoding = WeightEncoding::Dense;
  Dtype dtype = Dtype::BF16; // element type of a Dense weight
  std::string weightName;    // "<m>.weight"
  std::string scaleName;     // weight_scale_inv / weight_scale
  std::vector<int64_t> scaleShape;
  bool hasBias = false;
  Dtype biasDtype = Dtype::F32;
};

struct PlainDesc {
  bool present = false;
  Dtype dtype = Dtype::BF16;
};

class WeightSource {
public:
  virtual ~WeightSource() = default;
  virtual Result<LinearDesc> linear(const std::string &module, int64_t out,
                                    int64_t in, bool hasBias) const = 0;
  /// An optional tensor that is absent gives `present = false`; a required
  /// one is an error.
  virtual Result<PlainDesc> plain(const std::string &name,
                                  const std::vector<int64_t> &shape,
                                  bool optional) const = 0;
};

/// Answers from the tensors of `checkpoint` (both must outlive the source).
std::unique_ptr<WeightSource>
makeCheckpointWeightSource(const Checkpoint &checkpoint,
                           const GlmConfig &config);

/// Answers from config.json alone.
std::unique_ptr<WeightSource> makeConfigWeightSource(const GlmConfig &config);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_WEIGHTSOURCE_H
