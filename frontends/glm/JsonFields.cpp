//===- JsonFields.cpp - Typed, checked access to JSON config fields -------===//

#include "frontends/glm/JsonFields.h"

namespace kiln::glm {

using nlohmann::json;

std::string describeJson(const json &value) {
  // Never dump a nested value: hostile input may nest deeply, and dump()
  // recurses.
  if (value.is_object())
    return "object";
  if (value.is_array()) {
    if (value.size() > 8)
      return "array of " + std::to_string(value.size()) + " elements";
    for (const json &element : value)
      if (element.is_structured())
        return "array";
  }
  std::string kind = value.is_number_integer() ? "integer" : value.type_name();
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 64)
    text = text.substr(0, 64) + "...";
  return kind + " " + text;
}

std::string JsonFields::where(const char *field) const {
  return origin_ + ": field '" + prefix_ + field + "'";
}

const json *JsonFields::find(const char *field) const {
  if (!object_.is_object())
    return nullptr;
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null())
    return nullptr;
  return &*it;
}

Result<int64_t> JsonFields::toInt(const char *field, const json &value) const {
  if (!value.is_number_integer())
    return error(field, "expected an integer, found ", describeJson(value));
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
    return error(field, "integer ", value.dump(), " is out of range");
  return value.get<int64_t>();
}

Result<int64_t> JsonFields::requireInt(const char *field) const {
  const json *value = find(field);
  if (!value)
    return makeError(StatusCode::NotFound, where(field),
                     ": required integer field is missing");
  return toInt(field, *value);
}

Result<int64_t> JsonFields::optionalInt(const char *field,
                                        int64_t fallback) const {
  const json *value = find(field);
  if (!value)
    return fallback;
  return toInt(field, *value);
}

Result<std::optional<int64_t>> JsonFields::maybeInt(const char *field) const {
  const json *value = find(field);
  if (!value)
    return std::optional<int64_t>();
  KILN_ASSIGN_OR_RETURN(int64_t v, toInt(field, *value));
  return std::optional<int64_t>(v);
}

Result<double> JsonFields::requireNumber(const char *field) const {
  const json *value = find(field);
  if (!value)
    return makeError(StatusCode::NotFound, where(field),
                     ": required number field is missing");
  if (!value->is_number())
    return error(field, "expected a number, found ", describeJson(*value));
  return value->get<double>();
}

Result<double> JsonFields::optionalNumber(const char *field,
                                          double fallback) const {
  if (!has(field))
    return fallback;
  return requireNumber(field);
}

Result<bool> JsonFields::optionalBool(const char *field, bool fallback) const {
  const json *value = find(field);
  if (!value)
    return fallback;
  if (!value->is_boolean())
    return error(field, "expected true or false, found ", describeJson(*value));
  return value->get<bool>();
}

Result<std::string> JsonFields::optionalString(const char *field,
                                               std::string fallback) const {
  const json *value = find(field);
  if (!value)
    return fallback;
  if (!value->is_string())
    return error(field, "expected a string, found ", describeJson(*value));
  return value->get<std::string>();
}

} // namespace kiln::glm
