//===- GraphBuilder.cpp - Module and entry points of the GLM graph --------===//

#include "frontends/glm/GraphBuilder.h"
#include "frontends/glm/GraphEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::glm;

GraphEmitter::GraphEmitter(ModuleOp module, const GlmConfig &config,
                           const WeightSource &weights,
                           const GraphOptions &options)
    : module_(module), c_(config), ws_(weights), options_(options),
      b_(module.getContext()), loc_(module.getLoc()) {}

LogicalResult GraphEmitter::fail(Status status) {
  if (error_.isOk())
    error_ = std::move(status);
  return failure();
}

RankedTensorType GraphEmitter::act(ArrayRef<int64_t> dims) {
  SmallVector<int64_t> shape{ShapedType::kDynamic};
  shape.append(dims.begin(), dims.end());
  return RankedTensorType::get(shape, b_.getF32Type());
}

Type GraphEmitter::elemType(Dtype dtype) {
  switch (dtype) {
  case Dtype::BF16:
    return b_.getBF16Type();
  case Dtype::F16:
    return b_.getF16Type();
  case Dtype::F8_E4M3:
    return b_.getType<Float8E4M3FNType>();
  default:
    return b_.getF32Type();
  }
}

Value GraphEmitter::weight(StringRef name, ArrayRef<int64_t> shape, Type elem) {
  auto type = RankedTensorType::get(shape, elem);
  auto raw = EncodingAttr::get(b_.getContext(), StorageKind::raw, std::nullopt);
  return WeightOp::create(b_, loc_, type, name, raw, StringAttr(),
                          IntegerAttr(), DenseI64ArrayAttr());
}

FailureOr<Value> GraphEmitter::plain(const std::string &name,
                                     ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.begin(), shape.end());
  auto desc = ws_.plain(name, s, /*optional=*/false);
  if (!desc.isOk())
    return fail(desc.status());
  return weight(name, shape, elemType(desc->dtype));
}

FailureOr<Value> GraphEmitter::linearWeight(const std::string &module,
                                            int64_t out, int64_t in,
                                            bool hasBias, Value *bias) {
  auto desc = ws_.linear(module, out, in, hasBias);
  if (!desc.isOk())
    return fail(desc.status());
  if (bias && desc->hasBias)
    *bias = weight(module + ".bias", {out}, elemType(desc->biasDtype));
  switch (desc->encoding) {
  case WeightEncoding::Dense:
    return weight(desc->weightName, {out, in}, elemType(desc->dtype));
  case WeightEncoding::Fp8Block: {
    Value q = weight(desc->weightName, {out, in}, elemType(Dtype::F8_E4M3));
    Value s = weight(desc->scaleName, desc->scaleShape, b_.getF32Type());
    // Block sizes come from the config; the catalog checked the shape.
    int64_t bo = c_.quant.fp8BlockOut, bi = c_.quant.fp8BlockIn;
    return Value(DequantizeOp::create(
        b_, loc_, RankedTensorType::get({out, in}, b_.getBF16Type()), q, s,
        b_.getDenseI64ArrayAttr({bo, bi})));
  }
  case WeightEncoding::Mxfp4: {
    Value q =
        weight(desc->weightName, {out, in}, b_.getType<Float4E2M1FNType>());
    Value s = weight(desc->scaleName, {out, in / 32},
                     b_.getType<Float8E8M0FNUType>());
    return Value(DequantizeOp::create(
        b_, loc_, RankedTensorType::get({out, in}, b_.getBF16Type()), q, s,
        b_.getDenseI64ArrayAttr({1, 32})));
  }
  }
  return failure();
}

Value GraphEmitter::matmul(Value x, Value w, int64_t n) {
  return MatmulOp::create(b_, loc_, act({n}), x, w);
}

FailureOr<Value> GraphEmitter::linear(Value x, const std::string &module,
                                      int64_t out, int64_t in, bool hasBias) {
  Value bias;
  auto w = linearWeight(module, out, in, hasBias, &bias);
  if (failed(w))
    return failure();
  Value y = matmul(x, *w, out);
  return bias ? add(y, bias) : y;
}

FailureOr<Value> GraphEmitter::expertStack(const std::string &prefix,
                                           StringRef proj, int64_t out,
                                           int64_t in) {
  const int64_t experts = c_.nRoutedExperts;
  LinearDesc first;
  for (int64_t e = 0; e < experts; ++e) {
    std::string module =
        prefix + "experts." + std::to_string(e) + "." + proj.str();
    auto desc = ws_.linear(module, out, in, false);
    if (!desc.isOk())
      return fail(desc.status());
    if (e == 0) {
      first = *desc;
    } else if (desc->encoding != first.encoding || desc->dtype != first.dtype) {
      return fail(makeError(
          StatusCode::InvalidArgument, "expert ", module, " is stored as ",
          weightEncodingName(desc->encoding), "/", dtypeName(desc->dtype),
          " but expert 0 of the layer as ", weightEncodingName(first.encoding),
          "/", dtypeName(first.dtype),
          ": experts of one layer must share one "
          "format"));
    }
  }
  std::string base = prefix + "experts.{e}." + proj.str();
  switch (first.encoding) {
  case WeightEncoding::Dense:
    return weight(base + ".weight", {experts, out, in}, elemType(first.dtype));
  case WeightEncoding::Fp8Block: {
    Value q =
        weight(base + ".weight", {experts, out, in}, elemType(Dtype::F8_E4M3));
    Value s = weight(base + ".weight_scale_inv",
                     {experts, first.scaleShape[0], first.scaleShape[1]},
                     b_.getF32Type());
    return Value(DequantizeOp::create(
        b_, loc_, RankedTensorType::get({experts, out, in}, b_.getBF16Type()),
        q, s,
        b_.getDenseI64ArrayAttr({c_.quant.fp8BlockOut, c_.quant.fp8BlockIn})));
  }
  case WeightEncoding::Mxfp4: {
    Value q = weight(base + ".weight", {experts, out, in},
                     b_.getType<Float4E2M1FNType>());
    Value s = weight(base + ".weight_scale", {experts, out, in / 32},
                     b_.getType<Float8E8M0FNUType>());
    return Value(DequantizeOp::create(
        b_, loc_, RankedTensorType::get({experts, out, in}, b_.getBF16Type()),
        q, s, b_.getDenseI64ArrayAttr({1, 32})));
  }
  }
  return failure();
}

FailureOr<Value> GraphEmitter::rmsNorm(Value x, const std::string &name,
                                       int64_t dim) {
  auto w = plain(name, {dim});
  if (failed(w))
    return failure();
  return Value(RmsNormOp::create(b_, loc_, x.getType(), x, *w,
                                 b_.getF32FloatAttr(c_.rmsNormEps)));
}

Value GraphEmitter::reshape(Value x, ArrayRef<int64_t> dims) {
  return ReshapeOp::create(b_, loc_, act(dims), x);
}

Value GraphEmitter::add(Value a, Value b) {
  return AddOp::create(b_, loc_, a.getType(), a, b);
}

std::string GraphEmitter::cache(const std::string &name, int64_t width) {
  if (caches_.insert(name).second) {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToEnd(module_.getBody());
    Type elem = options_.cacheType == "bf16" ? Type(b_.getBF16Type())
                                             : Type(b_.getF32Type());
    KvCacheOp::create(b_, loc_, name, width, elem);
  }
  return name;
}

/// The function shell: arguments, entry block, builder inside it.
static func::FuncOp makeEntry(OpBuilder &b, ModuleOp module, Location loc,
                              StringRef name, int64_t hidden, int64_t vocab,
                              bool draft, TokenArgs &args) {
  MLIRContext *ctx = module.getContext();
  auto i32v =
      RankedTensorType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 32));
  auto f32 = Float32Type::get(ctx);
  auto hiddenT = RankedTensorType::get({ShapedType::kDynamic, hidden}, f32);
  auto logitsT = RankedTensorType::get({ShapedType::kDynamic, vocab}, f32);
  SmallVector<Type> inputs{i32v, i32v, i32v, i32v};
  if (draft)
    inputs.push_back(hiddenT);
  b.setInsertionPointToEnd(module.getBody());
  auto fn = func::FuncOp::create(b, loc, name,
                                 b.getFunctionType(inputs, {logitsT, hiddenT}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  args = {entry->getArgument(0), entry->getArgument(1), entry->getArgument(2),
          entry->getArgument(3)};
  return fn;
}

LogicalResult GraphEmitter::buildMain(StringRef name) {
  const int64_t h = c_.hiddenSize, v = c_.vocabSize;
  makeEntry(b_, module_, loc_, name, h, v, /*draft=*/false, args_);
  auto table = plain("model.embed_tokens.weight", {v, h});
  if (failed(table))
    return failure();
  Value x = EmbeddingOp::create(b_, loc_, act({h}), *table, args_.ids);
  Value lastTopk;
  for (int64_t layer = 0; layer < c_.numHiddenLayers; ++layer) {
    auto next = decoderLayer(x, layer, lastTopk);
    if (failed(next))
      return failure();
    x = *next;
  }
  auto normed = rmsNorm(x, "model.norm.weight", h);
  if (failed(normed))
    return failure();
  Value rowsIn = TakeRowsOp::create(b_, loc_, act({h}), *normed, args_.rows);
  FailureOr<Value> logits = c_.tieWordEmbeddings
                                ? FailureOr<Value>(matmul(rowsIn, *table, v))
                                : linear(rowsIn, "lm_head", v, h);
  if (failed(logits))
    return failure();
  func::ReturnOp::create(b_, loc_, ValueRange{*logits, *normed});
  return success();
}

LogicalResult GraphEmitter::buildDraft() {
  const int64_t h = c_.hiddenSize, v = c_.vocabSize;
  const int64_t layer = c_.numHiddenLayers;
  const std::string p = layerPrefix(layer);
  auto fn = makeEntry(b_, module_, loc_, "draft", h, v, /*draft=*/true, args_);
  Value hiddenIn = fn.getArgument(4);

  // The MTP layer's own embedding and head when the checkpoint has them
  // (GLM-4.x), the main model's otherwise (GLM-5.x, GLM.md 4.3).
  auto own = ws_.plain(p + "embed_tokens.weight", {v, h}, /*optional=*/true);
  if (!own.isOk())
    return fail(own.status());
  std::string tableName =
      own->present ? p + "embed_tokens.weight" : "model.embed_tokens.weight";
  auto table = plain(tableName, {v, h});
  if (failed(table))
    return failure();
  Value e = EmbeddingOp::create(b_, loc_, act({h}), *table, args_.ids);
  auto en = rmsNorm(e, p + "enorm.weight", h);
  auto hn = rmsNorm(hiddenIn, p + "hnorm.weight", h);
  if (failed(en) || failed(hn))
    return failure();
  // Embedding first, then the hidden state (GLM.md 5.1).
  Value cat = ConcatOp::create(b_, loc_, act({2 * h}), ValueRange{*en, *hn},
                               b_.getI64IntegerAttr(1));
  auto u = linear(cat, p + "eh_proj", h, 2 * h);
  if (failed(u))
    return failure();
  Value topk;
  auto x = decoderLayer(*u, layer, topk);
  if (failed(x))
    return failure();
  auto g = rmsNorm(*x, p + "shared_head.norm.weight", h);
  if (failed(g))
    return failure();
  Value rowsIn = TakeRowsOp::create(b_, loc_, act({h}), *g, args_.rows);
  auto head = ws_.plain(p + "shared_head.head.weight", {v, h}, true);
  if (!head.isOk())
    return fail(head.status());
  auto logits = linear(
      rowsIn, head->present ? p + "shared_head.head" : std::string("lm_head"),
      v, h);
  if (failed(logits))
    return failure();
  func::ReturnOp::create(b_, loc_, ValueRange{*logits, *g});
  return success();
}

OwningOpRef<ModuleOp> kiln::glm::buildGlmModule(MLIRContext *context,
                                                Location loc,
                                                const GlmConfig &config,
                                                const WeightSource &weights,
                                                const GraphOptions &options) {
  context->loadDialect<KilnDialect, func::FuncDialect>();
  if (config.isDsa() && config.qLoraRank <= 0) {
    emitError(loc) << config.source
                   << ": q_lora_rank must be positive for glm_moe_dsa, found "
                   << config.qLoraRank;
    return nullptr;
  }
  if (options.cacheType != "f32" && options.cacheType != "bf16") {
    emitError(loc) << "cache type must be f32 or bf16, found '"
                   << options.cacheType << "'";
    return nullptr;
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  Builder b(context);
  (*module)->setAttr("kiln.model_type",
                     b.getStringAttr(modelTypeName(config.modelType)));
  (*module)->setAttr("kiln.num_hidden_layers",
                     b.getI64IntegerAttr(config.numHiddenLayers));
  (*module)->setAttr("kiln.hidden_size",
                     b.getI64IntegerAttr(config.hiddenSize));
  (*module)->setAttr("kiln.vocab_size", b.getI64IntegerAttr(config.vocabSize));
  (*module)->setAttr(
      "kiln.router",
      RouterAttr::get(context, config.numExpertsPerTok, config.nGroup,
                      config.topkGroup, config.normTopkProb,
                      b.getF32FloatAttr(config.routedScalingFactor)));

  GraphEmitter emitter(*module, config, weights, options);
  bool ok = succeeded(emitter.buildMain("prefill")) &&
            succeeded(emitter.buildMain("decode"));
  if (ok && options.emitDraft && config.numNextnPredictLayers > 0)
    ok = succeeded(emitter.buildDraft());
  if (!ok) {
    emitError(loc) << emitter.error().message();
    return nullptr;
  }
  return module;
}
