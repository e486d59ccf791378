//===- LinkShared.h - ld.lld -shared over in-memory objects -----*- C++ -*-===//
//
// Both code generators (ROCDL code objects, x86-64 host kernels) link one
// relocatable object into a shared object with ld.lld: the linker is
// `lldPath`, else $KILN_LLD, else the Debian LLVM 22 one.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_LINKSHARED_H
#define KILN_PASSES_CODEGEN_LINKSHARED_H

#include "support/Status.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

/// `ld.lld -shared <extraArgs> object -o out` through temporary files;
/// returns the linked bytes. Errors start with `what` ("x86 codegen").
Result<std::vector<uint8_t>>
linkSharedObject(const std::string &object, const std::string &lldPath,
                 llvm::ArrayRef<llvm::StringRef> extraArgs,
                 llvm::StringRef what);

} // namespace kiln::codegen

#endif // KILN_PASSES_CODEGEN_LINKSHARED_H
