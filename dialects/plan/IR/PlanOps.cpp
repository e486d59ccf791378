//===- PlanOps.cpp - kiln_plan registration, assembly and verifiers -------===//

#include "dialects/plan/IR/PlanOps.h"

#include "support/abi/KernelAbi.h"
#include "support/abi/Signature.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::plan;

#include "dialects/plan/IR/PlanDialect.cpp.inc"
#include "dialects/plan/IR/PlanEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/IR/PlanTypes.cpp.inc"

void PlanDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/plan/IR/PlanTypes.cpp.inc"
      >();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/IR/PlanOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/plan/IR/PlanOps.cpp.inc"

LogicalResult PlanDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() != kHostKernelsAttrName)
    return op->emitError() << "unknown kiln_plan attribute '"
                           << attr.getName().getValue() << "'";
  auto names = dyn_cast<ArrayAttr>(attr.getValue());
  if (!isa<ModuleOp>(op) || !names)
    return op->emitError() << "'" << kHostKernelsAttrName
                           << "' is an array of kernel names on the module";
  for (Attribute a : names) {
    auto name = dyn_cast<StringAttr>(a);
    if (!name || !kernelNamed(name.getValue()))
      return op->emitError() << "'" << kHostKernelsAttrName
                             << "' names no declared kernel: " << a;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// weight, buffer, plan
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  for (int64_t d : getShape())
    if (d < 1)
      return emitOpError() << "shape dimensions must be positive";
  if (getExperts() > 0 && getShape().front() != getExperts())
    return emitOpError() << "holds " << getExperts()
                         << " experts but its leading dimension is "
                         << getShape().front();
  bool scaled =
      getKind() == WeightKind::fp8_block || getKind() == WeightKind::mxfp4_raw;
  if (scaled && !getScales())
    return emitOpError() << "a " << stringifyWeightKind(getKind())
                         << " weight names its scales' tensor";
  if (getKind() == WeightKind::dense && getScales() && !getDtype().isF32())
    return emitOpError() << "a dense weight names scales only as f32 (an FP8 "
                            "or MXFP4 source dequantized at compile time), "
                            "found "
                         << getDtype();
  if (getKind() == WeightKind::mxfp4_dequant && !getDtype().isF32())
    return emitOpError() << "an mxfp4_dequant weight is stored as f32, found "
                         << getDtype();
  if (auto slice = getSlice()) {
    if (slice->size() != 2 || ((*slice)[0] != 0 && (*slice)[0] != 1) ||
        (*slice)[1] < 0)
      return emitOpError() << "slice must be [axis, first] with axis 0 "
                              "(rows) or 1 (columns) and first >= 0";
    if (getShape().size() < 1 || (getShape().size() == 1 && (*slice)[0] != 0))
      return emitOpError()
             << "slice needs a matrix (or a stack of them) or a vector "
                "(axis 0)";
    // Block-scaled kinds slice whole scale blocks.
    int64_t block = 1;
    if (getKind() == WeightKind::fp8_block)
      block = 128;
    else if ((*slice)[0] == 1 && (getKind() == WeightKind::mxfp4_raw ||
                                  getKind() == WeightKind::mxfp4_quant))
      block = 32;
    if ((*slice)[1] % block != 0)
      return emitOpError() << "a " << stringifyWeightKind(getKind())
                           << " weight's slice must start on a multiple of "
                           << block << ", found " << (*slice)[1];
  }
  return success();
}

double WeightOp::getBytesPerValue() {
  switch (getKind()) {
  case WeightKind::fp8_block:
    return 1.0 + 4.0 / (128 * 128);
  case WeightKind::mxfp4_raw:
  case WeightKind::mxfp4_quant:
    return 0.5 + 1.0 / 32;
  case WeightKind::dense:
  case WeightKind::mxfp4_dequant:
    break;
  }
  return getDtype().getIntOrFloatBitWidth() / 8.0;
}

double WeightOp::getStoredBytes() {
  double values = 1;
  for (int64_t d : getShape())
    values *= double(d);
  return values * getBytesPerValue();
}

LogicalResult BufferOp::verify() {
  for (int64_t d : getRow())
    if (d < 1)
      return emitOpError() << "row dimensions must be positive";
  return success();
}

int64_t BufferOp::getRowElems() {
  int64_t n = 1;
  for (int64_t d : getRow())
    n *= d;
  return n;
}

LogicalResult PlanOp::verifyRegions() {
  bool pastInputs = false;
  for (Operation &op : getBody().front()) {
    auto buffer = dyn_cast<BufferOp>(op);
    if (buffer && buffer.getInput() && pastInputs)
      return buffer.emitOpError() << "is an input after the first buffer "
                                     "that is not: inputs come first";
    pastInputs |= !buffer || !buffer.getInput();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// dispatch: `kernel(%buf, @weight, none, ...) {params} attributes {...}`
//===----------------------------------------------------------------------===//

ParseResult DispatchOp::parse(OpAsmParser &parser, OperationState &result) {
  std::string kernel;
  if (parser.parseKeywordOrString(&kernel))
    return failure();
  Builder &b = parser.getBuilder();
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Attribute> args;
  auto parseArg = [&]() -> ParseResult {
    OpAsmParser::UnresolvedOperand operand;
    OptionalParseResult isOperand = parser.parseOptionalOperand(operand);
    if (isOperand.has_value()) {
      if (failed(*isOperand))
        return failure();
      args.push_back(b.getI32IntegerAttr(int32_t(operands.size())));
      operands.push_back(operand);
      return success();
    }
    if (succeeded(parser.parseOptionalKeyword("none"))) {
      args.push_back(b.getUnitAttr());
      return success();
    }
    StringAttr symbol;
    if (parser.parseSymbolName(symbol))
      return failure();
    args.push_back(FlatSymbolRefAttr::get(symbol));
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseArg))
    return failure();
  DictionaryAttr params = b.getDictionaryAttr({});
  if (succeeded(parser.parseOptionalLBrace())) {
    NamedAttrList list;
    auto parseParam = [&]() -> ParseResult {
      std::string name;
      Attribute value;
      if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
          parser.parseAttribute(value))
        return failure();
      list.append(name, value);
      return success();
    };
    if (parser.parseCommaSeparatedList(parseParam) || parser.parseRBrace())
      return failure();
    params = list.getDictionary(b.getContext());
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Type bufferType = BufferType::get(b.getContext());
  if (parser.resolveOperands(operands, bufferType, result.operands))
    return failure();
  result.addAttribute(getKernelAttrName(result.name), b.getStringAttr(kernel));
  result.addAttribute(getArgsAttrName(result.name), b.getArrayAttr(args));
  result.addAttribute(getParamsAttrName(result.name), params);
  return success();
}

void DispatchOp::print(OpAsmPrinter &p) {
  p << ' ' << getKernel() << '(';
  llvm::interleaveComma(getArgs(), p, [&](Attribute a) {
    if (auto index = dyn_cast<IntegerAttr>(a))
      p.printOperand(getBuffers()[index.getInt()]);
    else if (auto symbol = dyn_cast<FlatSymbolRefAttr>(a))
      p.printAttribute(symbol);
    else
      p << "none";
  });
  p << ')';
  if (!getParams().empty()) {
    p << " {";
    llvm::interleaveComma(getParams(), p, [&](NamedAttribute a) {
      p << a.getName().getValue() << " = ";
      p.printAttribute(a.getValue());
    });
    p << '}';
  }
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getKernelAttrName(), getArgsAttrName(), getParamsAttrName()});
}

LogicalResult DispatchOp::verify() {
  std::optional<abi::Kernel> kernel = kernelNamed(getKernel());
  if (!kernel)
    return emitOpError() << "names no declared kernel: '" << getKernel() << "'";
  abi::Params params;
  std::string error = paramsFromAttr(*kernel, getParams(), params);
  if (!error.empty())
    return emitOpError() << getKernel() << ": " << error;
  int64_t next = 0;
  for (Attribute a : getArgs()) {
    if (auto index = dyn_cast<IntegerAttr>(a)) {
      if (index.getInt() != next++)
        return emitOpError() << "buffer arguments must name the operands in "
                                "order";
    } else if (!isa<FlatSymbolRefAttr, UnitAttr>(a)) {
      return emitOpError() << "an argument is a buffer index, a symbol or "
                              "unit (none), found "
                           << a;
    }
  }
  if (next != int64_t(getBuffers().size()))
    return emitOpError() << "has " << getBuffers().size()
                         << " buffer operands but " << next
                         << " buffer arguments";
  for (Value v : getBuffers())
    if (!v.getDefiningOp<BufferOp>())
      return emitOpError() << "buffer operands must be kiln_plan.buffer "
                              "results";
  return verifyGpuLaunches();
}

LogicalResult DispatchOp::verifyGpuLaunches() {
  ArrayRef<int64_t> scratch;
  if (auto s = getGpuScratchAttr()) {
    scratch = s.asArrayRef();
    if (!getGpuLaunchesAttr())
      return emitOpError() << "has gpu_scratch without gpu_launches";
    if (scratch.size() % 3 != 0 ||
        llvm::any_of(scratch, [](int64_t v) { return v < 0; }))
      return emitOpError() << "gpu_scratch holds (per_row, fixed, "
                              "per_position) triples of byte counts >= 0";
  }
  ArrayAttr launches = getGpuLaunchesAttr();
  if (!launches)
    return success();
  // The communicator runs a row gather alone (runtime/hip/HipCollectives).
  if (launches.empty() && getKernel() != "all_gather_rows")
    return emitOpError() << "gpu_launches is empty, which only "
                            "all_gather_rows (the communicator's alone) may be";
  const int64_t args = int64_t(getArgs().size());
  for (auto [i, a] : llvm::enumerate(launches)) {
    auto launch = cast<GpuLaunchAttr>(a);
    auto fail = [&]() {
      return emitOpError() << "launch " << i << " (" << launch.getKernel()
                           << "): ";
    };
    ArrayRef<int64_t> grid = launch.getGrid();
    for (size_t axis = 0; axis < 3; ++axis) {
      int64_t of = grid[GpuLaunchAttr::kAxisFields * axis + 3];
      if (of >= args)
        return fail() << "grid axis " << axis << " counts the rows of argument "
                      << of << " of " << args;
    }
    for (size_t j = 0; j < launch.getNumArgs(); ++j) {
      GpuArgPart part = launch.getArgPart(j);
      if (!GpuLaunchAttr::takesIndex(part))
        continue;
      int64_t index = launch.getArgIndex(j);
      int64_t limit =
          part == GpuArgPart::scratch ? int64_t(scratch.size() / 3) : args;
      if (index >= limit)
        return fail() << "argument " << j << " (" << stringifyGpuArgPart(part)
                      << " " << index << ") is out of range: the dispatch has "
                      << (part == GpuArgPart::scratch ? scratch.size() / 3
                                                      : size_t(args))
                      << (part == GpuArgPart::scratch ? " scratch buffers"
                                                      : " arguments");
    }
  }
  return success();
}

std::string kiln::plan::dispatchSignatureError(
    DispatchOp op,
    llvm::function_ref<std::optional<abi::RefKind>(FlatSymbolRefAttr)>
        symbolKind) {
  std::optional<abi::Kernel> kernel = kernelNamed(op.getKernel());
  if (!kernel)
    return "names no declared kernel";
  abi::Params params;
  std::string error = paramsFromAttr(*kernel, op.getParams(), params);
  if (!error.empty())
    return error;
  // Buffers are numbered by value, so a value passed twice is one buffer.
  llvm::DenseMap<Value, uint32_t> ids;
  std::vector<BufferOp> buffers;
  std::vector<abi::ArgRef> refs;
  for (Attribute a : op.getArgs()) {
    if (auto index = dyn_cast<IntegerAttr>(a)) {
      Value v = op.getBuffers()[index.getInt()];
      auto [it, fresh] = ids.try_emplace(v, uint32_t(buffers.size()));
      if (fresh)
        buffers.push_back(v.getDefiningOp<BufferOp>());
      refs.push_back({abi::RefKind::Buffer, it->second});
    } else if (auto symbol = dyn_cast<FlatSymbolRefAttr>(a)) {
      std::optional<abi::RefKind> kind = symbolKind(symbol);
      if (!kind)
        return "@" + symbol.getValue().str() +
               " names no kiln_plan.weight or kiln_plan.cache";
      refs.push_back({*kind, 0});
    } else {
      refs.push_back({abi::RefKind::None, 0});
    }
  }
  return abi::signatureError(*kernel, refs, params, [&](uint32_t index) {
    BufferOp b = buffers[index];
    return abi::BufferFacts{b.getName().str(),
                            b.getElementType().isInteger(32)
                                ? abi::ElemType::I32
                                : abi::ElemType::F32,
                            abi::RowsKind(b.getRows()), b.getRowElems()};
  });
}

LogicalResult DispatchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  std::string error = dispatchSignatureError(
      *this, [&](FlatSymbolRefAttr symbol) -> std::optional<abi::RefKind> {
        Operation *decl = symbolTable.lookupNearestSymbolFrom(*this, symbol);
        if (isa_and_nonnull<WeightOp>(decl))
          return abi::RefKind::Weight;
        if (isa_and_nonnull<CacheOp>(decl))
          return abi::RefKind::Cache;
        return std::nullopt;
      });
  if (!error.empty())
    return emitOpError() << getKernel() << ": " << error;
  return success();
}

void kiln::plan::nameBuffers(PlanOp plan) {
  Block &body = plan.getBody().front();
  int64_t index = 0;
  for (auto buffer : body.getOps<BufferOp>()) {
    if (!buffer.getInput())
      buffer.setName("t" + std::to_string(index));
    ++index;
  }
  auto ret = cast<ReturnOp>(body.back());
  if (ret.getOutputs().size() < 2)
    return;
  ret.getOutputs()[abi::kOutputLogits].getDefiningOp<BufferOp>().setName(
      "logits");
  ret.getOutputs()[abi::kOutputHidden].getDefiningOp<BufferOp>().setName(
      "hidden");
}
