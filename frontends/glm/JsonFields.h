//===- JsonFields.h - Typed, checked access to JSON config fields -*- C++ -*-=//
//
// Reads fields of one JSON object with their types checked. Every error
// names the file, the field (with its path, e.g.
// `quantization_config.weight_block_size`), what was expected and what was
// found. A field that is present but null counts as absent.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_JSONFIELDS_H
#define KILN_FRONTENDS_GLM_JSONFIELDS_H

#include "support/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::glm {

class JsonFields {
public:
  /// `object` must outlive this reader. `prefix` is prepended to field names
  /// in messages ("quantization_config." for a nested object).
  JsonFields(const nlohmann::json &object, std::string origin,
             std::string prefix = "")
      : object_(object), origin_(std::move(origin)),
        prefix_(std::move(prefix)) {}

  /// nullptr when absent or null.
  const nlohmann::json *find(const char *field) const;
  bool has(const char *field) const { return find(field) != nullptr; }

  Result<int64_t> requireInt(const char *field) const;
  Result<int64_t> optionalInt(const char *field, int64_t fallback) const;
  Result<std::optional<int64_t>> maybeInt(const char *field) const;
  Result<double> requireNumber(const char *field) const;
  Result<double> optionalNumber(const char *field, double fallback) const;
  Result<bool> optionalBool(const char *field, bool fallback) const;
  Result<std::string> optionalString(const char *field,
                                     std::string fallback) const;

  /// "<origin>: field '<prefix><field>'", for building messages.
  std::string where(const char *field) const;
  const std::string &origin() const { return origin_; }
  /// An InvalidArgument error about `field`: "<where>: <text>".
  template <typename... Args>
  Status error(const char *field, const Args &...args) const {
    return makeError(StatusCode::InvalidArgument, where(field), ": ", args...);
  }

private:
  Result<int64_t> toInt(const char *field, const nlohmann::json &value) const;

  const nlohmann::json &object_;
  std::string origin_;
  std::string prefix_;
};

/// A short description of a JSON value for messages: its type and, when
/// short, its text (`string "abc"`, `number 1.5`, `array`).
std::string describeJson(const nlohmann::json &value);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_JSONFIELDS_H
