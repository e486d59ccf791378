//===- KilnOps.h - kiln dialect ops, attributes and enums -------*- C++ -*-===//

#ifndef KILN_DIALECTS_KILN_IR_KILNOPS_H
#define KILN_DIALECTS_KILN_IR_KILNOPS_H

#include "dialects/kiln/IR/KilnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kiln/IR/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kiln/IR/KilnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/kiln/IR/KilnTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/kiln/IR/KilnOps.h.inc"

namespace kiln {

/// The tensor a weight operand stands for: a ranked tensor's own type, or
/// the values' type of a !kiln.block_scaled.
inline mlir::RankedTensorType valuesType(mlir::Type type) {
  if (auto scaled = llvm::dyn_cast<BlockScaledType>(type))
    return scaled.getValues();
  return llvm::cast<mlir::RankedTensorType>(type);
}

/// The !kiln.block_scaled type of `values` and `scales` (ranked tensors)
/// in blocks of `block`.
inline BlockScaledType blockScaledType(mlir::Value values, mlir::Value scales,
                                       llvm::ArrayRef<int64_t> block) {
  return BlockScaledType::get(
      values.getContext(), llvm::cast<mlir::RankedTensorType>(values.getType()),
      llvm::cast<mlir::RankedTensorType>(scales.getType()), block);
}

} // namespace kiln

#endif // KILN_DIALECTS_KILN_IR_KILNOPS_H
