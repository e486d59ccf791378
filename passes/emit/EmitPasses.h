//===- EmitPasses.h - Passes of the emission layer --------------*- C++ -*-===//

#ifndef KILN_PASSES_EMIT_EMITPASSES_H
#define KILN_PASSES_EMIT_EMITPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace kiln {

#define GEN_PASS_DECL
#include "passes/emit/EmitPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/emit/EmitPasses.h.inc"

} // namespace kiln

#endif // KILN_PASSES_EMIT_EMITPASSES_H
