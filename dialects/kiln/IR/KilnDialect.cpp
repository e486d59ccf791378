//===- KilnDialect.cpp - kiln dialect registration ------------------------===//

#include "dialects/kiln/IR/KilnDialect.h"
#include "dialects/kiln/IR/KilnOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

#include "dialects/kiln/IR/KilnDialect.cpp.inc"
#include "dialects/kiln/IR/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kiln/IR/KilnAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/kiln/IR/KilnTypes.cpp.inc"

void KilnDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/kiln/IR/KilnTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/kiln/IR/KilnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/kiln/IR/KilnOps.cpp.inc"
      >();
}

LogicalResult RouterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t topK, int64_t nGroup,
                                 int64_t topkGroup, bool, FloatAttr scale) {
  if (topK < 1)
    return emitError() << "top_k must be at least 1, found " << topK;
  if (nGroup < 1 || topkGroup < 1 || topkGroup > nGroup)
    return emitError() << "topk_group must be in [1, n_group], found "
                       << topkGroup << " of " << nGroup;
  if (!scale || !scale.getType().isF32())
    return emitError() << "routed_scaling_factor must be an f32";
  double s = scale.getValueAsDouble();
  if (!(s > 0) || !std::isfinite(s))
    return emitError() << "routed_scaling_factor must be positive and finite, "
                          "found "
                       << s;
  return success();
}

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == "kiln.router" && !isa<RouterAttr>(attr.getValue()))
    return op->emitError() << "'kiln.router' must be a #kiln.router<...>, "
                              "found "
                           << attr.getValue();
  return success();
}

LogicalResult EncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StorageKind kind,
                                   std::optional<ScaleRule> rule) {
  if (kind == StorageKind::raw && rule)
    return emitError() << "a raw encoding takes no scale rule, found '"
                       << stringifyScaleRule(*rule) << "'";
  return success();
}
