//===- KilnVerify.cpp - kiln op verifiers ---------------------------------===//
//
// Every message says what was expected and what was found. Each one has an
// `expected-error` twin in test/dialects/kiln/invalid.mlir.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "support/abi/MoeRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kiln;

namespace {

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return s;
}

std::string shapeString(Type type) {
  return shapeString(cast<ShapedType>(type).getShape());
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Two dims agree when equal or when either is dynamic.
bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool shapesAgree(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!dimsAgree(x, y))
      return false;
  return true;
}

LogicalResult expectRank(Operation *op, StringRef what, Value v, int64_t rank) {
  int64_t found = tensorType(v).getRank();
  if (found != rank)
    return op->emitOpError()
           << what << " must have rank " << rank << ", found rank " << found;
  return success();
}

LogicalResult expectShape(Operation *op, StringRef what,
                          ArrayRef<int64_t> shape, ArrayRef<int64_t> expected) {
  if (!shapesAgree(shape, expected))
    return op->emitOpError()
           << what << " must have shape " << shapeString(expected) << ", found "
           << shapeString(shape);
  return success();
}

LogicalResult expectShape(Operation *op, StringRef what, Value v,
                          ArrayRef<int64_t> expected) {
  return expectShape(op, what, tensorType(v).getShape(), expected);
}

/// 1-D integer tensors of token-level metadata (ids, sequence ids, positions).
LogicalResult expectTokenVector(Operation *op, StringRef what, Value v,
                                int64_t tokens) {
  if (failed(expectRank(op, what, v, 1)))
    return failure();
  return expectShape(op, what, v, {tokens});
}

/// The rules of block-scaled values and scales (`kiln.dequantize`,
/// `kiln.mx_matmul`, `kiln.mla_attention` and `!kiln.block_scaled`).
LogicalResult checkBlockScaled(function_ref<InFlightDiagnostic()> emitError,
                               RankedTensorType vt, RankedTensorType st,
                               ArrayRef<int64_t> block) {
  if (vt.getRank() < 2)
    return emitError() << "values must have rank >= 2, found rank "
                       << vt.getRank();
  if (vt.getRank() != st.getRank())
    return emitError() << "values and scales must have the same rank, found "
                       << vt.getRank() << " and " << st.getRank();
  if (block.size() != 2)
    return emitError() << "block must have 2 entries, found " << block.size();
  if (block[0] <= 0 || block[1] <= 0)
    return emitError() << "block sizes must be positive, found "
                       << shapeString(block);
  Type ve = vt.getElementType(), se = st.getElementType();
  if (isa<Float4E2M1FNType>(ve)) {
    if (!isa<Float8E8M0FNUType>(se))
      return emitError() << "f4E2M1FN values need f8E8M0FNU scales, found "
                         << se;
    if (block[0] != 1 || block[1] != 32)
      return emitError() << "MXFP4 block must be [1, 32], found "
                         << shapeString(block);
  } else if (isa<Float8E4M3FNType>(ve)) {
    if (!se.isF32())
      return emitError() << "f8E4M3FN values need f32 scales, found " << se;
  } else {
    return emitError() << "values must be f4E2M1FN or f8E4M3FN, found " << ve;
  }
  SmallVector<int64_t> expected(vt.getShape());
  int64_t r = vt.getRank();
  for (int i = 0; i < 2; ++i) {
    int64_t &d = expected[r - 2 + i];
    if (!ShapedType::isDynamic(d))
      d = (d + block[i] - 1) / block[i];
  }
  if (!shapesAgree(st.getShape(), expected))
    return emitError() << "scales must have shape " << shapeString(expected)
                       << " (values shape divided by the block, rounded up), "
                          "found "
                       << shapeString(st.getShape());
  return success();
}

/// The rules above for an op's `values` and `scales` operands.
LogicalResult verifyBlockScaled(Operation *op, Value values, Value scales,
                                ArrayRef<int64_t> block) {
  return checkBlockScaled([op] { return op->emitOpError(); },
                          tensorType(values), tensorType(scales), block);
}

/// `lhs` [T, K] times a [N, K] weight gives `result` [T, N].
LogicalResult verifyLinear(Operation *op, Value lhs, ArrayRef<int64_t> weight,
                           Value result) {
  if (failed(expectRank(op, "lhs", lhs, 2)))
    return failure();
  if (weight.size() != 2)
    return op->emitOpError()
           << "the weight must be 2-D [N, K], found rank " << weight.size();
  int64_t k = tensorType(lhs).getDimSize(1);
  if (!dimsAgree(k, weight[1]))
    return op->emitOpError() << "contraction mismatch: lhs has K = " << k
                             << ", the weight has K = " << weight[1];
  return expectShape(op, "result", result,
                     {tensorType(lhs).getDimSize(0), weight[0]});
}

LogicalResult verifyLastDimVector(Operation *op, StringRef what, Value v,
                                  Value input) {
  int64_t d = tensorType(input).getShape().back();
  if (tensorType(v).getRank() != 1 ||
      !dimsAgree(tensorType(v).getDimSize(0), d))
    return op->emitOpError()
           << what << " must be 1-D with the input's last dimension [" << d
           << "], found " << shapeString(v.getType());
  return success();
}

LogicalResult expectI32(Operation *op, StringRef what, Value v) {
  Type e = tensorType(v).getElementType();
  if (!e.isInteger(32))
    return op->emitOpError() << what << " must have i32 elements, found " << e;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  auto type = getType();
  if (getName().empty())
    return emitOpError() << "weight name must not be empty";
  if (!type.hasStaticShape())
    return emitOpError() << "weight must have a static shape, found "
                         << shapeString(type.getShape());
  if (isExpertStack() && type.getRank() < 3)
    return emitOpError() << "expert-stacked weight '" << getName()
                         << "' must have rank >= 3, found rank "
                         << type.getRank();
  if (getFirstExpert() && !isExpertStack())
    return emitOpError() << "'experts_from' needs an expert stack ({e} in "
                            "the name), found '"
                         << getName() << "'";
  if (auto slice = getSlice()) {
    if (slice->size() != 2 || ((*slice)[0] != 0 && (*slice)[0] != 1) ||
        (*slice)[1] < 0)
      return emitOpError() << "'slice' must be [axis, first] with axis 0 "
                              "(rows) or 1 (columns) and first >= 0";
    if (type.getRank() < 1 || (type.getRank() == 1 && (*slice)[0] != 0))
      return emitOpError() << "'slice' needs a matrix (or a stack of them) "
                              "or a vector (axis 0), found rank "
                           << type.getRank() << " with axis " << (*slice)[0];
  }
  Type e = type.getElementType();
  switch (getEncoding().getKind()) {
  case StorageKind::raw:
    if (!(e.isBF16() || e.isF16() || e.isF32() || e.isInteger(32) ||
          e.isInteger(64) ||
          isa<Float8E4M3FNType, Float4E2M1FNType, Float8E8M0FNUType>(e)))
      return emitOpError() << "raw weight elements must be bf16, f16, f32, "
                              "i32, i64, f8E4M3FN, f4E2M1FN or f8E8M0FNU, "
                              "found "
                           << e;
    // Raw f32 with source_scale: an FP8 or Quark MXFP4 source dequantized
    // at compile time with its block scales (kiln-partition-tensor, for a
    // slice that cuts the blocks).
    if (getSourceScale() && !e.isF32())
      return emitOpError() << "'source_scale' needs an mxfp4 encoding, or "
                              "f32 elements (a dequantized FP8 or MXFP4 "
                              "source), found a raw "
                           << e << " one";
    break;
  case StorageKind::mxfp4_values:
    // f32: Kiln's MXFP4 values stored dequantized (kiln-partition-tensor).
    if (!isa<Float4E2M1FNType>(e) && !e.isF32())
      return emitOpError() << "mxfp4_values encoding needs f4E2M1FN "
                              "elements (or f32, stored dequantized), found "
                           << e;
    break;
  case StorageKind::mxfp4_scales:
    if (!isa<Float8E8M0FNUType>(e))
      return emitOpError()
             << "mxfp4_scales encoding needs f8E8M0FNU elements, found " << e;
    break;
  }
  if (isa<Float4E2M1FNType>(e) && type.getShape().back() % 2 != 0)
    return emitOpError() << "f4E2M1FN weights are stored two per byte and "
                            "need an even last dimension, found "
                         << type.getShape().back();
  return success();
}

LogicalResult DequantizeOp::verify() {
  if (failed(verifyBlockScaled(*this, getValues(), getScales(), getBlock())))
    return failure();
  return expectShape(*this, "result", getResult(),
                     tensorType(getValues()).getShape());
}

LogicalResult
BlockScaledType::verify(function_ref<InFlightDiagnostic()> emitError,
                        RankedTensorType values, RankedTensorType scales,
                        ArrayRef<int64_t> block) {
  return checkBlockScaled(emitError, values, scales, block);
}

//===----------------------------------------------------------------------===//
// Dense math
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, "table", getTable(), 2)) ||
      failed(expectRank(*this, "ids", getIds(), 1)))
    return failure();
  return expectShape(*this, "result", getResult(),
                     {tensorType(getIds()).getDimSize(0),
                      tensorType(getTable()).getDimSize(1)});
}

LogicalResult MatmulOp::verify() {
  return verifyLinear(*this, getLhs(), tensorType(getRhs()).getShape(),
                      getResult());
}

LogicalResult MxMatmulOp::verify() {
  if (failed(verifyBlockScaled(*this, getValues(), getScales(), getBlock())))
    return failure();
  return verifyLinear(*this, getLhs(), tensorType(getValues()).getShape(),
                      getResult());
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyLastDimVector(*this, "weight", getWeight(), getInput())))
    return failure();
  return expectShape(*this, "result", getResult(),
                     tensorType(getInput()).getShape());
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyLastDimVector(*this, "weight", getWeight(), getInput())) ||
      failed(verifyLastDimVector(*this, "bias", getBias(), getInput())))
    return failure();
  return expectShape(*this, "result", getResult(),
                     tensorType(getInput()).getShape());
}

LogicalResult RopeOp::verify() {
  auto in = tensorType(getInput());
  if (in.getRank() != 2 && in.getRank() != 3)
    return emitOpError() << "input must be [T, D] or [T, heads, D], found rank "
                         << in.getRank();
  if (failed(expectTokenVector(*this, "positions", getPositions(),
                               in.getDimSize(0))))
    return failure();
  int64_t dim = in.getShape().back(), rot = getRotaryDim(), off = getOffset();
  if (rot <= 0 || rot % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, found "
                         << rot;
  if (off < 0 || off + rot > dim)
    return emitOpError() << "rotated dims [" << off << ", " << off + rot
                         << ") must lie within the last dimension (" << dim
                         << ")";
  return expectShape(*this, "result", getResult(), in.getShape());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult verifyBinary(Operation *op, Value lhs, Value rhs,
                                  Value result) {
  auto l = tensorType(lhs), r = tensorType(rhs);
  bool bias =
      r.getRank() == 1 && dimsAgree(r.getDimSize(0), l.getShape().back());
  if (!shapesAgree(l.getShape(), r.getShape()) && !bias)
    return op->emitOpError()
           << "rhs must have the shape of lhs " << shapeString(l.getShape())
           << " or be 1-D matching its last dimension, found "
           << shapeString(r.getShape());
  return expectShape(op, "result", result, l.getShape());
}

LogicalResult AddOp::verify() {
  return verifyBinary(*this, getLhs(), getRhs(), getResult());
}
LogicalResult MulOp::verify() {
  return verifyBinary(*this, getLhs(), getRhs(), getResult());
}

LogicalResult CastOp::verify() {
  return expectShape(*this, "result", getResult(),
                     tensorType(getInput()).getShape());
}

//===----------------------------------------------------------------------===//
// Selection and reductions
//===----------------------------------------------------------------------===//

LogicalResult TopKOp::verify() {
  auto in = tensorType(getInput());
  int64_t n = in.getShape().back(), k = getK();
  if (k < 1 || (!ShapedType::isDynamic(n) && k > n))
    return emitOpError() << "k must be in [1, " << n
                         << "] (the last dimension), found " << k;
  SmallVector<int64_t> expected(in.getShape());
  expected.back() = k;
  if (failed(expectShape(*this, "values", getValues(), expected)) ||
      failed(expectShape(*this, "indices", getIndices(), expected)))
    return failure();
  return expectI32(*this, "indices", getIndices());
}

LogicalResult GroupLimitOp::verify() {
  int64_t n = tensorType(getInput()).getShape().back();
  int64_t g = getNGroup(), keep = getTopkGroup();
  if (g < 1 || ShapedType::isDynamic(n) || n % g != 0)
    return emitOpError() << "n_group must be positive and divide the last "
                            "dimension ("
                         << n << "), found " << g;
  if (keep < 1 || keep > g)
    return emitOpError() << "topk_group must be in [1, " << g << "], found "
                         << keep;
  return success();
}

LogicalResult GatherOp::verify() {
  auto in = tensorType(getInput()), idx = tensorType(getIndices());
  if (in.getRank() != idx.getRank())
    return emitOpError() << "input and indices must have the same rank, found "
                         << in.getRank() << " and " << idx.getRank();
  if (!shapesAgree(in.getShape().drop_back(), idx.getShape().drop_back()))
    return emitOpError() << "indices must share the input's leading dims "
                         << shapeString(in.getShape().drop_back()) << ", found "
                         << shapeString(idx.getShape());
  return expectShape(*this, "result", getResult(), idx.getShape());
}

static LogicalResult verifyRowReduction(Operation *op, Value input,
                                        Value result) {
  auto in = tensorType(input);
  if (failed(expectShape(op, "result", result, in.getShape().drop_back())))
    return failure();
  return expectI32(op, "result", result);
}

LogicalResult ArgmaxOp::verify() {
  return verifyRowReduction(*this, getInput(), getResult());
}
LogicalResult SampleOp::verify() {
  return verifyRowReduction(*this, getLogits(), getResult());
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

static int64_t staticTrailingCount(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape.drop_front())
    n = ShapedType::isDynamic(d) ? ShapedType::kDynamic : n * d;
  return n;
}

LogicalResult ReshapeOp::verify() {
  auto in = tensorType(getInput()), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "reshape must keep the element type "
                         << in.getElementType() << ", found "
                         << out.getElementType();
  if (in.getRank() < 1 || out.getRank() < 1 ||
      !dimsAgree(in.getDimSize(0), out.getDimSize(0)))
    return emitOpError() << "reshape must keep the leading (token) dimension: "
                         << shapeString(in.getShape()) << " -> "
                         << shapeString(out.getShape());
  int64_t a = staticTrailingCount(in.getShape()),
          b = staticTrailingCount(out.getShape());
  if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b)
    return emitOpError() << "reshape must keep the elements per token: " << a
                         << " vs " << b;
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  auto first = tensorType(getInputs().front());
  int64_t axis = getAxis(), rank = first.getRank();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis must be in [0, " << rank << "), found "
                         << axis;
  SmallVector<int64_t> expected(first.getShape());
  expected[axis] = 0;
  for (Value v : getInputs()) {
    auto t = tensorType(v);
    if (t.getRank() != rank || t.getElementType() != first.getElementType())
      return emitOpError() << "inputs must share rank and element type, found "
                           << first << " and " << t;
    for (int64_t i = 0; i < rank; ++i) {
      if (i == axis)
        continue;
      if (!dimsAgree(t.getDimSize(i), first.getDimSize(i)))
        return emitOpError() << "inputs must agree outside the axis, found "
                             << shapeString(first.getShape()) << " and "
                             << shapeString(t.getShape());
    }
    int64_t &sum = expected[axis];
    sum = (ShapedType::isDynamic(sum) || t.isDynamicDim(axis))
              ? ShapedType::kDynamic
              : sum + t.getDimSize(axis);
  }
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult SplitOp::verify() {
  auto in = tensorType(getInput());
  int64_t axis = getAxis(), rank = in.getRank();
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis must be in [0, " << rank << "), found "
                         << axis;
  int64_t sum = 0;
  for (Value r : getResults()) {
    auto t = tensorType(r);
    SmallVector<int64_t> expected(in.getShape());
    expected[axis] = t.getRank() == rank ? t.getDimSize(axis) : 0;
    if (failed(expectShape(*this, "each result", r, expected)))
      return failure();
    sum = (ShapedType::isDynamic(sum) || t.isDynamicDim(axis))
              ? ShapedType::kDynamic
              : sum + t.getDimSize(axis);
  }
  if (!dimsAgree(sum, in.getDimSize(axis)))
    return emitOpError() << "result sizes along axis " << axis << " add up to "
                         << sum << ", expected " << in.getDimSize(axis);
  return success();
}

LogicalResult TakeRowsOp::verify() {
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have a leading row dimension";
  if (failed(expectRank(*this, "rows", getRows(), 1)))
    return failure();
  SmallVector<int64_t> expected(in.getShape());
  expected[0] = tensorType(getRows()).getDimSize(0);
  return expectShape(*this, "result", getResult(), expected);
}

//===----------------------------------------------------------------------===//
// KV cache and attention
//===----------------------------------------------------------------------===//

LogicalResult KvCacheOp::verify() {
  if (getWidth() <= 0)
    return emitOpError() << "width must be positive, found " << getWidth();
  if (!isa<FloatType>(getElementType()))
    return emitOpError() << "element type must be a float type, found "
                         << getElementType();
  return success();
}

/// Resolves `ref` to a kiln.kv_cache or reports what it found.
static FailureOr<KvCacheOp> lookupCache(Operation *op,
                                        SymbolTableCollection &tables,
                                        FlatSymbolRefAttr ref) {
  Operation *found = tables.lookupNearestSymbolFrom(op, ref.getAttr());
  auto cache = dyn_cast_or_null<KvCacheOp>(found);
  if (!cache)
    return op->emitOpError() << ref << " does not name a kiln.kv_cache";
  return cache;
}

/// The metadata operands common to cache and attention ops.
static LogicalResult verifyTokenMeta(Operation *op, Value seqIds,
                                     Value positions, int64_t tokens) {
  if (failed(expectTokenVector(op, "seq_ids", seqIds, tokens)) ||
      failed(expectTokenVector(op, "positions", positions, tokens)))
    return failure();
  return success();
}

LogicalResult KvCacheAppendOp::verify() {
  if (failed(expectRank(*this, "values", getValues(), 2)))
    return failure();
  return verifyTokenMeta(*this, getSeqIds(), getPositions(),
                         tensorType(getValues()).getDimSize(0));
}

LogicalResult KvCacheAppendOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = lookupCache(*this, tables, getCacheAttr());
  if (failed(cache))
    return failure();
  return expectShape(*this, "values", getValues(),
                     {tensorType(getValues()).getDimSize(0),
                      static_cast<int64_t>(cache->getWidth())});
}

LogicalResult KvCacheReadOp::verify() {
  return verifyTokenMeta(*this, getSeqIds(), getPositions(),
                         tensorType(getPositions()).getDimSize(0));
}

LogicalResult KvCacheReadOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = lookupCache(*this, tables, getCacheAttr());
  if (failed(cache))
    return failure();
  return expectShape(
      *this, "result", getResult(),
      {ShapedType::kDynamic, static_cast<int64_t>(cache->getWidth())});
}

LogicalResult GqaAttentionOp::verify() {
  if (failed(expectRank(*this, "q", getQ(), 3)))
    return failure();
  auto q = tensorType(getQ());
  if (failed(
          verifyTokenMeta(*this, getSeqIds(), getPositions(), q.getDimSize(0))))
    return failure();
  if (failed(expectRank(*this, "result", getResult(), 3)))
    return failure();
  return expectShape(
      *this, "result", getResult(),
      {q.getDimSize(0), q.getDimSize(1), getType().getDimSize(2)});
}

LogicalResult GqaAttentionOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto k = lookupCache(*this, tables, getKCacheAttr());
  if (failed(k))
    return failure();
  auto v = lookupCache(*this, tables, getVCacheAttr());
  if (failed(v))
    return failure();
  auto q = tensorType(getQ());
  int64_t hq = q.getDimSize(1), d = q.getDimSize(2),
          dv = getType().getDimSize(2);
  if (k->getWidth() % d != 0)
    return emitOpError() << "k_cache width " << k->getWidth()
                         << " must be a multiple of the head dim " << d;
  int64_t hk = k->getWidth() / d;
  if (hq % hk != 0)
    return emitOpError() << "query heads (" << hq
                         << ") must be a multiple of the KV heads (" << hk
                         << ")";
  if (v->getWidth() != hk * dv)
    return emitOpError() << "v_cache width must be KV heads x value dim = "
                         << hk * dv << ", found " << v->getWidth();
  return success();
}

LogicalResult MlaAttentionOp::verify() {
  if (failed(expectRank(*this, "q_nope", getQNope(), 3)) ||
      failed(expectRank(*this, "q_pe", getQPe(), 3)) ||
      failed(expectRank(*this, "kv_b", getKvB(), 2)) ||
      failed(expectRank(*this, "result", getResult(), 3)))
    return failure();
  auto qn = tensorType(getQNope());
  int64_t t = qn.getDimSize(0), heads = qn.getDimSize(1), dn = qn.getDimSize(2),
          dv = getType().getDimSize(2);
  if (failed(expectShape(*this, "q_pe", getQPe(),
                         {t, heads, tensorType(getQPe()).getDimSize(2)})) ||
      failed(verifyTokenMeta(*this, getSeqIds(), getPositions(), t)) ||
      failed(expectShape(*this, "result", getResult(), {t, heads, dv})))
    return failure();
  if (Value scales = getKvBScales()) {
    if (!getBlock())
      return emitOpError() << "kv_b_scales need the 'block' attribute";
    if (failed(verifyBlockScaled(*this, getKvB(), scales, *getBlock())))
      return failure();
  } else if (!isa<FloatType>(tensorType(getKvB()).getElementType())) {
    return emitOpError() << "unscaled kv_b must be float, found "
                         << tensorType(getKvB()).getElementType();
  }
  int64_t rows = tensorType(getKvB()).getDimSize(0);
  if (rows != heads * (dn + dv))
    return emitOpError() << "kv_b must have heads x (nope + v) = "
                         << heads * (dn + dv) << " rows, found " << rows;
  if (Value topk = getTopK()) {
    if (failed(expectRank(*this, "top_k", topk, 2)) ||
        failed(expectI32(*this, "top_k", topk)))
      return failure();
    if (!dimsAgree(tensorType(topk).getDimSize(0), t))
      return emitOpError() << "top_k must have one row per token";
  }
  return success();
}

LogicalResult MlaAttentionOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = lookupCache(*this, tables, getCacheAttr());
  if (failed(cache))
    return failure();
  int64_t width =
      tensorType(getKvB()).getDimSize(1) + tensorType(getQPe()).getDimSize(2);
  if (cache->getWidth() != width)
    return emitOpError() << "latent cache must be kv_lora_rank + rope dim = "
                         << width << " wide, found " << cache->getWidth();
  return success();
}

LogicalResult IndexerTopKOp::verify() {
  if (failed(expectRank(*this, "q", getQ(), 3)))
    return failure();
  auto q = tensorType(getQ());
  int64_t t = q.getDimSize(0);
  if (failed(
          expectShape(*this, "weights", getWeights(), {t, q.getDimSize(1)})) ||
      failed(verifyTokenMeta(*this, getSeqIds(), getPositions(), t)))
    return failure();
  if (getK() < 1)
    return emitOpError() << "k must be positive, found " << getK();
  if (failed(expectShape(*this, "result", getResult(),
                         {t, static_cast<int64_t>(getK())})))
    return failure();
  return expectI32(*this, "result", getResult());
}

LogicalResult IndexerTopKOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = lookupCache(*this, tables, getCacheAttr());
  if (failed(cache))
    return failure();
  int64_t d = tensorType(getQ()).getDimSize(2);
  if (cache->getWidth() != d)
    return emitOpError() << "indexer key cache must be " << d
                         << " wide (the q head dim), found "
                         << cache->getWidth();
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// The shape of an expert weight (a block-scaled one's values).
static ArrayRef<int64_t> weightShape(Value v) {
  return valuesType(v.getType()).getShape();
}

/// gate/up [E, I, H], down [E, H, I] given E and H; returns I.
static FailureOr<int64_t> verifyExpertStack(Operation *op, Value gate, Value up,
                                            Value down, int64_t e, int64_t h,
                                            StringRef prefix) {
  ArrayRef<int64_t> g = weightShape(gate);
  if (g.size() != 3)
    return op->emitOpError()
           << prefix << "gate must be [E, I, H], found " << shapeString(g);
  int64_t inter = g[1];
  std::string gateName = (prefix + "gate").str(),
              upName = (prefix + "up").str(),
              downName = (prefix + "down").str();
  if (failed(expectShape(op, gateName, g, {e, inter, h})) ||
      failed(expectShape(op, upName, weightShape(up), {e, inter, h})) ||
      failed(expectShape(op, downName, weightShape(down), {e, h, inter})))
    return failure();
  return inter;
}

/// The three matrices of an expert group are all float tensors or all
/// block-scaled with one block shape (one dispatch format for the group).
static LogicalResult verifyExpertFormat(Operation *op, Value gate, Value up,
                                        Value down, StringRef prefix) {
  auto blockOf = [](Value v) -> std::optional<ArrayRef<int64_t>> {
    if (auto scaled = dyn_cast<BlockScaledType>(v.getType()))
      return scaled.getBlock();
    return std::nullopt;
  };
  auto block = blockOf(gate);
  if (blockOf(up) == block && blockOf(down) == block)
    return success();
  return op->emitOpError()
         << prefix << "gate, " << prefix << "up and " << prefix
         << "down must be all float tensors or all block-scaled with one "
            "block, found "
         << gate.getType() << ", " << up.getType() << " and " << down.getType();
}

LogicalResult ExpertsOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 2)) ||
      failed(expectRank(*this, "indices", getIndices(), 2)))
    return failure();
  auto in = tensorType(getInput()), idx = tensorType(getIndices());
  if (failed(expectShape(*this, "weights", getWeights(), idx.getShape())) ||
      failed(expectI32(*this, "indices", getIndices())))
    return failure();
  if (!dimsAgree(idx.getDimSize(0), in.getDimSize(0)))
    return emitOpError() << "indices must have one row per token";
  int64_t e = tensorType(getGate()).getRank() == 3
                  ? tensorType(getGate()).getDimSize(0)
                  : ShapedType::kDynamic;
  if (failed(verifyExpertStack(*this, getGate(), getUp(), getDown(), e,
                               in.getDimSize(1), "")))
    return failure();
  return expectShape(*this, "result", getResult(), in.getShape());
}

/// The routing operands kiln.moe and kiln.dispatch_rows share: input [T,
/// H], router [E, H], router_bias [E] and the selection rule
/// (support/abi/MoeRules.h). Sets `e` and `h`.
template <typename Op>
LogicalResult verifyRouting(Op op, int64_t &e, int64_t &h) {
  if (failed(expectRank(op, "input", op.getInput(), 2)) ||
      failed(expectRank(op, "router", op.getRouter(), 2)))
    return failure();
  h = tensorType(op.getInput()).getDimSize(1);
  e = tensorType(op.getRouter()).getDimSize(0);
  if (failed(expectShape(op, "router", op.getRouter(), {e, h})) ||
      failed(expectShape(op, "router_bias", op.getRouterBias(), {e})))
    return failure();
  abi::MoeRouting routing{e, int64_t(op.getTopK()), int64_t(op.getNGroup()),
                          int64_t(op.getTopkGroup())};
  if (abi::MoeRuleError rule = abi::checkMoeRouting(routing))
    return op.emitOpError() << rule.field << " " << rule.message;
  return success();
}

LogicalResult MoeOp::verify() {
  int64_t e = 0, h = 0;
  if (failed(verifyRouting(*this, e, h)))
    return failure();
  auto in = tensorType(getInput());
  if (abi::MoeRuleError rule = abi::checkMoeBlockSize(getBlockSize()))
    return emitOpError() << rule.field << " " << rule.message;

  if (!getShared().empty() && getShared().size() != 3)
    return emitOpError() << "the shared expert takes 3 operands (gate, up, "
                            "down), found "
                         << getShared().size();
  if (failed(verifyExpertFormat(*this, getGate(), getUp(), getDown(), "")))
    return failure();
  // One rank's share of the experts: [offset, offset + El) of the E.
  int64_t local = e;
  if (getExpertOffset()) {
    ArrayRef<int64_t> g = weightShape(getGate());
    local = g.size() == 3 ? g[0] : e;
    int64_t offset = int64_t(*getExpertOffset());
    if (local < 1 || offset + local > e)
      return emitOpError() << "local experts [" << offset << ", "
                           << offset + local << ") must lie inside the " << e
                           << " the router chooses from";
  }
  if (failed(verifyExpertStack(*this, getGate(), getUp(), getDown(), local, h,
                               "")))
    return failure();
  if (getSharedOwnRows() && !getInput().getDefiningOp<DispatchRowsOp>())
    return emitOpError() << "shared_own_rows reads the own rows a "
                            "kiln.dispatch_rows puts first; the input is not "
                            "one's rows";
  if (Value sharedGate = getSharedGate()) {
    if (failed(verifyExpertFormat(*this, sharedGate, getSharedUp(),
                                  getSharedDown(), "shared_")))
      return failure();
    ArrayRef<int64_t> sg = weightShape(sharedGate);
    if (sg.size() != 2)
      return emitOpError() << "shared_gate must be [Is, H], found "
                           << shapeString(sg);
    int64_t is = sg[0];
    if (failed(expectShape(*this, "shared_gate", sg, {is, h})) ||
        failed(expectShape(*this, "shared_up", weightShape(getSharedUp()),
                           {is, h})) ||
        failed(expectShape(*this, "shared_down", weightShape(getSharedDown()),
                           {h, is})))
      return failure();
  }
  return expectShape(*this, "result", getResult(), in.getShape());
}

namespace {

/// kiln.all_gather_rows and kiln.reduce_scatter_rows: the same rows shape
/// either side, the leading dimension dynamic on both.
LogicalResult verifyRowExchange(Operation *op, Value input, Value result) {
  RankedTensorType in = tensorType(input), out = tensorType(result);
  if (in.getRank() < 1 || !in.isDynamicDim(0) || !out.isDynamicDim(0))
    return op->emitOpError()
           << "exchanges whole rows: expected a leading dynamic (token) "
              "dimension on input and result, found "
           << shapeString(in) << " -> " << shapeString(out);
  if (in.getShape().drop_front() != out.getShape().drop_front())
    return op->emitOpError()
           << "result rows " << shapeString(out.getShape().drop_front())
           << " differ from input rows "
           << shapeString(in.getShape().drop_front());
  return success();
}

} // namespace

LogicalResult AllGatherRowsOp::verify() {
  return verifyRowExchange(*this, getInput(), getResult());
}

LogicalResult ReduceScatterRowsOp::verify() {
  return verifyRowExchange(*this, getInput(), getResult());
}

LogicalResult DispatchRowsOp::verify() {
  int64_t e = 0, h = 0;
  if (failed(verifyRouting(*this, e, h)))
    return failure();
  if (e % int64_t(getExpertsPerRank()) != 0)
    return emitOpError() << "experts_per_rank " << getExpertsPerRank()
                         << " does not divide the router's " << e << " experts";
  if (failed(verifyRowExchange(*this, getInput(), getRows())))
    return failure();
  int64_t ranks = e / int64_t(getExpertsPerRank());
  RankedTensorType routes = tensorType(getRoutes());
  int64_t words = (ranks + 31) / 32;
  if (routes.getRank() != 2 || !routes.isDynamicDim(0) ||
      routes.getDimSize(1) != words)
    return emitOpError() << "routes must be [?, " << words << "] (a bit for "
                         << "each of " << ranks << " ranks), found "
                         << shapeString(routes);
  return success();
}

LogicalResult CombineRowsOp::verify() {
  auto dispatch = getRoutes().getDefiningOp<DispatchRowsOp>();
  if (!dispatch || getRoutes() != dispatch.getRoutes())
    return emitOpError() << "routes must be the routes of a kiln.dispatch_rows";
  if (failed(verifyRowExchange(*this, getInput(), getResult())))
    return failure();
  return expectShape(*this, "result", getResult(),
                     tensorType(dispatch.getInput()).getShape());
}
