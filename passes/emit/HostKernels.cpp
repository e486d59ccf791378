//===- HostKernels.cpp - The artifact's compiled x86-64 kernels -----------===//

#include "passes/emit/HostKernels.h"

#include "passes/codegen/x86/X86Codegen.h"

#include <sstream>

using namespace kiln;
using namespace kiln::emit;

bool kiln::emit::targetsIncludeCpu(const std::string &targets) {
  std::stringstream in(targets);
  std::string name;
  while (std::getline(in, name, ','))
    if (name == "cpu")
      return true;
  return false;
}

Result<HostKernelObject>
kiln::emit::emitHostKernels(artifact::ArtifactWriter &writer,
                            const std::set<std::string> &kernelsUsed) {
  HostKernelObject out;
  out.target = x86::kTarget;
  out.triple = x86::kTriple;
  std::vector<std::string> wanted;
  for (const std::string &k : x86::hostKernelNames())
    if (kernelsUsed.count(k))
      wanted.push_back(k);
  if (wanted.empty())
    return out;
  KILN_ASSIGN_OR_RETURN(x86::HostCodeObject object,
                        x86::buildHostKernels(wanted));
  KILN_ASSIGN_OR_RETURN(
      out.data, writer.writeSegment(object.so.data(), object.so.size()));
  for (const x86::HostSymbol &s : object.symbols)
    out.symbols[s.kernel] = s.symbol;
  return out;
}
