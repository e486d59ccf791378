//===- HipSymbols.h - libamdhip64 opened at run time ---------------------===//
//
// dlopen()s the HIP runtime and resolves KILN_HIP_SYMBOLS into a table of
// function pointers. Nothing links against libamdhip64.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HIP_HIPSYMBOLS_H
#define KILN_RUNTIME_HIP_HIPSYMBOLS_H

#include "runtime/hip/HipApi.h"
#include "support/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::hip {

/// The library names tried in order when none is given.
std::vector<std::string> defaultHipLibraries();

class HipSymbols {
public:
#define KILN_HIP_DECLARE(name, ret, params) ret(*name) params = nullptr;
  KILN_HIP_SYMBOLS(KILN_HIP_DECLARE)
  /// Null unless the library has all of them (hasGraphs()).
  KILN_HIP_GRAPH_SYMBOLS(KILN_HIP_DECLARE)
#undef KILN_HIP_DECLARE
  /// Whether every stream-capture and graph entry point resolved.
  bool hasGraphs() const { return hasGraphs_; }

  /// Opens the first of `libraries` that loads and resolves every symbol.
  /// Unavailable when none loads; the message says what to do instead.
  static Result<std::shared_ptr<HipSymbols>>
  load(const std::vector<std::string> &libraries = defaultHipLibraries());

  const std::string &path() const { return path_; }
  ~HipSymbols();
  HipSymbols(const HipSymbols &) = delete;
  HipSymbols &operator=(const HipSymbols &) = delete;

private:
  HipSymbols() = default;
  void *handle_ = nullptr;
  std::string path_;
  bool hasGraphs_ = false;
};

/// Converts a HIP error to a Status naming the call, the source location,
/// the HIP error code and its description.
Status hipStatus(const HipSymbols &symbols, hipError_t error, const char *call,
                 const char *file, int line);

} // namespace kiln::hip

/// Returns from the enclosing function when a HIP call fails.
#define KILN_HIP_RETURN_IF_ERROR(symbols, call)                                \
  do {                                                                         \
    ::kiln::hip::hipError_t kiln_hip_error_ = (symbols).call;                  \
    if (kiln_hip_error_ != ::kiln::hip::hipSuccess)                            \
      return ::kiln::hip::hipStatus((symbols), kiln_hip_error_, #call,         \
                                    __FILE__, __LINE__);                       \
  } while (0)

#endif // KILN_RUNTIME_HIP_HIPSYMBOLS_H
