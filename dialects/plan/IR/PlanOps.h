//===- PlanOps.h - The kiln_plan dialect: plans in IR -----------*- C++ -*-===//
//
// Ops in PlanOps.td. The parameter helpers convert a kernel's parameter
// struct (support/abi/Kernels.td) to and from the dictionary a
// kiln_plan.dispatch carries.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_PLAN_IR_PLANOPS_H
#define KILN_DIALECTS_PLAN_IR_PLANOPS_H

#include "support/abi/KernelContract.h"
#include "support/abi/Signature.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

#include <optional>
#include <string>

#include "dialects/plan/IR/PlanDialect.h.inc"
#include "dialects/plan/IR/PlanEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/IR/PlanTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/IR/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/IR/PlanOps.h.inc"

namespace kiln::plan {

/// The kernel declared under `name` in Kernels.td.
std::optional<abi::Kernel> kernelNamed(llvm::StringRef name);

/// One attribute per parameter, named as declared: i64 as an i64 integer,
/// f32 as an f32 float, bool as a bool.
mlir::DictionaryAttr paramsToAttr(mlir::MLIRContext *context,
                                  const abi::Params &params);

/// The kernel's parameter struct from `dict`: every declared parameter
/// present with its type, nothing else. "" when it fits, else what is wrong.
std::string paramsFromAttr(abi::Kernel kernel, mlir::DictionaryAttr dict,
                           abi::Params &params);

/// "" when the dispatch fits its kernel's declaration (abi::signatureError
/// over its buffers' facts and its symbols' kinds), else what is wrong.
/// `symbolKind` says what a symbol names (Weight or Cache), nullopt when
/// neither.
std::string dispatchSignatureError(
    DispatchOp op,
    llvm::function_ref<std::optional<abi::RefKind>(mlir::FlatSymbolRefAttr)>
        symbolKind);

/// Names a plan's buffers as the artifact shows them: inputs keep theirs,
/// the others are `t<position>`, and with two outputs they are `logits` and
/// `hidden`.
void nameBuffers(PlanOp plan);

} // namespace kiln::plan

#endif // KILN_DIALECTS_PLAN_IR_PLANOPS_H
