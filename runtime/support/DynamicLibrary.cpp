//===- DynamicLibrary.cpp -------------------------------------------------===//

#include "runtime/support/DynamicLibrary.h"

#include <cstring>
#include <dlfcn.h>

using namespace kiln;

OpenedLibrary kiln::openLibrary(const std::vector<std::string> &candidates,
                                const std::vector<SymbolSlot> &symbols) {
  OpenedLibrary opened;
  for (const std::string &name : candidates) {
    void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      opened.tried +=
          std::string(opened.tried.empty() ? "" : "; ") + (why ? why : name);
      continue;
    }
    opened.path = name;
    for (const SymbolSlot &symbol : symbols) {
      void *address = dlsym(handle, symbol.name);
      if (!address) {
        opened.missing = symbol.name;
        dlclose(handle);
        return opened;
      }
      std::memcpy(symbol.slot, &address, sizeof(address));
    }
    opened.handle = handle;
    return opened;
  }
  return opened;
}
