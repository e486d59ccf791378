//===- Status.h - Error values for Kiln's runtime and readers ---*- C++ -*-===//
//
// Library code in Kiln never aborts on bad input: it returns a Status (or a
// Result<T>) whose message names the file, tensor or field, what was expected
// and what was found. Header-only and free of LLVM so that the runtime, the
// checkpoint readers and the fuzz harnesses can all use it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_STATUS_H
#define KILN_SUPPORT_STATUS_H

#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace kiln {

enum class StatusCode {
  Ok = 0,
  InvalidArgument,   // malformed input: a bad file, field, shape or flag
  NotFound,          // a named file, tensor or field is absent
  OutOfRange,        // an offset, index or size outside its bounds
  DataLoss,          // truncated or corrupted data (checksums, short reads)
  ResourceExhausted, // a limit that protects the machine was exceeded
  Unavailable,       // a device or library is not present on this machine
  FailedPrecondition,
  Internal,
};

const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  // Prepends context, e.g. the file a nested error came from.
  Status withContext(const std::string &context) const {
    if (isOk())
      return *this;
    return Status(code_, context + ": " + message_);
  }

  std::string toString() const {
    if (isOk())
      return "ok";
    return std::string(statusCodeName(code_)) + ": " + message_;
  }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

inline const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "ok";
  case StatusCode::InvalidArgument:
    return "invalid argument";
  case StatusCode::NotFound:
    return "not found";
  case StatusCode::OutOfRange:
    return "out of range";
  case StatusCode::DataLoss:
    return "data loss";
  case StatusCode::ResourceExhausted:
    return "resource exhausted";
  case StatusCode::Unavailable:
    return "unavailable";
  case StatusCode::FailedPrecondition:
    return "failed precondition";
  case StatusCode::Internal:
    return "internal";
  }
  return "unknown";
}

/// Builds a Status from streamable pieces:
///   return makeError(StatusCode::InvalidArgument, path, ": tensor '", name,
///                    "' has ", n, " bytes, expected ", m);
template <typename... Args>
Status makeError(StatusCode code, const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Status(code, os.str());
}

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {
    if (status_.isOk())
      status_ = Status(StatusCode::Internal, "Result built from an ok Status");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

/// Returns the Status from the enclosing function if `expr` failed.
#define KILN_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::kiln::Status kiln_status_ = (expr);                                      \
    if (!kiln_status_.isOk())                                                  \
      return kiln_status_;                                                     \
  } while (0)

/// `KILN_ASSIGN_OR_RETURN(auto x, makeX());` unwraps a Result<T> or returns
/// its Status.
#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                       \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_result_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                             \
  auto tmp = (expr);                                                           \
  if (!tmp.isOk())                                                             \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()

#endif // KILN_SUPPORT_STATUS_H
