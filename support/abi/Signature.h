//===- Signature.h - A dispatch checked against its declaration -*- C++ -*-===//
//
// The structural half of the kernel contract (support/abi/Kernels.td), run
// by the compiler when it emits a dispatch and by the runtime when it loads
// one: the argument count (variadic arguments expanded), what each argument
// refers to, None only where the declaration says optional, the element type
// of each buffer argument, outputs that share a buffer with an input where
// the kernel cannot work in place, parameters of the kernel's own type, and
// the declared row rules between buffers (same rows, same width, one value
// per row). Errors name the argument as `args[2] 'out'`. Rules that need a
// weight's or cache's shape, or a parameter's value, are the caller's.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_SIGNATURE_H
#define KILN_SUPPORT_ABI_SIGNATURE_H

#include "support/abi/KernelContract.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::abi {

/// What a dispatch argument refers to; the order of fb::ArgKind.
enum class RefKind : uint8_t { Buffer, Weight, Cache, None };
struct ArgRef {
  RefKind kind;
  uint32_t index;
};

/// A buffer's element type, as far as the contract distinguishes them.
enum class ElemType : uint8_t { F32, I32, Other };
/// How many rows a buffer has per call; the order of fb::Rows.
enum class RowsKind : uint8_t { Tokens, Selected, One, Gathered, Routed };
struct BufferFacts {
  std::string name;
  ElemType type = ElemType::F32;
  RowsKind rows = RowsKind::Tokens;
  int64_t width = 1; // values per row
};
const char *rowsKindName(RowsKind rows);

/// The declaration entry of argument `i` of a dispatch with `n` arguments;
/// nullptr when `n` does not fit the declaration.
const ArgDecl *argDeclAt(Kernel kernel, size_t i, size_t n);
/// "args[2] 'out'".
std::string argLabel(Kernel kernel, size_t i, size_t n);
const char *elemTypeName(ElemType type);
const char *refKindName(RefKind kind);

/// "" when the dispatch fits its declaration, else what is wrong.
/// `buffer(index)` describes buffer `index` of the plan.
std::string signatureError(Kernel kernel, const std::vector<ArgRef> &args,
                           const Params &params,
                           const std::function<BufferFacts(uint32_t)> &buffer);

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_SIGNATURE_H
