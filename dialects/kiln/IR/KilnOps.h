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

#define GET_OP_CLASSES
#include "dialects/kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECTS_KILN_IR_KILNOPS_H
