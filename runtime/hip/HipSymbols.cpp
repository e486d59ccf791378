//===- HipSymbols.cpp -----------------------------------------------------===//

#include "runtime/hip/HipSymbols.h"
#include "runtime/support/DynamicLibrary.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

using namespace kiln;
using namespace kiln::hip;

std::vector<std::string> kiln::hip::defaultHipLibraries() {
  // $KILN_HIP_LIBRARY when set (a ROCm outside the loader path), then the
  // unversioned name (what ROCm's loader path provides), the sonames of
  // ROCm 7 and 6, and ROCm's default prefix.
  std::vector<std::string> names;
  if (const char *env = std::getenv("KILN_HIP_LIBRARY"); env && *env)
    names.push_back(env);
  for (const char *name : {"libamdhip64.so", "libamdhip64.so.7",
                           "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so"})
    names.push_back(name);
  return names;
}

Result<std::shared_ptr<HipSymbols>>
HipSymbols::load(const std::vector<std::string> &libraries) {
  std::shared_ptr<HipSymbols> symbols(new HipSymbols());
#define KILN_HIP_SLOT(name, ret, params) {#name, &symbols->name},
  OpenedLibrary opened =
      openLibrary(libraries, {KILN_HIP_SYMBOLS(KILN_HIP_SLOT)});
#undef KILN_HIP_SLOT
  if (opened.missing)
    return makeError(StatusCode::Unavailable, "HIP runtime ", opened.path,
                     " lacks the symbol ", opened.missing,
                     ": it is not a usable libamdhip64 (ROCm 6 or later)");
  if (!opened.handle)
    return makeError(StatusCode::Unavailable,
                     "HIP runtime (libamdhip64.so) not found: --device=hip "
                     "needs ROCm; use --device=cpu (tried: ",
                     opened.tried, ")");
  symbols->handle_ = opened.handle;
  symbols->path_ = opened.path;
  // The graph entry points, all or none.
  bool all = true;
#define KILN_HIP_OPTIONAL(name, ret, params)                                   \
  symbols->name =                                                              \
      reinterpret_cast<ret(*) params>(dlsym(opened.handle, #name));            \
  all = all && symbols->name;
  KILN_HIP_GRAPH_SYMBOLS(KILN_HIP_OPTIONAL)
#undef KILN_HIP_OPTIONAL
  symbols->hasGraphs_ = all;
  return symbols;
}

HipSymbols::~HipSymbols() {
  if (handle_)
    dlclose(handle_);
}

Status kiln::hip::hipStatus(const HipSymbols &symbols, hipError_t error,
                            const char *call, const char *file, int line) {
  // Source paths relative to the repository.
  const char *relative = std::strstr(file, "runtime/");
  const char *what =
      symbols.hipGetErrorString ? symbols.hipGetErrorString(error) : nullptr;
  return makeError(error == hipErrorNoDevice ? StatusCode::Unavailable
                                             : StatusCode::Internal,
                   relative ? relative : file, ":", line, ": ", call,
                   " failed with hipError_t ", error, " (",
                   what ? what : "no description", ")");
}
