//===- PlanBuilder.cpp - Fused kiln functions to execution plans ----------===//

#include "passes/emit/PlanBuilder.h"

#include "dialects/kiln/IR/KilnOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <sstream>

using namespace mlir;
using namespace kiln;
using namespace kiln::emit;
using abi::Kernel;

std::string WeightSpec::key() const {
  std::ostringstream os;
  os << int(kind) << '|' << name << '|' << scaleName << '|' << int(dtype) << '|'
     << evenRule << '|' << firstExpert;
  for (int64_t d : shape)
    os << ',' << d;
  return os.str();
}

int64_t BufferSpec::rowElems() const {
  int64_t n = 1;
  for (int64_t d : rowShape)
    n *= d;
  return n;
}

namespace {

enum Rows : uint8_t { kTokens = 0, kSelected = 1, kOne = 2 };

std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName() << " at " << op->getLoc();
  return s;
}

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

Status opError(Operation *op, const std::string &what) {
  return makeError(StatusCode::InvalidArgument, describe(op), ": ", what);
}

/// Weights and caches shared by all plans of the program.
class ProgramTables {
public:
  explicit ProgramTables(ProgramSpec &program) : program_(program) {}

  Result<uint32_t> dense(Operation *user, Value v) {
    auto w = v.getDefiningOp<WeightOp>();
    if (!w)
      return opError(user, "expected a kiln.weight operand");
    auto type = w.getType();
    Type e = type.getElementType();
    if (w.getEncoding().getKind() != StorageKind::raw ||
        !(e.isF32() || e.isBF16() || e.isF16()))
      return opError(user, "weight '" + w.getName().str() +
                               "' is not a plain float tensor; quantized "
                               "weights must come with their scales");
    WeightSpec spec = base(w);
    spec.kind = WeightKind::Dense;
    spec.dtype = type.getRank() == 1 || e.isF32() ? ElemType::F32
                 : e.isBF16()                     ? ElemType::BF16
                                                  : ElemType::F16;
    return intern(std::move(spec));
  }

  Result<uint32_t> scaled(Operation *user, Value values, Value scales,
                          ArrayRef<int64_t> block) {
    auto v = values.getDefiningOp<WeightOp>();
    auto s = scales.getDefiningOp<WeightOp>();
    if (!v || !s)
      return opError(user, "block-scaled operands must be kiln.weight ops");
    WeightSpec spec = base(v);
    Type ve = v.getType().getElementType();
    StorageKind vk = v.getEncoding().getKind(), sk = s.getEncoding().getKind();
    if (vk == StorageKind::mxfp4_values && sk == StorageKind::mxfp4_scales) {
      spec.kind = WeightKind::Mxfp4Quant;
      spec.dtype = ElemType::F4E2M1;
      auto rule = v.getEncoding().getRule();
      spec.evenRule = !rule || *rule == ScaleRule::even;
      if (auto src = v.getSourceScale())
        spec.scaleName = src->str();
    } else if (vk == StorageKind::raw && sk == StorageKind::raw &&
               isa<Float4E2M1FNType>(ve)) {
      spec.kind = WeightKind::Mxfp4Raw;
      spec.dtype = ElemType::F4E2M1;
      spec.scaleName = s.getName().str();
    } else if (vk == StorageKind::raw && sk == StorageKind::raw &&
               isa<Float8E4M3FNType>(ve)) {
      if (block.size() != 2 || block[0] != 128 || block[1] != 128)
        return opError(user, "FP8 weights need 128x128 blocks");
      spec.kind = WeightKind::Fp8Block;
      spec.dtype = ElemType::F8E4M3;
      spec.scaleName = s.getName().str();
    } else {
      return opError(user, "unsupported weight encoding pair for '" +
                               v.getName().str() + "'");
    }
    return intern(std::move(spec));
  }

  uint32_t cache(FlatSymbolRefAttr ref, ModuleOp module, StringRef owner) {
    std::string name = ref.getValue().str();
    auto it = caches_.find(name);
    if (it != caches_.end())
      return it->second;
    auto decl = SymbolTable::lookupSymbolIn(module, ref.getAttr());
    auto op = cast<KvCacheOp>(decl);
    CacheSpec spec{name, static_cast<int64_t>(op.getWidth()),
                   op.getElementType().isBF16(), owner.str()};
    uint32_t index = program_.caches.size();
    program_.caches.push_back(std::move(spec));
    caches_[name] = index;
    return index;
  }

private:
  static WeightSpec base(WeightOp w) {
    WeightSpec spec;
    spec.name = w.getName().str();
    spec.shape.assign(w.getType().getShape().begin(),
                      w.getType().getShape().end());
    if (w.isExpertStack())
      spec.experts = spec.shape.front();
    if (auto first = w.getFirstExpert())
      spec.firstExpert = int64_t(*first);
    return spec;
  }

  uint32_t intern(WeightSpec spec) {
    std::string key = spec.key();
    auto it = weights_.find(key);
    if (it != weights_.end())
      return it->second;
    uint32_t index = program_.weights.size();
    program_.weights.push_back(std::move(spec));
    weights_[key] = index;
    return index;
  }

  ProgramSpec &program_;
  std::map<std::string, uint32_t> weights_, caches_;
};

/// One entry function to one plan.
class PlanLowering {
public:
  PlanLowering(ProgramTables &tables, ModuleOp module, func::FuncOp fn)
      : tables_(tables), module_(module), fn_(fn) {
    plan_.name = fn.getName().str();
    owner_ = plan_.name == "draft" ? "draft" : "main";
  }

  Result<PlanSpec> run();

private:
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

  uint32_t newBuffer(Value v, uint8_t rows, const std::string &name);
  uint32_t allocate(Value v, uint8_t rows, int64_t position);
  void release(int64_t position);
  Result<ArgSpec> operand(Operation *op, Value v);
  ArgSpec buffer(Value v) { return {ArgKind::Buffer, bufferOf_.lookup(v)}; }
  uint8_t rowsOf(Value v) { return rowsOf_.lookup(v); }
  Status lower(Operation *op, int64_t position);
  Status emit(Kernel kernel, Operation *op, std::vector<ArgSpec> args,
              abi::Params params = {});
  Status lowerByDeclaration(Kernel kernel, Operation *op, uint8_t rows,
                            int64_t position);

  ProgramTables &tables_;
  ModuleOp module_;
  func::FuncOp fn_;
  std::string owner_;
  PlanSpec plan_;
  llvm::DenseMap<Value, uint32_t> bufferOf_;
  llvm::DenseMap<Value, uint8_t> rowsOf_;
  llvm::DenseMap<Value, int64_t> lastUse_;
  std::vector<int64_t> bufferLastUse_;
  std::map<std::tuple<uint8_t, bool, std::vector<int64_t>>,
           std::vector<uint32_t>>
      free_;
};

uint32_t PlanLowering::newBuffer(Value v, uint8_t rows,
                                 const std::string &name) {
  auto type = cast<RankedTensorType>(v.getType());
  BufferSpec spec;
  spec.name = name;
  spec.rows = rows;
  spec.i32 = isa<IntegerType>(type.getElementType());
  spec.rowShape.assign(type.getShape().begin() + 1, type.getShape().end());
  uint32_t index = plan_.buffers.size();
  plan_.buffers.push_back(std::move(spec));
  bufferLastUse_.push_back(kForever);
  return index;
}

/// A buffer for `v`, reusing a dead one of the same rows, type and width.
uint32_t PlanLowering::allocate(Value v, uint8_t rows, int64_t position) {
  auto type = cast<RankedTensorType>(v.getType());
  bool i32 = isa<IntegerType>(type.getElementType());
  // Reuse only buffers of the same row shape: row kernels read their width
  // from it.
  std::vector<int64_t> rowShape(type.getShape().begin() + 1,
                                type.getShape().end());
  auto key = std::make_tuple(rows, i32, rowShape);
  uint32_t index;
  auto &pool = free_[key];
  if (!pool.empty()) {
    index = pool.back();
    pool.pop_back();
  } else {
    index = newBuffer(v, rows, "t" + std::to_string(plan_.buffers.size()));
  }
  bufferOf_[v] = index;
  rowsOf_[v] = rows;
  bufferLastUse_[index] = std::max(position, lastUse_.lookup(v));
  return index;
}

/// Frees the buffers whose last reader is the op at `position`.
void PlanLowering::release(int64_t position) {
  for (uint32_t i = 0; i < bufferLastUse_.size(); ++i) {
    if (bufferLastUse_[i] != position)
      continue;
    const BufferSpec &b = plan_.buffers[i];
    free_[std::make_tuple(b.rows, b.i32, b.rowShape)].push_back(i);
    bufferLastUse_[i] = -1;
  }
}

Result<ArgSpec> PlanLowering::operand(Operation *op, Value v) {
  if (v.getDefiningOp<WeightOp>()) {
    KILN_ASSIGN_OR_RETURN(uint32_t w, tables_.dense(op, v));
    return ArgSpec{ArgKind::Weight, w};
  }
  auto it = bufferOf_.find(v);
  if (it == bufferOf_.end())
    return opError(op, "operand has no planned buffer");
  return ArgSpec{ArgKind::Buffer, it->second};
}

/// Appends a dispatch after checking it against the kernel's declaration
/// (support/abi/Kernels.td), so a lowering that breaks the contract fails
/// here, naming the op, instead of at load.
Status PlanLowering::emit(Kernel kernel, Operation *op,
                          std::vector<ArgSpec> args, abi::Params params) {
  std::string error =
      abi::signatureError(kernel, args, params, [&](uint32_t index) {
        const BufferSpec &b = plan_.buffers[index];
        return abi::BufferFacts{b.name,
                                b.i32 ? abi::ElemType::I32 : abi::ElemType::F32,
                                abi::RowsKind(b.rows), b.rowElems()};
      });
  if (!error.empty())
    return opError(op, std::string("lowers to a ") +
                           std::string(abi::kKernelNames[size_t(kernel)]) +
                           " dispatch that breaks its declaration: " + error);
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  plan_.dispatches.push_back(
      {kernel, std::move(args), std::move(params), std::move(loc)});
  return Status::ok();
}

Result<PlanSpec> PlanLowering::run() {
  Block &body = fn_.getBody().front();
  // Liveness: position of each value's last reader.
  int64_t position = 0;
  for (Operation &op : body) {
    for (Value v : op.getOperands())
      lastUse_[v] = isa<func::ReturnOp>(op) ? kForever : position;
    ++position;
  }
  // Inputs: ids, seq, pos, rows (Selected), [hidden].
  static const char *kInputNames[] = {"token_ids", "seq_ids", "positions",
                                      "logit_rows", "hidden_in"};
  for (BlockArgument arg : body.getArguments()) {
    unsigned n = arg.getArgNumber();
    uint8_t rows = n == abi::kInputLogitRows ? kSelected : kTokens;
    uint32_t b = newBuffer(arg, rows, n < 5 ? kInputNames[n] : "input");
    bufferOf_[arg] = b;
    rowsOf_[arg] = rows;
    plan_.inputs.push_back(b);
  }
  position = 0;
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands()) {
        auto it = bufferOf_.find(v);
        if (it == bufferOf_.end())
          return opError(&op, "returned value has no buffer");
        plan_.outputs.push_back(it->second);
      }
      break;
    }
    KILN_RETURN_IF_ERROR(lower(&op, position));
    release(position);
    ++position;
  }
  if (plan_.outputs.size() >= 2) {
    plan_.buffers[plan_.outputs[0]].name = "logits";
    plan_.buffers[plan_.outputs[1]].name = "hidden";
  }
  return std::move(plan_);
}

Status PlanLowering::lower(Operation *op, int64_t pos) {
  // Ops that produce no dispatch.
  if (isa<WeightOp>(op))
    return Status::ok();
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    uint32_t b = bufferOf_.lookup(r.getInput());
    bufferOf_[r.getResult()] = b;
    rowsOf_[r.getResult()] = rowsOf(r.getInput());
    bufferLastUse_[b] =
        std::max(bufferLastUse_[b], lastUse_.lookup(r.getResult()));
    return Status::ok();
  }

  // Results take their rows from the first activation operand.
  uint8_t rows = kTokens;
  for (Value v : op->getOperands())
    if (bufferOf_.count(v)) {
      rows = rowsOf(v);
      break;
    }
  auto out = [&](Value v, uint8_t r) {
    return ArgSpec{ArgKind::Buffer, allocate(v, r, pos)};
  };
  auto arg = [&](Value v) -> Result<ArgSpec> { return operand(op, v); };
  auto none = ArgSpec{ArgKind::None, 0};
  auto unary = [&](Kernel k, Value in, Value res,
                   abi::Params params = {}) -> Status {
    KILN_ASSIGN_OR_RETURN(ArgSpec a, arg(in));
    return emit(k, op, {a, out(res, rows)}, std::move(params));
  };
  auto binary = [&](Kernel k, Value l, Value r, Value res) -> Status {
    KILN_ASSIGN_OR_RETURN(ArgSpec a, arg(l));
    KILN_ASSIGN_OR_RETURN(ArgSpec b, arg(r));
    return emit(k, op, {a, b, out(res, rows)});
  };
  auto cache = [&](FlatSymbolRefAttr ref) {
    return ArgSpec{ArgKind::Cache, tables_.cache(ref, module_, owner_)};
  };

  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    KILN_ASSIGN_OR_RETURN(ArgSpec t, arg(e.getTable()));
    return emit(Kernel::Embedding, op, {buffer(e.getIds()), t, out(e, rows)});
  }
  if (auto n = dyn_cast<RmsNormOp>(op)) {
    KILN_ASSIGN_OR_RETURN(ArgSpec w, arg(n.getWeight()));
    return emit(Kernel::RmsNorm, op, {buffer(n.getInput()), w, out(n, rows)},
                abi::RmsNormParams{n.getEpsilon().convertToFloat()});
  }
  if (auto n = dyn_cast<LayerNormOp>(op)) {
    KILN_ASSIGN_OR_RETURN(ArgSpec w, arg(n.getWeight()));
    KILN_ASSIGN_OR_RETURN(ArgSpec b, arg(n.getBias()));
    return emit(Kernel::LayerNorm, op,
                {buffer(n.getInput()), w, b, out(n, rows)},
                abi::LayerNormParams{n.getEpsilon().convertToFloat()});
  }
  if (auto m = dyn_cast<MatmulOp>(op))
    return binary(Kernel::Matmul, m.getLhs(), m.getRhs(), m);
  if (auto m = dyn_cast<MxMatmulOp>(op)) {
    KILN_ASSIGN_OR_RETURN(
        uint32_t w,
        tables_.scaled(op, m.getValues(), m.getScales(), m.getBlock()));
    return emit(Kernel::Matmul, op,
                {buffer(m.getLhs()), {ArgKind::Weight, w}, out(m, rows)});
  }
  if (auto r = dyn_cast<RopeOp>(op)) {
    auto type = cast<RankedTensorType>(r.getInput().getType());
    int64_t heads = type.getRank() == 3 ? type.getDimSize(1) : 1;
    abi::RopeParams p;
    p.style = r.getStyle() == RopeStyle::interleaved ? 0 : 1;
    p.offset = static_cast<int64_t>(r.getOffset());
    p.rotaryDim = static_cast<int64_t>(r.getRotaryDim());
    p.heads = heads;
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
    return emit(Kernel::TopK, op,
                {buffer(t.getInput()), out(t.getValues(), rows),
                 out(t.getIndices(), rows)},
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
    std::vector<ArgSpec> args{buffer(s.getInput())};
    for (Value r : s.getResults())
      args.push_back(out(r, rows));
    return emit(
        Kernel::Split, op, std::move(args),
        abi::SplitParams{static_cast<int64_t>(s.getAxis()),
                         outerDims(s.getInput().getType(), s.getAxis())});
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    std::vector<ArgSpec> args;
    for (Value in : c.getInputs()) {
      KILN_ASSIGN_OR_RETURN(ArgSpec a, arg(in));
      args.push_back(a);
    }
    args.push_back(out(c, rows));
    return emit(Kernel::Concat, op, std::move(args),
                abi::ConcatParams{static_cast<int64_t>(c.getAxis()),
                                  outerDims(c.getType(), c.getAxis())});
  }
  if (auto t = dyn_cast<TakeRowsOp>(op)) {
    return emit(Kernel::TakeRows, op,
                {buffer(t.getInput()), buffer(t.getRows()), out(t, kSelected)});
  }
  if (auto a = dyn_cast<KvCacheAppendOp>(op)) {
    return emit(Kernel::KvAppend, op,
                {cache(a.getCacheAttr()), buffer(a.getSeqIds()),
                 buffer(a.getPositions()), buffer(a.getValues())});
  }
  if (auto m = dyn_cast<MlaAttentionOp>(op)) {
    ArgSpec kvb;
    if (m.getKvBScales()) {
      KILN_ASSIGN_OR_RETURN(
          uint32_t w,
          tables_.scaled(op, m.getKvB(), m.getKvBScales(), *m.getBlock()));
      kvb = {ArgKind::Weight, w};
    } else {
      KILN_ASSIGN_OR_RETURN(kvb, arg(m.getKvB()));
    }
    int64_t heads =
        cast<RankedTensorType>(m.getQNope().getType()).getDimSize(1);
    return emit(Kernel::MlaAttention, op,
                {buffer(m.getQNope()), buffer(m.getQPe()), kvb,
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
    auto expertWeight =
        [&](Value v, Value s,
            std::optional<ArrayRef<int64_t>> block) -> Result<ArgSpec> {
      if (!v)
        return none;
      if (s) {
        KILN_ASSIGN_OR_RETURN(uint32_t w, tables_.scaled(op, v, s, *block));
        return ArgSpec{ArgKind::Weight, w};
      }
      return arg(v);
    };
    KILN_ASSIGN_OR_RETURN(ArgSpec router, arg(m.getRouter()));
    KILN_ASSIGN_OR_RETURN(ArgSpec bias, arg(m.getRouterBias()));
    KILN_ASSIGN_OR_RETURN(
        ArgSpec g, expertWeight(m.getGate(), m.getGateScales(), m.getBlock()));
    KILN_ASSIGN_OR_RETURN(
        ArgSpec u, expertWeight(m.getUp(), m.getUpScales(), m.getBlock()));
    KILN_ASSIGN_OR_RETURN(
        ArgSpec d, expertWeight(m.getDown(), m.getDownScales(), m.getBlock()));
    KILN_ASSIGN_OR_RETURN(ArgSpec sg, expertWeight(m.getSharedGate(),
                                                   m.getSharedGateScales(),
                                                   m.getSharedBlock()));
    KILN_ASSIGN_OR_RETURN(ArgSpec su,
                          expertWeight(m.getSharedUp(), m.getSharedUpScales(),
                                       m.getSharedBlock()));
    KILN_ASSIGN_OR_RETURN(ArgSpec sd, expertWeight(m.getSharedDown(),
                                                   m.getSharedDownScales(),
                                                   m.getSharedBlock()));
    abi::MoeParams p;
    p.topK = static_cast<int64_t>(m.getTopK());
    p.nGroup = static_cast<int64_t>(m.getNGroup());
    p.topkGroup = static_cast<int64_t>(m.getTopkGroup());
    p.normTopkProb = m.getNormTopkProb();
    p.blockSize = static_cast<int64_t>(m.getBlockSize());
    p.scale = m.getRoutedScalingFactor().convertToFloat();
    p.expertOffset = m.getExpertOffset() ? int64_t(*m.getExpertOffset()) : 0;
    return emit(
        Kernel::Moe, op,
        {buffer(m.getInput()), router, bias, g, u, d, sg, su, sd, out(m, rows)},
        p);
  }
  // Kernels whose declaration names this op (Kernels.td `op`).
  Kernel declared;
  if (abi::kernelForOp(op->getName().getStringRef(), declared))
    return lowerByDeclaration(declared, op, rows, pos);
  return opError(op, "no CPU kernel lowers this op (is the module fused? run "
                     "the kiln-fuse-graph pipeline first)");
}

/// Operands in order as the kernel's inputs, results in order as its
/// outputs, and each parameter from the attribute of the same name.
Status PlanLowering::lowerByDeclaration(Kernel kernel, Operation *op,
                                        uint8_t rows, int64_t position) {
  std::vector<ArgSpec> args;
  for (Value v : op->getOperands()) {
    KILN_ASSIGN_OR_RETURN(ArgSpec a, operand(op, v));
    args.push_back(a);
  }
  for (Value r : op->getResults())
    args.push_back({ArgKind::Buffer, allocate(r, rows, position)});
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
    return opError(op, "lowers to " +
                           std::string(abi::kKernelNames[size_t(kernel)]) +
                           ", whose parameter '" + missing +
                           "' has no attribute of its type on the op");
  return emit(kernel, op, std::move(args), std::move(params));
}

} // namespace

Result<ProgramSpec> kiln::emit::buildPrograms(ModuleOp module) {
  ProgramSpec program;
  ProgramTables tables(program);
  for (const char *name : {"prefill", "decode", "draft"}) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn) {
      if (std::string(name) == "draft")
        continue;
      return makeError(StatusCode::InvalidArgument, "the module has no @", name,
                       " entry point");
    }
    PlanLowering lowering(tables, module, fn);
    KILN_ASSIGN_OR_RETURN(PlanSpec plan, lowering.run());
    program.plans.push_back(std::move(plan));
  }
  return program;
}
