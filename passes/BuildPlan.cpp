//===- BuildPlan.cpp - Fused kiln functions to kiln_plan plans ------------===//
//
// kiln-build-plan: lowers each entry function (@prefill, @decode and, when
// present, @draft) of a fused module to a kiln_plan.plan of kernel
// dispatches (support/abi/Kernels.td), one buffer per value (a kiln.reshape
// shares its input's); kiln-reuse-buffers shares them afterwards. The
// weights the plans read become kiln_plan.weight ops, deduplicated across
// plans, the caches kiln_plan.cache ops; the entry functions and their
// kiln.kv_cache declarations are replaced.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/kiln/IR/KilnOps.h"
#include "dialects/plan/IR/PlanOps.h"
#include "support/abi/KernelAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace kiln {
#define GEN_PASS_DEF_KILNBUILDPLANPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using abi::Kernel;
using plan::Rows;

namespace {

/// A dispatch argument while lowering: a buffer, a weight or cache symbol,
/// or neither (an absent optional argument).
struct Arg {
  Value buffer;
  FlatSymbolRefAttr symbol;
  abi::RefKind kind = abi::RefKind::None;
};

/// Product of the dims between the row dim and `axis` (the blocks a split
/// or concat copies per row); buffers may be reused across shapes, so the
/// plan carries it.
int64_t outerDims(Type type, int64_t axis) {
  auto shape = cast<RankedTensorType>(type).getShape();
  int64_t outer = 1;
  for (int64_t d = 1; d < axis; ++d)
    outer *= shape[d];
  return outer;
}

/// Weights and caches shared by all plans of the program, created as ops
/// once the entry functions are gone (their symbols would otherwise meet
/// the kiln.kv_cache declarations').
class ProgramTables {
public:
  explicit ProgramTables(ModuleOp module) : module_(module) {}

  FailureOr<Arg> dense(Operation *user, Value v) {
    auto w = v.getDefiningOp<WeightOp>();
    if (!w)
      return user->emitError("expected a kiln.weight operand");
    auto type = w.getType();
    Type e = type.getElementType();
    EncodingAttr encoding = w.getEncoding();
    // Kiln's MXFP4 values stored dequantized (kiln-partition-tensor).
    bool mxfp4 = encoding.getKind() == StorageKind::mxfp4_values && e.isF32();
    if ((encoding.getKind() != StorageKind::raw && !mxfp4) ||
        !(e.isF32() || e.isBF16() || e.isF16()))
      return user->emitError() << "weight '" << w.getName()
                               << "' is not a plain float tensor; quantized "
                                  "weights must come with their scales";
    WeightDecl decl = base(w);
    decl.kind =
        mxfp4 ? plan::WeightKind::mxfp4_dequant : plan::WeightKind::dense;
    decl.dtype = type.getRank() == 1 ? Float32Type::get(e.getContext()) : e;
    decl.floor =
        mxfp4 && encoding.getRule() && *encoding.getRule() == ScaleRule::floor;
    // The scales of a dequantized FP8 or MXFP4 source (or, for
    // mxfp4_dequant, of the FP8 source Kiln quantizes).
    if (auto src = w.getSourceScale())
      decl.scales = src->str();
    return intern(std::move(decl));
  }

  FailureOr<Arg> scaled(Operation *user, Value values, Value scales,
                        ArrayRef<int64_t> block) {
    auto v = values.getDefiningOp<WeightOp>();
    auto s = scales.getDefiningOp<WeightOp>();
    if (!v || !s)
      return user->emitError("block-scaled operands must be kiln.weight ops");
    WeightDecl decl = base(v);
    Type ve = v.getType().getElementType();
    StorageKind vk = v.getEncoding().getKind(), sk = s.getEncoding().getKind();
    if (vk == StorageKind::mxfp4_values && sk == StorageKind::mxfp4_scales) {
      decl.kind = plan::WeightKind::mxfp4_quant;
      decl.dtype = Float4E2M1FNType::get(ve.getContext());
      auto rule = v.getEncoding().getRule();
      decl.floor = rule && *rule == ScaleRule::floor;
      if (auto src = v.getSourceScale())
        decl.scales = src->str();
    } else if (vk == StorageKind::raw && sk == StorageKind::raw &&
               isa<Float4E2M1FNType>(ve)) {
      decl.kind = plan::WeightKind::mxfp4_raw;
      decl.dtype = ve;
      decl.scales = s.getName().str();
    } else if (vk == StorageKind::raw && sk == StorageKind::raw &&
               isa<Float8E4M3FNType>(ve)) {
      if (block.size() != 2 || block[0] != 128 || block[1] != 128)
        return user->emitError("FP8 weights need 128x128 blocks");
      decl.kind = plan::WeightKind::fp8_block;
      decl.dtype = ve;
      decl.scales = s.getName().str();
    } else {
      return user->emitError()
             << "unsupported weight encoding pair for '" << v.getName() << "'";
    }
    // A sliced matrix's scales are the same slice, counted in blocks.
    auto [axis, first] = v.sliceOf();
    auto [scaleAxis, scaleFirst] = s.sliceOf();
    int64_t blockDim = axis < 0 ? 1 : block[size_t(axis)];
    if (axis != scaleAxis || scaleFirst * blockDim != first)
      return user->emitError()
             << "weight '" << v.getName()
             << "' and its scales are not sliced alike (values slice [" << axis
             << ", " << first << "], scales [" << scaleAxis << ", "
             << scaleFirst << "] with blocks of " << blockDim << ")";
    return intern(std::move(decl));
  }

  Arg cache(FlatSymbolRefAttr ref, StringRef owner) {
    std::string name = ref.getValue().str();
    if (!cacheNames_.count(name)) {
      auto op =
          cast<KvCacheOp>(SymbolTable::lookupSymbolIn(module_, ref.getAttr()));
      cacheNames_.insert(name);
      caches_.push_back(
          {name, int64_t(op.getWidth()), op.getElementType(), owner.str()});
      order_.push_back({false, caches_.size() - 1});
    }
    return {Value(), ref, abi::RefKind::Cache};
  }

  /// The kiln_plan.weight and kiln_plan.cache ops, in the order they were
  /// first used, at the start of the module.
  void materialize() {
    OpBuilder b(module_.getBody(), module_.getBody()->begin());
    Location loc = module_.getLoc();
    for (auto [isWeight, index] : order_) {
      if (!isWeight) {
        const CacheDecl &c = caches_[index];
        plan::CacheOp::create(b, loc, c.name, c.width, c.owner, c.type);
        continue;
      }
      const WeightDecl &w = weights_[index];
      plan::WeightOp::create(
          b, loc, w.symbol, w.source, w.kind, w.dtype,
          b.getDenseI64ArrayAttr(w.shape),
          w.scales.empty() ? StringAttr() : b.getStringAttr(w.scales),
          w.experts, w.firstExpert, w.floor,
          w.sliceAxis < 0
              ? DenseI64ArrayAttr()
              : b.getDenseI64ArrayAttr({w.sliceAxis, w.sliceFirst}));
    }
  }

private:
  struct WeightDecl {
    std::string symbol, source, scales;
    plan::WeightKind kind = plan::WeightKind::dense;
    Type dtype;
    std::vector<int64_t> shape;
    int64_t experts = 0, firstExpert = 0;
    int64_t sliceAxis = -1, sliceFirst = 0;
    bool floor = false;
    std::string key() const {
      std::ostringstream os;
      std::string type;
      llvm::raw_string_ostream ts(type);
      dtype.print(ts);
      os << int(kind) << '|' << source << '|' << scales << '|' << type << '|'
         << floor << '|' << firstExpert << '|' << sliceAxis << '|'
         << sliceFirst;
      for (int64_t d : shape)
        os << ',' << d;
      return os.str();
    }
  };
  struct CacheDecl {
    std::string name;
    int64_t width;
    Type type;
    std::string owner;
  };

  static WeightDecl base(WeightOp w) {
    WeightDecl decl;
    decl.source = w.getName().str();
    decl.shape.assign(w.getType().getShape().begin(),
                      w.getType().getShape().end());
    if (w.isExpertStack())
      decl.experts = decl.shape.front();
    if (auto first = w.getFirstExpert())
      decl.firstExpert = int64_t(*first);
    std::tie(decl.sliceAxis, decl.sliceFirst) = w.sliceOf();
    return decl;
  }

  Arg intern(WeightDecl decl) {
    std::string key = decl.key();
    auto it = weightByKey_.find(key);
    if (it == weightByKey_.end()) {
      decl.symbol = "w" + std::to_string(weights_.size());
      it = weightByKey_.emplace(key, weights_.size()).first;
      weights_.push_back(std::move(decl));
      order_.push_back({true, weights_.size() - 1});
    }
    return {Value(),
            FlatSymbolRefAttr::get(module_.getContext(),
                                   weights_[it->second].symbol),
            abi::RefKind::Weight};
  }

  ModuleOp module_;
  std::vector<WeightDecl> weights_;
  std::vector<CacheDecl> caches_;
  std::vector<std::pair<bool, size_t>> order_;
  std::map<std::string, size_t> weightByKey_;
  std::set<std::string> cacheNames_;
};

/// One entry function to one kiln_plan.plan.
class PlanLowering {
public:
  PlanLowering(ProgramTables &tables, func::FuncOp fn, plan::PlanOp plan)
      : tables_(tables), fn_(fn), plan_(plan), buffers_(plan.getContext()),
        dispatches_(plan.getContext()) {
    owner_ = fn.getName() == "draft" ? "draft" : "main";
  }

  LogicalResult run();

private:
  Value newBuffer(Value v, Rows rows, bool input, StringRef name);
  Arg out(Value v, Rows rows) {
    return {newBuffer(v, rows, false, ""), {}, abi::RefKind::Buffer};
  }
  FailureOr<Arg> operand(Operation *op, Value v);
  Arg buffer(Value v) {
    return {bufferOf_.lookup(v), {}, abi::RefKind::Buffer};
  }
  LogicalResult lower(Operation *op);
  LogicalResult emit(Kernel kernel, Operation *op, ArrayRef<Arg> args,
                     const abi::Params &params = {});
  LogicalResult lowerByDeclaration(Kernel kernel, Operation *op, Rows rows);

  ProgramTables &tables_;
  func::FuncOp fn_;
  plan::PlanOp plan_;
  std::string owner_;
  OpBuilder buffers_, dispatches_;
  Operation *lastBuffer_ = nullptr;
  llvm::DenseMap<Value, Value> bufferOf_;
  llvm::DenseMap<Value, Rows> rowsOf_;
};

Value PlanLowering::newBuffer(Value v, Rows rows, bool input, StringRef name) {
  auto type = cast<RankedTensorType>(v.getType());
  // Buffers are declared together, before the dispatches.
  if (lastBuffer_)
    buffers_.setInsertionPointAfter(lastBuffer_);
  auto b = plan::BufferOp::create(
      buffers_, v.getLoc(), plan::BufferType::get(v.getContext()), name, rows,
      input, buffers_.getDenseI64ArrayAttr(type.getShape().drop_front()),
      isa<IntegerType>(type.getElementType()) ? Type(buffers_.getI32Type())
                                              : Type(buffers_.getF32Type()));
  lastBuffer_ = b;
  bufferOf_[v] = b;
  rowsOf_[v] = rows;
  return b;
}

FailureOr<Arg> PlanLowering::operand(Operation *op, Value v) {
  if (v.getDefiningOp<WeightOp>())
    return tables_.dense(op, v);
  Value b = bufferOf_.lookup(v);
  if (!b)
    return op->emitError("operand has no planned buffer");
  return Arg{b, {}, abi::RefKind::Buffer};
}

/// Appends a dispatch and checks it against the kernel's declaration
/// (support/abi/Kernels.td), so a lowering that breaks the contract fails
/// here, naming the op, instead of at load.
LogicalResult PlanLowering::emit(Kernel kernel, Operation *op,
                                 ArrayRef<Arg> args,
                                 const abi::Params &params) {
  SmallVector<Value> operands;
  SmallVector<Attribute> refs;
  for (const Arg &a : args) {
    if (a.buffer) {
      refs.push_back(dispatches_.getI32IntegerAttr(int32_t(operands.size())));
      operands.push_back(a.buffer);
    } else if (a.symbol) {
      refs.push_back(a.symbol);
    } else {
      refs.push_back(dispatches_.getUnitAttr());
    }
  }
  auto d = plan::DispatchOp::create(
      dispatches_, op->getLoc(), abi::kKernelNames[size_t(kernel)], operands,
      dispatches_.getArrayAttr(refs),
      plan::paramsToAttr(op->getContext(), params), /*gpu_launches=*/nullptr,
      /*gpu_scratch=*/nullptr);
  std::string error = plan::dispatchSignatureError(
      d, [&](FlatSymbolRefAttr symbol) -> std::optional<abi::RefKind> {
        for (const Arg &a : args)
          if (a.symbol == symbol)
            return a.kind;
        return std::nullopt;
      });
  if (error.empty())
    return success();
  d.erase();
  return op->emitError() << "lowers to a " << abi::kKernelNames[size_t(kernel)]
                         << " dispatch that breaks its declaration: " << error;
}

LogicalResult PlanLowering::run() {
  Block &body = fn_.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder end(&plan_.getBody().front(), plan_.getBody().front().end());
  auto planRet = plan::ReturnOp::create(end, ret.getLoc(), ValueRange{});
  buffers_.setInsertionPoint(planRet);
  dispatches_.setInsertionPoint(planRet);
  // Inputs: ids, seq, pos, rows (Selected), [hidden].
  static const char *kInputNames[] = {"token_ids", "seq_ids", "positions",
                                      "logit_rows", "hidden_in"};
  for (BlockArgument arg : body.getArguments()) {
    unsigned n = arg.getArgNumber();
    if (!isa<RankedTensorType>(arg.getType()))
      return fn_.emitError()
             << "argument #" << n << " of @" << fn_.getName()
             << " must be a ranked tensor (a buffer), found " << arg.getType();
    newBuffer(arg, n == abi::kInputLogitRows ? Rows::selected : Rows::tokens,
              /*input=*/true, n < 5 ? kInputNames[n] : "input");
  }
  for (Operation &op : body.without_terminator())
    if (failed(lower(&op)))
      return failure();
  SmallVector<Value> outputs;
  for (Value v : ret.getOperands()) {
    Value b = bufferOf_.lookup(v);
    if (!b)
      return ret.emitError("returned value has no buffer");
    outputs.push_back(b);
  }
  planRet.getOutputsMutable().assign(outputs);
  plan::nameBuffers(plan_);
  return success();
}

LogicalResult PlanLowering::lower(Operation *op) {
  // Ops that produce no dispatch.
  if (isa<WeightOp, BlockScaledOp>(op))
    return success();
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    bufferOf_[r.getResult()] = bufferOf_.lookup(r.getInput());
    rowsOf_[r.getResult()] = rowsOf_.lookup(r.getInput());
    return success();
  }

  // Results take their rows from the first activation operand.
  Rows rows = Rows::tokens;
  for (Value v : op->getOperands())
    if (bufferOf_.count(v)) {
      rows = rowsOf_.lookup(v);
      break;
    }
  // The row exchanges of data-parallel attention change the row kind.
  if (isa<AllGatherRowsOp>(op))
    rows = Rows::gathered;
  else if (isa<ReduceScatterRowsOp>(op))
    rows = Rows::tokens;
  const Arg none;
  auto unary = [&](Kernel k, Value in, Value res,
                   const abi::Params &params = {}) -> LogicalResult {
    FailureOr<Arg> a = operand(op, in);
    if (failed(a))
      return failure();
    return emit(k, op, {*a, out(res, rows)}, params);
  };
  auto binary = [&](Kernel k, Value l, Value r, Value res) -> LogicalResult {
    FailureOr<Arg> a = operand(op, l);
    if (failed(a))
      return failure();
    FailureOr<Arg> b = operand(op, r);
    if (failed(b))
      return failure();
    return emit(k, op, {*a, *b, out(res, rows)});
  };
  auto cache = [&](FlatSymbolRefAttr ref) {
    return tables_.cache(ref, owner_);
  };

  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    FailureOr<Arg> t = operand(op, e.getTable());
    if (failed(t))
      return failure();
    return emit(Kernel::Embedding, op, {buffer(e.getIds()), *t, out(e, rows)});
  }
  if (auto n = dyn_cast<RmsNormOp>(op)) {
    FailureOr<Arg> w = operand(op, n.getWeight());
    if (failed(w))
      return failure();
    return emit(Kernel::RmsNorm, op, {buffer(n.getInput()), *w, out(n, rows)},
                abi::RmsNormParams{n.getEpsilon().convertToFloat()});
  }
  if (auto n = dyn_cast<LayerNormOp>(op)) {
    FailureOr<Arg> w = operand(op, n.getWeight());
    FailureOr<Arg> b = failed(w) ? w : operand(op, n.getBias());
    if (failed(b))
      return failure();
    return emit(Kernel::LayerNorm, op,
                {buffer(n.getInput()), *w, *b, out(n, rows)},
                abi::LayerNormParams{n.getEpsilon().convertToFloat()});
  }
  if (auto m = dyn_cast<MatmulOp>(op))
    return binary(Kernel::Matmul, m.getLhs(), m.getRhs(), m);
  if (auto m = dyn_cast<MxMatmulOp>(op)) {
    FailureOr<Arg> w =
        tables_.scaled(op, m.getValues(), m.getScales(), m.getBlock());
    if (failed(w))
      return failure();
    return emit(Kernel::Matmul, op, {buffer(m.getLhs()), *w, out(m, rows)});
  }
  if (auto r = dyn_cast<RopeOp>(op)) {
    auto type = cast<RankedTensorType>(r.getInput().getType());
    abi::RopeParams p;
    p.style = r.getStyle() == RopeStyle::interleaved ? 0 : 1;
    p.offset = static_cast<int64_t>(r.getOffset());
    p.rotaryDim = static_cast<int64_t>(r.getRotaryDim());
    p.heads = type.getRank() == 3 ? type.getDimSize(1) : 1;
    p.theta = r.getTheta().convertToFloat();
    return emit(Kernel::Rope, op,
                {buffer(r.getInput()), buffer(r.getPositions()), out(r, rows)},
                p);
  }
  if (auto s = dyn_cast<ScaleOp>(op))
    return unary(Kernel::Scale, s.getInput(), s,
                 abi::ScaleParams{s.getFactor().convertToFloat()});
  if (auto s = dyn_cast<NormalizeOp>(op))
    return unary(Kernel::Normalize, s.getInput(), s,
                 abi::NormalizeParams{s.getEpsilon().convertToFloat()});
  if (auto a = dyn_cast<AddOp>(op))
    return binary(Kernel::Add, a.getLhs(), a.getRhs(), a);
  if (auto m = dyn_cast<MulOp>(op))
    return binary(Kernel::Mul, m.getLhs(), m.getRhs(), m);
  if (auto c = dyn_cast<CastOp>(op)) {
    // Activations are stored as f32; a cast is a copy.
    return unary(Kernel::Scale, c.getInput(), c, abi::ScaleParams{1.0f});
  }
  if (auto t = dyn_cast<TopKOp>(op)) {
    Arg values = out(t.getValues(), rows);
    return emit(Kernel::TopK, op,
                {buffer(t.getInput()), values, out(t.getIndices(), rows)},
                abi::TopKParams{static_cast<int64_t>(t.getK())});
  }
  if (auto g = dyn_cast<GroupLimitOp>(op)) {
    return emit(Kernel::GroupLimit, op, {buffer(g.getInput()), out(g, rows)},
                abi::GroupLimitParams{static_cast<int64_t>(g.getNGroup()),
                                      static_cast<int64_t>(g.getTopkGroup())});
  }
  if (auto g = dyn_cast<GatherOp>(op))
    return binary(Kernel::Gather, g.getInput(), g.getIndices(), g);
  if (auto a = dyn_cast<ArgmaxOp>(op))
    return unary(Kernel::Argmax, a.getInput(), a);
  if (auto s = dyn_cast<SplitOp>(op)) {
    std::vector<Arg> args{buffer(s.getInput())};
    for (Value r : s.getResults())
      args.push_back(out(r, rows));
    return emit(
        Kernel::Split, op, args,
        abi::SplitParams{static_cast<int64_t>(s.getAxis()),
                         outerDims(s.getInput().getType(), s.getAxis())});
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    std::vector<Arg> args;
    for (Value in : c.getInputs()) {
      FailureOr<Arg> a = operand(op, in);
      if (failed(a))
        return failure();
      args.push_back(*a);
    }
    args.push_back(out(c, rows));
    return emit(Kernel::Concat, op, args,
                abi::ConcatParams{static_cast<int64_t>(c.getAxis()),
                                  outerDims(c.getType(), c.getAxis())});
  }
  if (auto t = dyn_cast<TakeRowsOp>(op)) {
    return emit(
        Kernel::TakeRows, op,
        {buffer(t.getInput()), buffer(t.getRows()), out(t, Rows::selected)});
  }
  if (auto a = dyn_cast<KvCacheAppendOp>(op)) {
    return emit(Kernel::KvAppend, op,
                {cache(a.getCacheAttr()), buffer(a.getSeqIds()),
                 buffer(a.getPositions()), buffer(a.getValues())});
  }
  if (auto m = dyn_cast<MlaAttentionOp>(op)) {
    FailureOr<Arg> kvb =
        m.getKvBScales()
            ? tables_.scaled(op, m.getKvB(), m.getKvBScales(), *m.getBlock())
            : operand(op, m.getKvB());
    if (failed(kvb))
      return failure();
    int64_t heads =
        cast<RankedTensorType>(m.getQNope().getType()).getDimSize(1);
    return emit(Kernel::MlaAttention, op,
                {buffer(m.getQNope()), buffer(m.getQPe()), *kvb,
                 cache(m.getCacheAttr()), buffer(m.getSeqIds()),
                 buffer(m.getPositions()),
                 m.getTopK() ? buffer(m.getTopK()) : none, out(m, rows)},
                abi::MlaAttentionParams{heads, m.getScale().convertToFloat()});
  }
  if (auto ix = dyn_cast<IndexerTopKOp>(op)) {
    int64_t heads = cast<RankedTensorType>(ix.getQ().getType()).getDimSize(1);
    return emit(Kernel::IndexerTopK, op,
                {buffer(ix.getQ()), buffer(ix.getWeights()),
                 cache(ix.getCacheAttr()), buffer(ix.getSeqIds()),
                 buffer(ix.getPositions()), out(ix, rows)},
                abi::IndexerTopKParams{static_cast<int64_t>(ix.getK()), heads,
                                       ix.getScale().convertToFloat()});
  }
  if (auto g = dyn_cast<GqaAttentionOp>(op)) {
    int64_t heads = cast<RankedTensorType>(g.getQ().getType()).getDimSize(1);
    return emit(Kernel::GqaAttention, op,
                {buffer(g.getQ()), cache(g.getKCacheAttr()),
                 cache(g.getVCacheAttr()), buffer(g.getSeqIds()),
                 buffer(g.getPositions()), out(g, rows)},
                abi::GqaAttentionParams{heads, g.getScale().convertToFloat()});
  }
  if (auto m = dyn_cast<MoeOp>(op)) {
    // Absent (no shared expert), a float weight, or a kiln.block_scaled.
    auto expertWeight = [&](Value v) -> FailureOr<Arg> {
      if (!v)
        return none;
      if (auto scaled = v.getDefiningOp<BlockScaledOp>())
        return tables_.scaled(op, scaled.getValues(), scaled.getScales(),
                              scaled.getType().getBlock());
      return operand(op, v);
    };
    FailureOr<Arg> weights[] = {
        operand(op, m.getRouter()),    operand(op, m.getRouterBias()),
        expertWeight(m.getGate()),     expertWeight(m.getUp()),
        expertWeight(m.getDown()),     expertWeight(m.getSharedGate()),
        expertWeight(m.getSharedUp()), expertWeight(m.getSharedDown())};
    std::vector<Arg> args{buffer(m.getInput())};
    for (FailureOr<Arg> &w : weights) {
      if (failed(w))
        return failure();
      args.push_back(*w);
    }
    args.push_back(out(m, rows));
    abi::MoeParams p;
    p.topK = static_cast<int64_t>(m.getTopK());
    p.nGroup = static_cast<int64_t>(m.getNGroup());
    p.topkGroup = static_cast<int64_t>(m.getTopkGroup());
    p.normTopkProb = m.getNormTopkProb();
    p.blockSize = static_cast<int64_t>(m.getBlockSize());
    p.scale = m.getRoutedScalingFactor().convertToFloat();
    p.expertOffset = m.getExpertOffset() ? int64_t(*m.getExpertOffset()) : 0;
    p.sharedOwnRows = m.getSharedOwnRows();
    return emit(Kernel::Moe, op, args, p);
  }
  if (auto d = dyn_cast<DispatchRowsOp>(op)) {
    FailureOr<Arg> router = operand(op, d.getRouter());
    FailureOr<Arg> bias =
        failed(router) ? router : operand(op, d.getRouterBias());
    if (failed(bias))
      return failure();
    abi::DispatchRowsParams p;
    p.topK = static_cast<int64_t>(d.getTopK());
    p.nGroup = static_cast<int64_t>(d.getNGroup());
    p.topkGroup = static_cast<int64_t>(d.getTopkGroup());
    p.expertsPerRank = static_cast<int64_t>(d.getExpertsPerRank());
    p.ownRows = d.getOwnRows();
    return emit(Kernel::DispatchRows, op,
                {buffer(d.getInput()), *router, *bias,
                 out(d.getRows(), Rows::routed),
                 out(d.getRoutes(), Rows::tokens)},
                p);
  }
  if (auto c = dyn_cast<CombineRowsOp>(op))
    return emit(
        Kernel::CombineRows, op,
        {buffer(c.getInput()), buffer(c.getRoutes()), out(c, Rows::tokens)});
  // Kernels whose declaration names this op (Kernels.td `op`).
  Kernel declared;
  if (abi::kernelForOp(op->getName().getStringRef(), declared))
    return lowerByDeclaration(declared, op, rows);
  return op->emitError("no CPU kernel lowers this op (is the module fused? "
                       "run the kiln-fuse-graph pipeline first)");
}

/// Operands in order as the kernel's inputs, results in order as its
/// outputs, and each parameter from the attribute of the same name.
LogicalResult PlanLowering::lowerByDeclaration(Kernel kernel, Operation *op,
                                               Rows rows) {
  std::vector<Arg> args;
  for (Value v : op->getOperands()) {
    FailureOr<Arg> a = operand(op, v);
    if (failed(a))
      return failure();
    args.push_back(*a);
  }
  for (Value r : op->getResults())
    args.push_back(out(r, rows));
  abi::Params params = abi::defaultParams(kernel);
  std::string missing;
  std::visit(
      [&](auto &fields) {
        abi::visitFields(fields, [&](const char *name, auto &field) {
          using T = std::decay_t<decltype(field)>;
          Attribute attr = op->getAttr(name);
          if constexpr (std::is_same_v<T, bool>) {
            if (auto b = dyn_cast_or_null<BoolAttr>(attr))
              field = b.getValue();
            else
              field = isa_and_nonnull<UnitAttr>(attr);
          } else if (auto i = dyn_cast_or_null<IntegerAttr>(attr);
                     i && std::is_integral_v<T>) {
            field = T(i.getInt());
          } else if (auto f = dyn_cast_or_null<FloatAttr>(attr);
                     f && std::is_floating_point_v<T>) {
            field = T(f.getValueAsDouble());
          } else if (missing.empty()) {
            missing = name;
          }
        });
      },
      params);
  if (!missing.empty())
    return op->emitError() << "lowers to " << abi::kKernelNames[size_t(kernel)]
                           << ", whose parameter '" << missing
                           << "' has no attribute of its type on the op";
  return emit(kernel, op, args, params);
}

struct BuildPlanPass : kiln::impl::KilnBuildPlanPassBase<BuildPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ProgramTables tables(module);
    std::vector<func::FuncOp> lowered;
    OpBuilder b(module.getBody(), module.getBody()->end());
    for (StringRef name : {"prefill", "decode", "draft"}) {
      auto fn = module.lookupSymbol<func::FuncOp>(name);
      if (!fn) {
        if (name == "draft")
          continue;
        module.emitError() << "the module has no @" << name << " entry point";
        return signalPassFailure();
      }
      auto plan = plan::PlanOp::create(b, fn.getLoc(), (name + "_plan").str());
      plan.getBody().emplaceBlock();
      if (failed(PlanLowering(tables, fn, plan).run()))
        return signalPassFailure();
      lowered.push_back(fn);
    }
    for (func::FuncOp fn : lowered)
      fn.erase();
    for (KvCacheOp cache :
         llvm::make_early_inc_range(module.getOps<KvCacheOp>()))
      cache.erase();
    for (auto plan : module.getOps<plan::PlanOp>()) {
      StringRef name = plan.getSymName();
      plan.setSymName(name.drop_back(std::strlen("_plan")));
    }
    tables.materialize();
  }
};

} // namespace
