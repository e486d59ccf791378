//===- KilnDialect.cpp - kiln dialect registration ------------------------===//

#include "dialects/kiln/IR/KilnDialect.h"
#include "dialects/kiln/IR/KilnOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "dialects/kiln/IR/KilnDialect.cpp.inc"
#include "dialects/kiln/IR/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kiln/IR/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/kiln/IR/KilnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/kiln/IR/KilnOps.cpp.inc"
      >();
}

LogicalResult EncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StorageKind kind,
                                   std::optional<ScaleRule> rule) {
  if (kind == StorageKind::raw && rule)
    return emitError() << "a raw encoding takes no scale rule, found '"
                       << stringifyScaleRule(*rule) << "'";
  return success();
}
