//===- WeightSource.cpp ---------------------------------------------------===//

#include "frontends/glm/WeightSource.h"

using namespace kiln;
using namespace kiln::glm;

namespace {

class CheckpointSource : public WeightSource {
public:
  CheckpointSource(const Checkpoint &ckpt, const GlmConfig &config)
      : ckpt_(ckpt), catalog_(ckpt, config) {}

  Result<LinearDesc> linear(const std::string &module, int64_t out, int64_t in,
                            bool hasBias) const override {
    KILN_ASSIGN_OR_RETURN(LinearWeight w,
                          catalog_.linear(module, out, in, hasBias));
    LinearDesc d;
    d.encoding = w.encoding;
    d.dtype = w.weight->dtype;
    d.weightName = w.weight->name;
    if (w.scale) {
      d.scaleName = w.scale->name;
      d.scaleShape = w.scale->shape;
    }
    if (w.bias) {
      d.hasBias = true;
      d.biasDtype = w.bias->dtype;
    }
    return d;
  }

  Result<PlainDesc> plain(const std::string &name,
                          const std::vector<int64_t> &shape,
                          bool optional) const override {
    if (optional && !ckpt_.find(name))
      return PlainDesc{};
    KILN_ASSIGN_OR_RETURN(const TensorInfo *t, catalog_.plain(name, shape));
    return PlainDesc{true, t->dtype};
  }

private:
  const Checkpoint &ckpt_;
  WeightCatalog catalog_;
};

class ConfigSource : public WeightSource {
public:
  explicit ConfigSource(const GlmConfig &config) : config_(config) {}

  Result<LinearDesc> linear(const std::string &module, int64_t out, int64_t in,
                            bool hasBias) const override {
    LinearDesc d;
    d.weightName = module + ".weight";
    d.hasBias = hasBias;
    const QuantConfig &q = config_.quant;
    if (q.method == QuantMethod::Fp8Block && !q.isExcluded(module)) {
      d.encoding = WeightEncoding::Fp8Block;
      d.dtype = Dtype::F8_E4M3;
      d.scaleName = module + ".weight_scale_inv";
      d.scaleShape = {(out + q.fp8BlockOut - 1) / q.fp8BlockOut,
                      (in + q.fp8BlockIn - 1) / q.fp8BlockIn};
    } else if (q.method == QuantMethod::QuarkMxfp4 && !q.isExcluded(module) &&
               in % 32 == 0) {
      d.encoding = WeightEncoding::Mxfp4;
      d.dtype = Dtype::U8;
      d.scaleName = module + ".weight_scale";
      d.scaleShape = {out, in / 32};
    }
    return d;
  }

  Result<PlainDesc> plain(const std::string &name, const std::vector<int64_t> &,
                          bool optional) const override {
    // GLM-5.x MTP layers ship no embed_tokens / shared_head.head; GLM-4.x
    // ones do (GLM.md 4.3).
    if (optional && config_.isDsa())
      return PlainDesc{};
    bool f32 = name.find("e_score_correction_bias") != std::string::npos;
    return PlainDesc{true, f32 ? Dtype::F32 : Dtype::BF16};
  }

private:
  const GlmConfig &config_;
};

} // namespace

std::unique_ptr<WeightSource>
kiln::glm::makeCheckpointWeightSource(const Checkpoint &checkpoint,
                                      const GlmConfig &config) {
  return std::make_unique<CheckpointSource>(checkpoint, config);
}

std::unique_ptr<WeightSource>
kiln::glm::makeConfigWeightSource(const GlmConfig &config) {
  return std::make_unique<ConfigSource>(config);
}
