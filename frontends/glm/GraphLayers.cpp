//===- GraphLayers.cpp - Decoder layers of the GLM graph ------------------===//
//
// The math is GLM.md section 3; names are section 4.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/GraphEmitter.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::glm;

Value GraphEmitter::rope(Value x, bool interleaved, int64_t offset,
                         int64_t dims) {
  auto style = interleaved ? RopeStyle::interleaved : RopeStyle::neox;
  return RopeOp::create(b_, loc_, x.getType(), x, args_.pos,
                        RopeStyleAttr::get(b_.getContext(), style),
                        b_.getF32FloatAttr(c_.ropeTheta),
                        b_.getI64IntegerAttr(offset),
                        b_.getI64IntegerAttr(dims));
}

FailureOr<Value> GraphEmitter::decoderLayer(Value x, int64_t layer,
                                            Value &lastTopk) {
  const int64_t h = c_.hiddenSize;
  const std::string p = layerPrefix(layer);
  auto hn = rmsNorm(x, p + "input_layernorm.weight", h);
  if (failed(hn))
    return failure();
  auto attn = c_.isDsa() ? mlaAttention(*hn, layer, lastTopk)
                         : gqaAttention(*hn, layer);
  if (failed(attn))
    return failure();
  Value res = add(x, *attn);
  auto hn2 = rmsNorm(res, p + "post_attention_layernorm.weight", h);
  if (failed(hn2))
    return failure();
  auto mlp = c_.isMoeLayer(layer)
                 ? moeMlp(*hn2, layer)
                 : denseMlp(*hn2, p + "mlp.", c_.intermediateSize);
  if (failed(mlp))
    return failure();
  return add(res, *mlp);
}

FailureOr<Value> GraphEmitter::mlaAttention(Value h, int64_t layer,
                                            Value &lastTopk) {
  const int64_t hidden = c_.hiddenSize, heads = c_.numAttentionHeads;
  const int64_t dn = c_.qkNopeHeadDim, dr = c_.qkRopeHeadDim, dv = c_.vHeadDim,
                lora = c_.kvLoraRank;
  const std::string p = layerPrefix(layer) + "self_attn.";

  // Queries: c_q = norm(x W_qa), q = c_q W_qb split [nope | pe] per head.
  auto cqRaw = linear(h, p + "q_a_proj", c_.qLoraRank, hidden);
  if (failed(cqRaw))
    return failure();
  auto cq = rmsNorm(*cqRaw, p + "q_a_layernorm.weight", c_.qLoraRank);
  if (failed(cq))
    return failure();
  auto q = linear(*cq, p + "q_b_proj", heads * (dn + dr), c_.qLoraRank);
  if (failed(q))
    return failure();
  auto split =
      SplitOp::create(b_, loc_, TypeRange{act({heads, dn}), act({heads, dr})},
                      reshape(*q, {heads, dn + dr}), b_.getI64IntegerAttr(2));
  Value qNope = split.getResult(0);
  Value qPe = rope(split.getResult(1), c_.ropeInterleave, 0, dr);

  // Latent: [c_kv | k_pe] = x W_kva; c_kv normed, k_pe rotated, cached.
  auto kva = linear(h, p + "kv_a_proj_with_mqa", lora + dr, hidden);
  if (failed(kva))
    return failure();
  auto kvSplit = SplitOp::create(b_, loc_, TypeRange{act({lora}), act({dr})},
                                 *kva, b_.getI64IntegerAttr(1));
  auto ckv = rmsNorm(kvSplit.getResult(0), p + "kv_a_layernorm.weight", lora);
  if (failed(ckv))
    return failure();
  Value kpe = rope(kvSplit.getResult(1), c_.ropeInterleave, 0, dr);
  Value latent =
      ConcatOp::create(b_, loc_, act({lora + dr}), ValueRange{*ckv, kpe},
                       b_.getI64IntegerAttr(1));
  std::string latentCache =
      cache("layers." + std::to_string(layer) + ".latent", lora + dr);
  KvCacheAppendOp::create(b_, loc_, latentCache, args_.seq, args_.pos, latent);

  // DSA selection: a full layer computes it, a shared one reuses the last.
  if (c_.indexerType(layer) == IndexerType::Full) {
    auto topk = indexer(h, *cq, layer);
    if (failed(topk))
      return failure();
    lastTopk = *topk;
  }
  if (!lastTopk)
    return fail(makeError(StatusCode::InvalidArgument, c_.source, ": layer ",
                          layer,
                          " is a shared indexer layer with no full layer "
                          "before it"));

  auto kvb = linearWeight(p + "kv_b_proj", heads * (dn + dv), lora);
  if (failed(kvb))
    return failure();
  float scale = 1.0f / std::sqrt(float(dn + dr));
  Value o = MlaAttentionOp::create(
      b_, loc_, act({heads, dv}), qNope, qPe, *kvb, Value(),
      FlatSymbolRefAttr::get(b_.getContext(), latentCache), args_.seq,
      args_.pos, lastTopk, b_.getF32FloatAttr(scale), DenseI64ArrayAttr());
  return linear(reshape(o, {heads * dv}), p + "o_proj", hidden, heads * dv);
}

FailureOr<Value> GraphEmitter::indexer(Value h, Value cq, int64_t layer) {
  const int64_t hidden = c_.hiddenSize, ih = c_.indexNHeads,
                id = c_.indexHeadDim, dr = c_.qkRopeHeadDim;
  const std::string p = layerPrefix(layer) + "self_attn.indexer.";
  auto q = linear(cq, p + "wq_b", ih * id, c_.qLoraRank);
  if (failed(q))
    return failure();
  // Indexer heads are [pe | nope]: RoPE on the first dims (GLM.md 3.5).
  Value qI = rope(reshape(*q, {ih, id}), c_.indexerRopeInterleave, 0, dr);
  auto k = linear(h, p + "wk", id, hidden);
  if (failed(k))
    return failure();
  auto nw = plain(p + "k_norm.weight", {id});
  auto nb = plain(p + "k_norm.bias", {id});
  if (failed(nw) || failed(nb))
    return failure();
  Value kn = LayerNormOp::create(b_, loc_, act({id}), *k, *nw, *nb,
                                 b_.getF32FloatAttr(1e-6f));
  Value kI = rope(kn, c_.indexerRopeInterleave, 0, dr);
  std::string keyCache =
      cache("layers." + std::to_string(layer) + ".index", id);
  KvCacheAppendOp::create(b_, loc_, keyCache, args_.seq, args_.pos, kI);
  auto w = linear(h, p + "weights_proj", ih, hidden);
  if (failed(w))
    return failure();
  Value ws = ScaleOp::create(b_, loc_, *w,
                             b_.getF32FloatAttr(1.0f / std::sqrt(float(ih))));
  auto resultT = RankedTensorType::get({ShapedType::kDynamic, c_.indexTopk},
                                       b_.getI32Type());
  return Value(IndexerTopKOp::create(
      b_, loc_, resultT, qI, ws,
      FlatSymbolRefAttr::get(b_.getContext(), keyCache), args_.seq, args_.pos,
      b_.getI64IntegerAttr(c_.indexTopk),
      b_.getF32FloatAttr(1.0f / std::sqrt(float(id)))));
}

FailureOr<Value> GraphEmitter::gqaAttention(Value h, int64_t layer) {
  const int64_t hidden = c_.hiddenSize, nh = c_.numAttentionHeads,
                nkv = c_.numKeyValueHeads, hd = c_.headDim;
  const std::string p = layerPrefix(layer) + "self_attn.";
  bool bias = c_.attentionBias;
  auto q = linear(h, p + "q_proj", nh * hd, hidden, bias);
  auto k = linear(h, p + "k_proj", nkv * hd, hidden, bias);
  auto v = linear(h, p + "v_proj", nkv * hd, hidden, bias);
  if (failed(q) || failed(k) || failed(v))
    return failure();
  Value q3 = reshape(*q, {nh, hd}), k3 = reshape(*k, {nkv, hd});
  if (c_.useQkNorm) {
    auto qn = rmsNorm(q3, p + "q_norm.weight", hd);
    auto kn = rmsNorm(k3, p + "k_norm.weight", hd);
    if (failed(qn) || failed(kn))
      return failure();
    q3 = *qn;
    k3 = *kn;
  }
  // NeoX RoPE on the first partial_rotary_factor of each head (GLM.md 3.3).
  q3 = rope(q3, /*interleaved=*/false, 0, c_.ropeDim());
  k3 = rope(k3, /*interleaved=*/false, 0, c_.ropeDim());
  std::string l = "layers." + std::to_string(layer);
  std::string kc = cache(l + ".k", nkv * hd), vc = cache(l + ".v", nkv * hd);
  KvCacheAppendOp::create(b_, loc_, kc, args_.seq, args_.pos,
                          reshape(k3, {nkv * hd}));
  KvCacheAppendOp::create(b_, loc_, vc, args_.seq, args_.pos, *v);
  Value o = GqaAttentionOp::create(
      b_, loc_, act({nh, hd}), q3, FlatSymbolRefAttr::get(b_.getContext(), kc),
      FlatSymbolRefAttr::get(b_.getContext(), vc), args_.seq, args_.pos,
      b_.getF32FloatAttr(1.0f / std::sqrt(float(hd))));
  return linear(reshape(o, {nh * hd}), p + "o_proj", hidden, nh * hd);
}

FailureOr<Value> GraphEmitter::denseMlp(Value h, const std::string &p,
                                        int64_t inter) {
  const int64_t hidden = c_.hiddenSize;
  auto g = linear(h, p + "gate_proj", inter, hidden);
  auto u = linear(h, p + "up_proj", inter, hidden);
  if (failed(g) || failed(u))
    return failure();
  Value act = SiluOp::create(b_, loc_, *g);
  Value prod = MulOp::create(b_, loc_, act.getType(), act, *u);
  return linear(prod, p + "down_proj", hidden, inter);
}

FailureOr<Value> GraphEmitter::moeMlp(Value h, int64_t layer) {
  const int64_t hidden = c_.hiddenSize, e = c_.nRoutedExperts,
                k = c_.numExpertsPerTok, inter = c_.moeIntermediateSize;
  const std::string p = layerPrefix(layer) + "mlp.";

  // The noaux_tc router, op by op, in FP32 (GLM.md 3.2).
  auto gate = plain(p + "gate.weight", {e, hidden});
  auto bias = plain(p + "gate.e_score_correction_bias", {e});
  if (failed(gate) || failed(bias))
    return failure();
  Value logits = matmul(h, *gate, e);
  Value s = SigmoidOp::create(b_, loc_, logits);
  Value sel = add(s, *bias);
  sel = GroupLimitOp::create(b_, loc_, sel, b_.getI64IntegerAttr(c_.nGroup),
                             b_.getI64IntegerAttr(c_.topkGroup));
  auto idxT = RankedTensorType::get({ShapedType::kDynamic, k}, b_.getI32Type());
  auto topk =
      TopKOp::create(b_, loc_, act({k}), idxT, sel, b_.getI64IntegerAttr(k));
  Value w = GatherOp::create(b_, loc_, act({k}), s, topk.getIndices());
  if (c_.normTopkProb)
    w = NormalizeOp::create(b_, loc_, w, b_.getF32FloatAttr(1e-20f));
  w = ScaleOp::create(b_, loc_, w, b_.getF32FloatAttr(c_.routedScalingFactor));

  auto gs = expertStack(p, "gate_proj", inter, hidden);
  auto us = expertStack(p, "up_proj", inter, hidden);
  auto ds = expertStack(p, "down_proj", hidden, inter);
  if (failed(gs) || failed(us) || failed(ds))
    return failure();
  Value y = ExpertsOp::create(b_, loc_, act({hidden}), h, topk.getIndices(), w,
                              *gs, *us, *ds);
  if (c_.nSharedExperts <= 0)
    return y;
  auto shared = denseMlp(h, p + "shared_experts.", inter * c_.nSharedExperts);
  if (failed(shared))
    return failure();
  return add(y, *shared);
}
