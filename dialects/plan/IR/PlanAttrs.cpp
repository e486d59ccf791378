//===- PlanAttrs.cpp - #kiln_plan.launch ----------------------------------===//
//
//   #kiln_plan.launch<"SYMBOL", grid [(mul, add, div)[ of N] x 3],
//                     args [PART[ INDEX], ...]>
//
// `rows` and `cache_capacity` take no index; every other part does.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/IR/PlanOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::plan;

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/IR/PlanAttrs.cpp.inc"

void PlanDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/IR/PlanAttrs.cpp.inc"
      >();
}

Attribute GpuLaunchAttr::parse(AsmParser &parser, Type) {
  std::string kernel;
  SmallVector<int64_t> grid, args;
  auto parseAxis = [&]() -> ParseResult {
    int64_t mul, add, div, of = -1;
    if (parser.parseLParen() || parser.parseInteger(mul) ||
        parser.parseComma() || parser.parseInteger(add) ||
        parser.parseComma() || parser.parseInteger(div) || parser.parseRParen())
      return failure();
    if (succeeded(parser.parseOptionalKeyword("of")) && parser.parseInteger(of))
      return failure();
    grid.append({mul, add, div, of});
    return success();
  };
  auto parseArg = [&]() -> ParseResult {
    std::string name;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeywordOrString(&name))
      return failure();
    std::optional<GpuArgPart> part = symbolizeGpuArgPart(name);
    if (!part)
      return parser.emitError(at)
             << "unknown GPU argument part '" << name << "'";
    int64_t index = 0;
    if (takesIndex(*part) && parser.parseInteger(index))
      return failure();
    args.append({int64_t(*part), index});
    return success();
  };
  if (parser.parseLess() || parser.parseString(&kernel) ||
      parser.parseComma() || parser.parseKeyword("grid") ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseAxis) ||
      parser.parseComma() || parser.parseKeyword("args") ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseArg) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), kernel, grid, args);
}

void GpuLaunchAttr::print(AsmPrinter &p) const {
  p << "<\"" << getKernel() << "\", grid [";
  ArrayRef<int64_t> grid = getGrid();
  for (size_t axis = 0; axis < grid.size() / kAxisFields; ++axis) {
    const int64_t *a = &grid[kAxisFields * axis];
    p << (axis ? ", " : "") << "(" << a[0] << ", " << a[1] << ", " << a[2]
      << ")";
    if (a[3] >= 0)
      p << " of " << a[3];
  }
  p << "], args [";
  for (size_t i = 0; i < getNumArgs(); ++i) {
    p << (i ? ", " : "") << stringifyGpuArgPart(getArgPart(i));
    if (takesIndex(getArgPart(i)))
      p << " " << getArgIndex(i);
  }
  p << "]>";
}

LogicalResult
GpuLaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef kernel, ArrayRef<int64_t> grid,
                      ArrayRef<int64_t> args) {
  if (!kernel.starts_with("kiln_"))
    return emitError() << "launch kernel '" << kernel
                       << "' is not a Kiln kernel symbol";
  if (grid.size() != 3 * kAxisFields)
    return emitError() << "launch grid has " << grid.size() / kAxisFields
                       << " axes, expected 3";
  for (size_t axis = 0; axis < 3; ++axis) {
    const int64_t *a = &grid[kAxisFields * axis];
    if (a[0] < 0 || a[1] < 0 || a[2] < 1 || a[3] < -1)
      return emitError() << "launch grid axis " << axis
                         << ": mul and add >= 0, div >= 1 and `of` >= 0, got ("
                         << a[0] << ", " << a[1] << ", " << a[2] << ")"
                         << (a[3] == -1 ? "" : " of " + std::to_string(a[3]));
  }
  if (args.size() % kArgFields != 0)
    return emitError() << "launch args hold (part, index) pairs";
  for (size_t i = 0; i < args.size(); i += kArgFields) {
    std::optional<GpuArgPart> part = symbolizeGpuArgPart(int32_t(args[i]));
    if (!part)
      return emitError() << "launch argument " << i / kArgFields
                         << ": no GPU argument part " << args[i];
    if (args[i + 1] < 0 || (!takesIndex(*part) && args[i + 1] != 0))
      return emitError() << "launch argument " << i / kArgFields << ": "
                         << stringifyGpuArgPart(*part) << " takes "
                         << (takesIndex(*part) ? "an index >= 0" : "no index")
                         << ", got " << args[i + 1];
  }
  return success();
}
