//===- QuantConfig.cpp - config.json `quantization_config` ----------------===//

#include "frontends/glm/QuantConfig.h"

#include "frontends/glm/Glob.h"
#include "frontends/glm/JsonFields.h"

namespace kiln::glm {

using nlohmann::json;

const char *quantMethodName(QuantMethod method) {
  switch (method) {
  case QuantMethod::None:
    return "none";
  case QuantMethod::Fp8Block:
    return "fp8";
  case QuantMethod::QuarkMxfp4:
    return "quark";
  }
  return "unknown";
}

namespace {

// True if `entry` equals a run of whole dot-separated components of `name`.
bool matchesComponents(std::string_view entry, std::string_view name) {
  if (entry.empty())
    return false;
  for (size_t pos = name.find(entry); pos != std::string_view::npos;
       pos = name.find(entry, pos + 1)) {
    size_t end = pos + entry.size();
    if ((pos == 0 || name[pos - 1] == '.') &&
        (end == name.size() || name[end] == '.'))
      return true;
  }
  return false;
}

Result<std::vector<std::string>> readStringList(const JsonFields &fields,
                                                const char *field) {
  std::vector<std::string> out;
  const json *list = fields.find(field);
  if (!list)
    return out;
  if (!list->is_array())
    return fields.error(field, "expected a list of module names, found ",
                        describeJson(*list));
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_string())
      return fields.error(field, "element ", i, " must be a string, found ",
                          describeJson((*list)[i]));
    out.push_back((*list)[i].get<std::string>());
  }
  return out;
}

// Fails unless `field` is absent or equals `expected`.
Status expectString(const JsonFields &fields, const char *field,
                    const std::string &expected) {
  KILN_ASSIGN_OR_RETURN(std::string value,
                        fields.optionalString(field, expected));
  if (value != expected)
    return fields.error(field, "expected \"", expected, "\", found \"", value,
                        "\" (unsupported)");
  return Status::ok();
}

Status parseFp8(const JsonFields &fields, QuantConfig &out) {
  out.method = QuantMethod::Fp8Block;
  KILN_RETURN_IF_ERROR(expectString(fields, "fmt", "e4m3"));
  KILN_RETURN_IF_ERROR(expectString(fields, "activation_scheme", "dynamic"));
  if (const json *block = fields.find("weight_block_size")) {
    if (!block->is_array() || block->size() != 2 ||
        !(*block)[0].is_number_integer() || !(*block)[1].is_number_integer() ||
        (*block)[0].get<int64_t>() <= 0 || (*block)[1].get<int64_t>() <= 0 ||
        (*block)[0].get<int64_t>() > (1 << 20) ||
        (*block)[1].get<int64_t>() > (1 << 20))
      return fields.error("weight_block_size",
                          "expected [out, in] with positive integers (per-"
                          "tensor or per-channel FP8 is unsupported), found ",
                          describeJson(*block));
    out.fp8BlockOut = (*block)[0].get<int64_t>();
    out.fp8BlockIn = (*block)[1].get<int64_t>();
  } else {
    return fields.error("weight_block_size",
                        "is missing; only block-wise FP8 is supported");
  }
  KILN_ASSIGN_OR_RETURN(out.excluded,
                        readStringList(fields, "modules_to_not_convert"));
  return Status::ok();
}

Status parseQuark(const JsonFields &fields, QuantConfig &out) {
  out.method = QuantMethod::QuarkMxfp4;
  for (const char *perLayer : {"layer_quant_config", "layer_type_quant_config"})
    if (const json *value = fields.find(perLayer))
      if (!(value->is_object() && value->empty()))
        return fields.error(perLayer,
                            "per-layer Quark overrides are not "
                            "supported; expected {}, found ",
                            describeJson(*value));
  const json *global = fields.find("global_quant_config");
  if (!global || !global->is_object())
    return fields.error("global_quant_config", "expected an object, found ",
                        global ? describeJson(*global) : "nothing");
  JsonFields globalFields(*global, fields.origin(),
                          "quantization_config.global_quant_config.");
  const json *weight = globalFields.find("weight");
  if (!weight || !weight->is_object())
    return globalFields.error("weight", "expected an object, found ",
                              weight ? describeJson(*weight) : "nothing");
  JsonFields w(*weight, fields.origin(),
               "quantization_config.global_quant_config.weight.");
  KILN_ASSIGN_OR_RETURN(std::string dtype, w.optionalString("dtype", ""));
  if (dtype != "fp4")
    return w.error("dtype", "expected \"fp4\" (MXFP4), found \"", dtype,
                   "\" (unsupported)");
  KILN_RETURN_IF_ERROR(expectString(w, "qscheme", "per_group"));
  KILN_RETURN_IF_ERROR(expectString(w, "scale_format", "e8m0"));
  KILN_ASSIGN_OR_RETURN(int64_t group, w.optionalInt("group_size", -1));
  if (group != 32)
    return w.error("group_size", "expected 32 (MXFP4), found ", group);
  out.mxfp4GroupSize = group;
  KILN_ASSIGN_OR_RETURN(bool dynamic, w.optionalBool("is_dynamic", false));
  if (dynamic)
    return w.error("is_dynamic", "expected false (static weights)");
  if (const json *input = globalFields.find("input_tensors")) {
    JsonFields in(*input, fields.origin(),
                  "quantization_config.global_quant_config.input_tensors.");
    KILN_ASSIGN_OR_RETURN(bool inDynamic, in.optionalBool("is_dynamic", true));
    if (!inDynamic)
      return in.error("is_dynamic", "static activation scales are not "
                                    "supported; expected true");
  }
  if (const json *exportCfg = fields.find("export")) {
    JsonFields ex(*exportCfg, fields.origin(), "quantization_config.export.");
    KILN_RETURN_IF_ERROR(expectString(ex, "weight_format", "real_quantized"));
    KILN_ASSIGN_OR_RETURN(out.quarkPackMethod,
                          ex.optionalString("pack_method", "reorder"));
  }
  KILN_ASSIGN_OR_RETURN(out.excluded, readStringList(fields, "exclude"));
  return Status::ok();
}

} // namespace

bool QuantConfig::isExcluded(std::string_view moduleName) const {
  switch (method) {
  case QuantMethod::None:
    return true;
  case QuantMethod::QuarkMxfp4:
    for (const std::string &pattern : excluded)
      if (globMatch(pattern, moduleName))
        return true;
    return false;
  case QuantMethod::Fp8Block:
    for (const std::string &entry : excluded) {
      if (isGlob(entry) ? globMatch(entry, moduleName)
                        : matchesComponents(entry, moduleName))
        return true;
      if (entry == "self_attn.indexers_proj" &&
          matchesComponents("self_attn.indexer.weights_proj", moduleName))
        return true;
    }
    return false;
  }
  return false;
}

Result<QuantConfig> parseQuantConfig(const json &value,
                                     const std::string &origin) {
  QuantConfig out;
  if (value.is_null())
    return out;
  JsonFields fields(value, origin, "quantization_config.");
  if (!value.is_object())
    return makeError(StatusCode::InvalidArgument, origin,
                     ": field 'quantization_config' expected an object, "
                     "found ",
                     describeJson(value));
  const json *method = fields.find("quant_method");
  if (!method || !method->is_string())
    return fields.error("quant_method", "expected a string, found ",
                        method ? describeJson(*method) : "nothing");
  const std::string &name = method->get_ref<const std::string &>();
  if (name == "fp8")
    KILN_RETURN_IF_ERROR(parseFp8(fields, out));
  else if (name == "quark")
    KILN_RETURN_IF_ERROR(parseQuark(fields, out));
  else
    return fields.error("quant_method",
                        "expected \"fp8\" (block FP8) or \"quark\" (MXFP4), "
                        "found \"",
                        name, "\" (unsupported)");
  return out;
}

} // namespace kiln::glm
