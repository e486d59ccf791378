//===- WeightCatalog.cpp - How each weight is stored ----------------------===//

#include "frontends/glm/WeightCatalog.h"

#include "frontends/glm/Quote.h"

#include <algorithm>
#include <set>

namespace kiln::glm {

const char *weightEncodingName(WeightEncoding encoding) {
  switch (encoding) {
  case WeightEncoding::Dense:
    return "dense";
  case WeightEncoding::Fp8Block:
    return "fp8-block";
  case WeightEncoding::Mxfp4:
    return "mxfp4";
  }
  return "unknown";
}

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string expectedText(const std::vector<Dtype> &dtypes,
                         const std::vector<int64_t> &shape) {
  std::string text;
  for (size_t i = 0; i < dtypes.size(); ++i)
    text += (i ? (i + 1 == dtypes.size() ? " or " : ", ") : "") +
            std::string(dtypeName(dtypes[i]));
  return text + shapeToString(shape);
}

// Checks that `t` has one of `dtypes` and exactly `shape`.
Status expectTensor(const TensorInfo &t, const std::vector<Dtype> &dtypes,
                    const std::vector<int64_t> &shape, const char *role) {
  bool dtypeOk =
      std::find(dtypes.begin(), dtypes.end(), t.dtype) != dtypes.end();
  if (dtypeOk && t.shape == shape)
    return Status::ok();
  return makeError(StatusCode::InvalidArgument, t.file, ": tensor ",
                   quoteForMessage(t.name), " (", role, "): expected ",
                   expectedText(dtypes, shape), ", found ", t.describe());
}

// Siblings that belong to quantization schemes Kiln does not read.
constexpr const char *kUnsupportedSiblings[] = {
    "input_scale", "weight_scale_2", "weight_zero_point", "weight_packed",
    "weight_global_scale"};

} // namespace

WeightCatalog::WeightCatalog(const Checkpoint &checkpoint,
                             const GlmConfig &config, CatalogOptions options)
    : ckpt_(checkpoint), config_(config), options_(options) {}

bool WeightCatalog::isMtpModule(std::string_view module) const {
  std::string_view prefix = "model.layers.";
  if (module.substr(0, prefix.size()) != prefix)
    return false;
  module.remove_prefix(prefix.size());
  int64_t layer = 0;
  size_t digits = 0;
  while (digits < module.size() && digits < 9 && module[digits] >= '0' &&
         module[digits] <= '9')
    layer = layer * 10 + (module[digits++] - '0');
  if (digits == 0 || digits >= module.size() || module[digits] != '.')
    return false;
  return config_.isMtpLayer(layer);
}

Result<LinearWeight> WeightCatalog::linear(std::string_view module, int64_t out,
                                           int64_t in, bool hasBias) const {
  std::string m(module);
  if (m.size() > 7 && m.compare(m.size() - 7, 7, ".weight") == 0)
    return makeError(StatusCode::InvalidArgument, "linear ", quoteForMessage(m),
                     ": expected a module name, without '.weight'");
  LinearWeight result;
  result.module = m;
  result.out = out;
  result.in = in;

  for (const char *sibling : kUnsupportedSiblings)
    if (const TensorInfo *t = ckpt_.find(m + "." + sibling))
      return makeError(StatusCode::InvalidArgument, t->file, ": tensor ",
                       quoteForMessage(t->name), ": '", sibling,
                       "' belongs to a quantization scheme Kiln does not "
                       "support (expected block FP8 or MXFP4)");

  const TensorInfo *weight = ckpt_.find(m + ".weight");
  if (!weight)
    return makeError(StatusCode::NotFound, ckpt_.path(), ": tensor ",
                     quoteForMessage(m + ".weight"),
                     " is missing (expected the [", out, ", ", in,
                     "] weight of linear ", quoteForMessage(m), ")");
  result.weight = weight;
  const TensorInfo *scaleInv = ckpt_.find(m + ".weight_scale_inv");
  const TensorInfo *scale = ckpt_.find(m + ".weight_scale");

  if (scaleInv && scale)
    return makeError(StatusCode::InvalidArgument, ckpt_.path(), ": linear ",
                     quoteForMessage(m),
                     " has both weight_scale_inv (FP8) and weight_scale "
                     "(MXFP4); expected at most one");
  if (scaleInv) {
    int64_t bo = 128, bi = 128;
    if (config_.quant.method == QuantMethod::Fp8Block) {
      bo = config_.quant.fp8BlockOut;
      bi = config_.quant.fp8BlockIn;
    }
    result.encoding = WeightEncoding::Fp8Block;
    result.scale = scaleInv;
    KILN_RETURN_IF_ERROR(
        expectTensor(*weight, {Dtype::F8_E4M3}, {out, in}, "FP8 weight"));
    KILN_RETURN_IF_ERROR(expectTensor(*scaleInv, {Dtype::F32},
                                      {ceilDiv(out, bo), ceilDiv(in, bi)},
                                      "FP8 block scale"));
  } else if (scale) {
    result.encoding = WeightEncoding::Mxfp4;
    result.scale = scale;
    if (in % 32 != 0)
      return makeError(StatusCode::InvalidArgument, weight->file, ": tensor ",
                       quoteForMessage(weight->name),
                       " is MXFP4 but in_features ", in,
                       " is not a multiple of the 32-element group");
    KILN_RETURN_IF_ERROR(
        expectTensor(*weight, {Dtype::U8}, {out, in / 2}, "MXFP4 weight"));
    KILN_RETURN_IF_ERROR(
        expectTensor(*scale, {Dtype::U8}, {out, in / 32}, "MXFP4 E8M0 scale"));
  } else {
    if (weight->dtype == Dtype::F8_E4M3 || weight->dtype == Dtype::U8)
      return makeError(StatusCode::NotFound, weight->file, ": tensor ",
                       quoteForMessage(weight->name), " is ",
                       weight->describe(), " but its scale ",
                       quoteForMessage(m + (weight->dtype == Dtype::U8
                                                ? ".weight_scale"
                                                : ".weight_scale_inv")),
                       " is missing");
    KILN_RETURN_IF_ERROR(expectTensor(
        *weight, {Dtype::BF16, Dtype::F16, Dtype::F32}, {out, in}, "weight"));
  }

  const TensorInfo *bias = ckpt_.find(m + ".bias");
  if (hasBias) {
    KILN_ASSIGN_OR_RETURN(result.bias, plain(m + ".bias", {out}));
  } else if (bias) {
    return makeError(StatusCode::InvalidArgument, bias->file, ": tensor ",
                     quoteForMessage(bias->name), ": linear ",
                     quoteForMessage(m), " is expected to have no bias");
  }
  if (options_.checkQuantConfig)
    KILN_RETURN_IF_ERROR(checkAgainstConfig(result));
  return result;
}

Status WeightCatalog::checkAgainstConfig(const LinearWeight &w) const {
  const QuantConfig &q = config_.quant;
  const TensorInfo &t = *w.weight;
  if (w.encoding != WeightEncoding::Dense) {
    if (q.method == QuantMethod::None)
      return makeError(StatusCode::InvalidArgument, t.file, ": tensor ",
                       quoteForMessage(t.name), " is quantized (",
                       weightEncodingName(w.encoding), ") but ", config_.source,
                       " has no quantization_config");
    WeightEncoding configured = q.method == QuantMethod::Fp8Block
                                    ? WeightEncoding::Fp8Block
                                    : WeightEncoding::Mxfp4;
    if (w.encoding != configured)
      return makeError(StatusCode::InvalidArgument, t.file, ": tensor ",
                       quoteForMessage(t.name), " is ",
                       weightEncodingName(w.encoding), " but ", config_.source,
                       " has quantization_config.quant_method \"",
                       quantMethodName(q.method), "\"");
    if (q.isExcluded(w.module))
      return makeError(StatusCode::InvalidArgument, t.file, ": tensor ",
                       quoteForMessage(t.name), " is quantized (",
                       weightEncodingName(w.encoding), ", ", t.describe(),
                       ") but ", config_.source,
                       " quantization_config excludes module ",
                       quoteForMessage(w.module));
    return Status::ok();
  }
  if (q.method == QuantMethod::None || q.isExcluded(w.module))
    return Status::ok();
  if (isMtpModule(w.module) && !options_.strictMtp)
    return Status::ok();
  return makeError(StatusCode::InvalidArgument, t.file, ": tensor ",
                   quoteForMessage(t.name), " is unquantized (", t.describe(),
                   ") but ", config_.source,
                   " quantization_config (quant_method \"",
                   quantMethodName(q.method), "\") does not exclude module ",
                   quoteForMessage(w.module), ", so it should be quantized");
}

Result<const TensorInfo *>
WeightCatalog::plain(std::string_view name,
                     const std::vector<int64_t> &shape) const {
  const TensorInfo *t = ckpt_.find(name);
  if (!t)
    return makeError(StatusCode::NotFound, ckpt_.path(), ": tensor ",
                     quoteForMessage(name), " is missing (expected ",
                     expectedText({Dtype::BF16, Dtype::F32}, shape), ")");
  KILN_RETURN_IF_ERROR(
      expectTensor(*t, {Dtype::BF16, Dtype::F32}, shape, "plain tensor"));
  return t;
}

Result<ResolvedWeights>
WeightCatalog::resolve(const ModelLayout &layout) const {
  ResolvedWeights out;
  std::set<std::string> claimed;
  for (const std::string &prefix : layout.forbiddenPrefixes) {
    auto it =
        std::lower_bound(ckpt_.names().begin(), ckpt_.names().end(), prefix);
    if (it != ckpt_.names().end() && it->compare(0, prefix.size(), prefix) == 0)
      return makeError(StatusCode::InvalidArgument, ckpt_.find(*it)->file,
                       ": tensor ", quoteForMessage(*it), " is present, but ",
                       config_.source,
                       " makes its layer's indexer \"shared\" (expected no "
                       "tensors under ",
                       quoteForMessage(prefix), ")");
  }
  for (const LinearSpec &spec : layout.linears) {
    if (spec.optional && !ckpt_.find(spec.module + ".weight"))
      continue;
    KILN_ASSIGN_OR_RETURN(LinearWeight w,
                          linear(spec.module, spec.out, spec.in, spec.hasBias));
    for (const TensorInfo *t : {w.weight, w.scale, w.bias})
      if (t)
        claimed.insert(t->name);
    out.linears.push_back(std::move(w));
  }
  for (const PlainSpec &spec : layout.plains) {
    if (spec.optional && !ckpt_.find(spec.name))
      continue;
    KILN_ASSIGN_OR_RETURN(const TensorInfo *t, plain(spec.name, spec.shape));
    claimed.insert(t->name);
    out.plains.push_back(t);
  }
  for (const std::string &name : ckpt_.names())
    if (!claimed.count(name))
      out.unclaimed.push_back(name);
  return out;
}

} // namespace kiln::glm
