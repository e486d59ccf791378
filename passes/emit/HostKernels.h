//===- HostKernels.h - The artifact's compiled x86-64 kernels ----*- C++
//-*-===//
//
// Builds the x86-64 shared object of the host kernels the plans use
// (passes/codegen/x86) and writes it as one artifact segment; the caller
// adds the CodeObject {target "x86_64"} and a KernelSymbol on each kernel
// the object implements.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_HOSTKERNELS_H
#define KILN_PASSES_EMIT_HOSTKERNELS_H

#include "runtime/artifact/ArtifactWriter.h"
#include "support/Status.h"

#include <map>
#include <set>
#include <string>

namespace kiln::emit {

struct HostKernelObject {
  std::string target; // "x86_64"
  std::string triple; // "x86_64-unknown-linux-gnu"
  fb::Extent data;
  /// KernelAbi.h kernel name -> exported symbol.
  std::map<std::string, std::string> symbols;
};

/// Whether a kiln-compile --target list names cpu.
bool targetsIncludeCpu(const std::string &targets);

/// Compiles the host kernels among `kernelsUsed` (KernelAbi.h names) and
/// writes the shared object through `writer`. No symbols (and no segment)
/// when none of them has a compiled implementation.
Result<HostKernelObject>
emitHostKernels(artifact::ArtifactWriter &writer,
                const std::set<std::string> &kernelsUsed);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_HOSTKERNELS_H
