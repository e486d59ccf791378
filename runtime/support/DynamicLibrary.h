//===- DynamicLibrary.h - Vendor libraries opened at run time ---*- C++ -*-===//
//
// The HIP runtime and RCCL are dlopen()ed, never linked, so that the runtime
// builds and runs without ROCm. openLibrary is the loop both use: try each
// candidate name, resolve a table of symbols in the first that loads, and
// say what went wrong so the caller can word the error for its library.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SUPPORT_DYNAMICLIBRARY_H
#define KILN_RUNTIME_SUPPORT_DYNAMICLIBRARY_H

#include <string>
#include <vector>

namespace kiln {

/// A symbol to resolve: its name and the function pointer variable that
/// receives its address.
struct SymbolSlot {
  const char *name;
  void *slot;
};

struct OpenedLibrary {
  void *handle = nullptr;        // dlopen's handle on success, else null
  std::string path;              // the candidate that loaded
  const char *missing = nullptr; // the first symbol `path` lacks (then closed)
  std::string tried; // dlerror() of each candidate that did not load, "; "
};

/// dlopen()s (RTLD_NOW | RTLD_LOCAL) the first of `candidates` that loads and
/// resolves every symbol of `symbols` in it. A library that loads but lacks
/// a symbol ends the search: it is the one the user meant, and the wrong one.
OpenedLibrary openLibrary(const std::vector<std::string> &candidates,
                          const std::vector<SymbolSlot> &symbols);

} // namespace kiln

#endif // KILN_RUNTIME_SUPPORT_DYNAMICLIBRARY_H
