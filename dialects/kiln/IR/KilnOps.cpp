//===- KilnOps.cpp - kiln op parsing, printing and folding ----------------===//
//
// Verifiers live in KilnVerify.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

//===----------------------------------------------------------------------===//
// custom<DefaultEncoding>: `encoding <kind, rule>`, omitted when `raw`.
//===----------------------------------------------------------------------===//

static ParseResult parseDefaultEncoding(OpAsmParser &parser,
                                        EncodingAttr &encoding) {
  if (succeeded(parser.parseOptionalKeyword("encoding")))
    return parser.parseCustomAttributeWithFallback(encoding);
  encoding =
      EncodingAttr::get(parser.getContext(), StorageKind::raw, std::nullopt);
  return success();
}

static void printDefaultEncoding(OpAsmPrinter &printer, Operation *,
                                 EncodingAttr encoding) {
  if (encoding.getKind() == StorageKind::raw)
    return;
  printer << "encoding ";
  printer.printStrippedAttrOrType(encoding);
}

#define GET_OP_CLASSES
#include "dialects/kiln/IR/KilnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  if (getFactor().convertToFloat() == 1.0f)
    return getInput();
  // scale(scale(x, a), b) -> scale(x, a*b) is done in place.
  if (auto inner = getInput().getDefiningOp<ScaleOp>()) {
    float factor =
        inner.getFactor().convertToFloat() * getFactor().convertToFloat();
    setFactorAttr(FloatAttr::get(Float32Type::get(getContext()), factor));
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult GroupLimitOp::fold(FoldAdaptor) {
  if (getNGroup() == getTopkGroup())
    return getInput();
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x).
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}
