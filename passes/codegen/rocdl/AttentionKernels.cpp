//===- AttentionKernels.cpp - KV caches, GQA and MLA ----------------------===//
//
// Caches are paged: [pages, page_rows, width] rows of f32 or BF16 (i16 bit
// patterns, converted with exact bit operations: BF16 -> f32 is a shift,
// f32 -> BF16 rounds to nearest even and keeps NaN, as cpu::floatToBf16).
// Every kernel that reads or writes one ends its arguments with `paging` =
// (i32 capacity, i32 table[slots, capacity / page_rows], i32 page_rows):
// position p of slot s is row table[s][p / page_rows] * page_rows +
// p % page_rows (AttentionKernel::cacheRow). A table whose slot s holds
// pages s * capacity / page_rows + j is the unpaged [slots, capacity, width].
// Every workgroup has kRowBlock threads (4 waves). Kernel arguments (params
// in KernelParams.def; "act" = rows of activations, R at run time):
//
//   kv_append          (cache, i32 seq[R], i32 pos[R], f32 values[R, w],
//                       paging)                             grid (R)
//       cache[seq][pos][:] = values; a position outside [0, capacity) is
//       not written.
//   gqa_attention      (f32 q[R, qh*d], kcache, vcache, i32 seq[R],
//                       i32 pos[R], f32 out[R, qh*dv], paging)
//                                                          grid (R, qh)
//   mla_attention s0   (f32 q_nope[R, h*n], f32 q_pe[R, h*r], kv_b[, kv_b
//                       scales], f32 q_lat[R, h*(l+r)], i32 R)
//                                                   grid (ceil(R/tt), h)
//       q_lat[t, h] = [W_UK_h^T q_nope[t, h] | q_pe[t, h]].
//   mla_attention s1   (f32 q_lat, latent cache, i32 seq[R], i32 pos[R]
//                       [, i32 top_k[R, k]], f32 o_lat[R, h*l],
//                       paging)                            grid (R, h)
//   mla_attention s2   (f32 o_lat, kv_b[, scales], f32 out[R, h*v], i32 R)
//                                                   grid (ceil(R/tt), h)
//       out[t, h] = W_UV_h o_lat[t, h].
//
// Attention (GQA and MLA stage 1) runs one workgroup per (token, query
// head): tiles of kRowBlock keys, one key per thread for the score (q in
// LDS), an online softmax (running maximum and sum, max-rescaled) as
// cpu::detail::attend, then the tile's weights and rows go through LDS and
// each thread accumulates value columns (coalesced across the threads).
// kv_b (MLA) is f32, BF16, MXFP4 in its checkpoint layout (row-major
// [rows, l/2] bytes, low nibble first, E8M0 scales [rows, l/32]) or FP8
// E4M3 [rows, l] with f32 scales per 128x128 block. The DSA indexer
// (indexer_top_k) is in IndexerKernels.cpp; the helpers all of them share
// are struct AttentionKernel (AttentionKernel.h).
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/AttentionKernel.h"
#include "passes/codegen/rocdl/KernelParams.h"

using namespace mlir;
using namespace kiln::rocdl;
using namespace kiln::rocdl::attention;

// -- kv_append --------------------------------------------------------------

void AttentionKernel::kvAppend() {
  auto p = params<KvAppendParams>(spec);
  bool bf = p.bf;
  int64_t w = p.w;
  SmallVector<Type> args = {cacheType(bf, w), ir.activations(i32(), 1),
                            ir.activations(i32(), 1), ir.activations(f32(), w)};
  args.append(pagingTypes());
  auto fn = createKernelFunc(b, module, spec, args);
  Value cache = fn.getArgument(0), values = fn.getArgument(3);
  Paging paged = paging(fn);
  Value capacity = paged.capacity;
  IrIndex t = ir.blockId(gpu::Dimension::x);
  Value seq = ir.load(fn.getArgument(1), t);
  Value pos = ir.load(fn.getArgument(2), t);
  Value ok = andi(andi(cmpi(arith::CmpIPredicate::sge, pos, ci32(0)),
                       cmpi(arith::CmpIPredicate::slt, pos, capacity)),
                  cmpi(arith::CmpIPredicate::sge, seq, ci32(0)));
  ir.ifThen(ok, [&] {
    IrIndex base = cacheRow(paged, seq, index(pos)) * w;
    ir.forLoop(ir.threadId(), c(w), wg(), {}, [&](IrIndex i, ValueRange) {
      Value v = ir.load(values, t * w + i);
      ir.store(bf ? f32ToBf16(v) : v, cache, base + i);
      return SmallVector<Value>();
    });
  });
}

// -- Attention core ---------------------------------------------------------

SmallVector<Type> AttentionKernel::attendBuffers(int64_t keyDim,
                                                 int64_t valueDim) {
  int64_t colThreads = std::min(valueDim, wg());
  int64_t splits = wg() / colThreads;
  int64_t cols = (valueDim + colThreads - 1) / colThreads;
  return {ir.workgroup(f32(), keyDim),
          ir.workgroup(f32(), wg()),
          ir.workgroup(i32(), wg()),
          ir.workgroup(f32(), waves()),
          ir.workgroup(f32(), waves()),
          ir.workgroup(f32(),
                       std::max<int64_t>(1, (splits - 1) * colThreads * cols))};
}

void AttentionKernel::attend(const Attend &a) {
  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex h = ir.blockId(gpu::Dimension::y);
  IrIndex tid = ir.threadId();
  Value seq = ir.load(a.seqs, t), pos = ir.load(a.positions, t);
  IrIndex n = a.listWidth ? c(a.listWidth) : index(pos) + 1;
  // This workgroup's keys [first, last): all of them, or split z's share.
  IrIndex first = c(0), last = n;
  if (a.keySplits > 1) {
    IrIndex z = ir.blockId(gpu::Dimension::z);
    IrIndex chunk = (n + (a.keySplits - 1)) / a.keySplits;
    first = ir.min(z * chunk, n);
    last = ir.min(first + chunk, n);
  }
  IrIndex kvHead = h / (a.qHeads / a.kvHeads);
  IrIndex keyCol = kvHead * a.keyDim, valueCol = kvHead * a.valueDim;

  IrIndex qBase = (t * a.qHeads + h) * a.keyDim;
  ir.forLoop(tid, c(a.keyDim), wg(), {}, [&](IrIndex i, ValueRange) {
    ir.store(ir.load(a.q, qBase + i), a.qs, i);
    return SmallVector<Value>();
  });
  barrier();

  int64_t colThreads = std::min(a.valueDim, wg());
  int64_t splits = wg() / colThreads;
  int64_t cols = (a.valueDim + colThreads - 1) / colThreads;
  IrIndex ct = tid % colThreads, sub = tid / colThreads;
  Value active = ir.ult(sub, c(splits));
  bool vec4 = a.keyDim % 4 == 0 && a.keyWidth % 4 == 0;
  Value zero = ir.f32(0.0f);

  SmallVector<Value> init = {negInf(), zero};
  init.append(cols, zero);
  SmallVector<Value> state =
      ir.forLoop(first, last, wg(), init, [&](IrIndex j0, ValueRange carried) {
        Value m = carried[0], l = carried[1];
        IrIndex j = j0 + tid;
        Value valid = ir.ult(j, last);
        IrIndex jc = ir.min(j, last - 1);
        IrIndex position = jc;
        if (a.listWidth) {
          Value listed = ir.load(a.list, t * a.listWidth + jc);
          Value inCache =
              andi(cmpi(arith::CmpIPredicate::sge, listed, ci32(0)),
                   cmpi(arith::CmpIPredicate::slt, listed, a.paging.capacity));
          valid = andi(valid, inCache);
          position = index(select(inCache, listed, ci32(0)));
        }
        IrIndex row = cacheRow(a.paging, seq, position);
        IrIndex keyBase = row * a.keyWidth + keyCol;
        Value dot;
        if (vec4) {
          Value acc =
              ir.forLoop(c(0), opaque(a.keyDim, index(a.paging.capacity)), 4,
                         {arith::ConstantOp::create(
                             b, DenseElementsAttr::get(vec(4, f32()), 0.0f))},
                         [&](IrIndex d, ValueRange acc) {
                           Value k = loadCache4(a.keys, a.bf, keyBase + d);
                           Value qv = ir.loadVector(vec(4, f32()), a.qs, d);
                           return SmallVector<Value>{fma(qv, k, acc[0])};
                         })[0];
          dot = vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc);
        } else {
          dot = ir.forLoop(c(0), opaque(a.keyDim, index(a.paging.capacity)), 1,
                           {zero}, [&](IrIndex d, ValueRange acc) {
                             Value k = loadCache(a.keys, a.bf, keyBase + d);
                             return SmallVector<Value>{
                                 fma(ir.load(a.qs, d), k, acc[0])};
                           })[0];
        }
        Value s = select(valid, mulf(dot, ir.f32(a.scale)), negInf());
        // Online softmax, as cpu::detail::attend.
        Value mNew = arith::MaxNumFOp::create(b, m, blockMax(s, a.redMax));
        Value noMax = cmpf(arith::CmpFPredicate::OEQ, mNew, negInf());
        Value w = select(noMax, zero, exp(arith::SubFOp::create(b, s, mNew)));
        Value corr = select(cmpf(arith::CmpFPredicate::OEQ, m, negInf()), zero,
                            exp(arith::SubFOp::create(b, m, mNew)));
        Value lNew = addf(mulf(l, corr), blockSum(w, a.redSum));
        ir.store(w, a.weights, tid);
        ir.store(select(valid, toI32(row), ci32(-1)), a.rows, tid);
        barrier();

        SmallVector<Value> acc;
        for (int64_t i = 0; i < cols; ++i)
          acc.push_back(mulf(carried[2 + i], corr));
        IrIndex count = ir.min(c(wg()), last - j0);
        IrIndex start = ir.idx(select(active, sub, count));
        SmallVector<Type> types(cols, f32());
        acc = ir.forLoop(
            start, count, splits, acc, [&](IrIndex jj, ValueRange acc) {
              Value r = ir.load(a.rows, jj);
              Value pj = ir.load(a.weights, jj);
              Value ok = cmpi(arith::CmpIPredicate::sge, r, ci32(0));
              return ifElse(
                  ok, types,
                  [&] {
                    IrIndex base = index(r) * a.valueWidth + valueCol;
                    SmallVector<Value> next;
                    for (int64_t i = 0; i < cols; ++i) {
                      IrIndex col =
                          ir.min(ct + i * colThreads, c(a.valueDim - 1));
                      Value v = loadCache(a.values, a.bf, base + col);
                      next.push_back(fma(pj, v, acc[i]));
                    }
                    return next;
                  },
                  [&] { return SmallVector<Value>(acc); });
            });
        barrier();
        SmallVector<Value> next = {mNew, lNew};
        next.append(acc.begin(), acc.end());
        return next;
      });

  SmallVector<Value> acc(state.begin() + 2, state.end());
  if (splits > 1) {
    auto partialAt = [&](IrIndex s, int64_t i) {
      return ((s - 1) * cols + c(i)) * colThreads + ct;
    };
    Value writer = andi(active, cmpi(arith::CmpIPredicate::ugt, sub, c(0)));
    ir.ifThen(writer, [&] {
      for (int64_t i = 0; i < cols; ++i)
        ir.store(acc[i], a.partial, partialAt(sub, i));
    });
    barrier();
    for (int64_t s = 1; s < splits; ++s)
      for (int64_t i = 0; i < cols; ++i) {
        IrIndex at =
            ir.min(partialAt(c(s), i), c((splits - 1) * colThreads * cols - 1));
        acc[i] = addf(acc[i], ir.load(a.partial, at));
      }
  }
  Value l = state[1];
  if (a.keySplits > 1) {
    // The split's softmax state, unnormalized: stage 3 adds the splits.
    IrIndex z = ir.blockId(gpu::Dimension::z);
    IrIndex base = ((t * a.qHeads + h) * a.keySplits + z) * (a.valueDim + 2);
    ir.ifThen(cmpi(arith::CmpIPredicate::eq, tid, c(0)), [&] {
      ir.store(state[0], a.out, base);
      ir.store(l, a.out, base + 1);
    });
    for (int64_t i = 0; i < cols; ++i) {
      IrIndex col = ct + i * colThreads;
      Value ok = andi(cmpi(arith::CmpIPredicate::eq, sub, c(0)),
                      ir.ult(col, c(a.valueDim)));
      ir.ifThen(ok, [&] { ir.store(acc[i], a.out, base + 2 + col); });
    }
    return;
  }
  Value inv = select(cmpf(arith::CmpFPredicate::OGT, l, ir.f32(0.0f)),
                     arith::DivFOp::create(b, ir.f32(1.0f), l), ir.f32(0.0f));
  IrIndex outBase = (t * a.qHeads + h) * a.valueDim;
  for (int64_t i = 0; i < cols; ++i) {
    IrIndex col = ct + i * colThreads;
    Value ok = andi(cmpi(arith::CmpIPredicate::eq, sub, c(0)),
                    ir.ult(col, c(a.valueDim)));
    ir.ifThen(ok, [&] { ir.store(mulf(acc[i], inv), a.out, outBase + col); });
  }
}

void AttentionKernel::gqa() {
  auto p = params<GqaAttentionParams>(spec);
  bool bf = p.bf;
  int64_t qh = p.qh, kvh = p.kvh, d = p.d, dv = p.dv;
  SmallVector<Type> args = {
      ir.activations(f32(), qh * d), cacheType(bf, kvh * d),
      cacheType(bf, kvh * dv),       ir.activations(i32(), 1),
      ir.activations(i32(), 1),      ir.activations(f32(), qh * dv)};
  args.append(pagingTypes());
  auto fn = createKernelFunc(b, module, spec, args, attendBuffers(d, dv));
  auto wb = fn.getWorkgroupAttributions();
  Attend a{qh,
           kvh,
           d,
           dv,
           kvh * d,
           kvh * dv,
           0,
           bf,
           p.scale,
           fn.getArgument(0),
           fn.getArgument(1),
           fn.getArgument(2),
           fn.getArgument(3),
           fn.getArgument(4),
           Value(),
           fn.getArgument(5),
           paging(fn),
           wb[0],
           wb[1],
           wb[2],
           wb[3],
           wb[4],
           wb[5]};
  attend(a);
}

// -- MLA --------------------------------------------------------------------

void AttentionKernel::mlaAttend() {
  auto p = params<MlaAttentionParams>(spec);
  bool bf = p.bf;
  int64_t h = p.h, l = p.l, r = p.r, k = p.k;
  SmallVector<Type> args = {ir.activations(f32(), h * (l + r)),
                            cacheType(bf, l + r), ir.activations(i32(), 1),
                            ir.activations(i32(), 1)};
  if (k)
    args.push_back(ir.activations(i32(), k));
  // o_lat, or with key splits each split's [max, sum, values].
  int64_t splits = p.sp > 1 ? int64_t(p.sp) : 0;
  args.push_back(ir.activations(f32(), splits ? h * splits * (l + 2) : h * l));
  args.append(pagingTypes());
  auto fn = createKernelFunc(b, module, spec, args, attendBuffers(l + r, l));
  auto wb = fn.getWorkgroupAttributions();
  size_t next = k ? 5 : 4;
  Attend a{h,
           1,
           l + r,
           l,
           l + r,
           l + r,
           k,
           bf,
           p.scale,
           fn.getArgument(0),
           fn.getArgument(1),
           fn.getArgument(1),
           fn.getArgument(2),
           fn.getArgument(3),
           k ? fn.getArgument(4) : Value(),
           fn.getArgument(next),
           paging(fn),
           wb[0],
           wb[1],
           wb[2],
           wb[3],
           wb[4],
           wb[5],
           splits};
  attend(a);
}

/// Stage 3: o_lat[t, h] = the key splits' softmax states merged in split
/// order: M = max m_z, o = sum_z e^(m_z - M) acc_z / sum_z e^(m_z - M) l_z
/// (empty splits, m_z = -inf, add nothing). Grid (R, h), a thread per
/// latent column.
void AttentionKernel::mlaCombine() {
  auto p = params<MlaAttentionParams>(spec);
  int64_t h = p.h, l = p.l, sp = p.sp;
  auto fn = createKernelFunc(
      b, module, spec,
      {ir.activations(f32(), h * sp * (l + 2)), ir.activations(f32(), h * l)});
  Value parts = fn.getArgument(0), out = fn.getArgument(1);
  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex head = ir.blockId(gpu::Dimension::y);
  IrIndex base = (t * h + head) * sp * (l + 2);
  // The splits' maxima and sums, read once; each split's weight
  // e^(m_z - M) computed once (sp is a compile-time constant).
  Value zero = ir.f32(0.0f);
  SmallVector<Value> maxima, sums;
  for (int64_t z = 0; z < sp; ++z) {
    maxima.push_back(ir.load(parts, base + z * (l + 2)));
    sums.push_back(ir.load(parts, base + z * (l + 2) + 1));
  }
  Value most = negInf();
  for (Value m : maxima)
    most = arith::MaxNumFOp::create(b, most, m);
  Value none = cmpf(arith::CmpFPredicate::OEQ, most, negInf());
  SmallVector<Value> weights;
  Value sum = zero;
  for (int64_t z = 0; z < sp; ++z) {
    Value empty = cmpf(arith::CmpFPredicate::OEQ, maxima[z], negInf());
    weights.push_back(select(ori(none, empty), zero,
                             exp(arith::SubFOp::create(b, maxima[z], most))));
    sum = addf(sum, mulf(weights[z], sums[z]));
  }
  Value inv = select(cmpf(arith::CmpFPredicate::OGT, sum, zero),
                     arith::DivFOp::create(b, ir.f32(1.0f), sum), zero);
  ir.forLoop(ir.threadId(), c(l), wg(), {}, [&](IrIndex col, ValueRange) {
    Value o = zero;
    for (int64_t z = 0; z < sp; ++z)
      o = addf(o,
               mulf(weights[z], ir.load(parts, base + z * (l + 2) + 2 + col)));
    ir.store(mulf(o, inv), out, (t * h + head) * l + col);
    return SmallVector<Value>();
  });
}

/// Stage 0: q_lat = [W_UK_h^T q_nope | q_pe] for tt tokens of one head;
/// each kv_b element read serves all of them.
void AttentionKernel::mlaAbsorb() {
  auto p = params<MlaAttentionParams>(spec);
  int64_t h = p.h, n = p.n, r = p.r, v = p.v, l = p.l, tt = p.tt;
  SmallVector<Type> args = {ir.activations(f32(), h * n),
                            ir.activations(f32(), h * r)};
  SmallVector<Type> w = kvbTypes();
  args.append(w.begin(), w.end());
  args.push_back(ir.activations(f32(), h * (l + r)));
  args.push_back(i32());
  auto fn =
      createKernelFunc(b, module, spec, args, {ir.workgroup(f32(), tt * n)});
  Value qNope = fn.getArgument(0), qPe = fn.getArgument(1);
  ValueRange weights = fn.getArguments().slice(2, w.size());
  Value qLat = fn.getArgument(2 + w.size());
  IrIndex rows = index(fn.getArgument(3 + w.size()));
  Value qs = fn.getWorkgroupAttributions()[0];

  IrIndex t0 = ir.blockId(gpu::Dimension::x) * tt;
  IrIndex hh = ir.blockId(gpu::Dimension::y);
  IrIndex tid = ir.threadId();
  ir.forLoop(tid, c(tt * n), wg(), {}, [&](IrIndex i, ValueRange) {
    IrIndex tok = t0 + i / n;
    IrIndex tc = ir.min(tok, rows - 1);
    Value x = ir.load(qNope, (tc * h + hh) * n + i % n);
    ir.store(select(ir.ult(tok, rows), x, ir.f32(0.0f)), qs, i);
    return SmallVector<Value>();
  });
  ir.forLoop(tid, c(tt * r), wg(), {}, [&](IrIndex i, ValueRange) {
    IrIndex tok = t0 + i / r;
    ir.ifThen(ir.ult(tok, rows), [&] {
      Value x = ir.load(qPe, (tok * h + hh) * r + i % r);
      ir.store(x, qLat, (tok * h + hh) * (l + r) + l + i % r);
    });
    return SmallVector<Value>();
  });
  barrier();
  IrIndex rowBase = hh * (n + v);
  // Uniform loop (a barrier per pass keeps the compiler from hoisting
  // every LDS read of q out of it when the loops unroll fully).
  ir.forLoop(c(0), c(l), wg(), {}, [&](IrIndex c0, ValueRange) {
    IrIndex col = ir.min(c0 + tid, c(l - 1));
    SmallVector<Value> zeros(tt, ir.f32(0.0f));
    SmallVector<Value> acc = ir.forLoop(
        c(0), opaque(n, rows), 1, zeros, [&](IrIndex i, ValueRange acc) {
          schedBarrier();
          Value x = kvbElem(weights, rowBase + i, col);
          SmallVector<Value> next;
          for (int64_t k = 0; k < tt; ++k)
            next.push_back(fma(ir.load(qs, i + k * n), x, acc[k]));
          return next;
        });
    for (int64_t k = 0; k < tt; ++k) {
      IrIndex tok = t0 + k;
      ir.ifThen(andi(ir.ult(tok, rows), ir.ult(c0 + tid, c(l))), [&] {
        ir.store(acc[k], qLat, (tok * h + hh) * (l + r) + col);
      });
    }
    barrier();
    return SmallVector<Value>();
  });
}

/// Stage 2: out = W_UV_h o_lat for tt tokens of one head; a thread per
/// output row, the tokens' o_lat in LDS.
void AttentionKernel::mlaExpand() {
  auto p = params<MlaAttentionParams>(spec);
  int64_t h = p.h, n = p.n, v = p.v, l = p.l, tt = p.tt;
  SmallVector<Type> args = {ir.activations(f32(), h * l)};
  SmallVector<Type> w = kvbTypes();
  args.append(w.begin(), w.end());
  args.push_back(ir.activations(f32(), h * v));
  args.push_back(i32());
  auto fn =
      createKernelFunc(b, module, spec, args, {ir.workgroup(f32(), tt * l)});
  Value oLat = fn.getArgument(0);
  ValueRange weights = fn.getArguments().slice(1, w.size());
  Value out = fn.getArgument(1 + w.size());
  IrIndex rows = index(fn.getArgument(2 + w.size()));
  Value os = fn.getWorkgroupAttributions()[0];

  IrIndex t0 = ir.blockId(gpu::Dimension::x) * tt;
  IrIndex hh = ir.blockId(gpu::Dimension::y);
  IrIndex tid = ir.threadId();
  ir.forLoop(tid, c(tt * l), wg(), {}, [&](IrIndex i, ValueRange) {
    IrIndex tok = t0 + i / l;
    IrIndex tc = ir.min(tok, rows - 1);
    Value x = ir.load(oLat, (tc * h + hh) * l + i % l);
    ir.store(select(ir.ult(tok, rows), x, ir.f32(0.0f)), os, i);
    return SmallVector<Value>();
  });
  barrier();
  Value zero4 =
      arith::ConstantOp::create(b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
  // Uniform loop with a barrier per pass, as in stage 0.
  ir.forLoop(c(0), c(v), wg(), {}, [&](IrIndex v0, ValueRange) {
    IrIndex vr = ir.min(v0 + tid, c(v - 1));
    IrIndex row = hh * (n + v) + n + vr;
    SmallVector<Value> zeros(tt, zero4);
    SmallVector<Value> acc = ir.forLoop(
        c(0), opaque(l, rows), 4, zeros, [&](IrIndex col, ValueRange acc) {
          schedBarrier();
          Value x = kvbElem4(weights, row, col);
          SmallVector<Value> next;
          for (int64_t k = 0; k < tt; ++k)
            next.push_back(
                fma(ir.loadVector(vec(4, f32()), os, col + k * l), x, acc[k]));
          return next;
        });
    for (int64_t k = 0; k < tt; ++k) {
      IrIndex tok = t0 + k;
      ir.ifThen(andi(ir.ult(tok, rows), ir.ult(v0 + tid, c(v))), [&] {
        Value sum =
            vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc[k]);
        ir.store(sum, out, (tok * h + hh) * v + vr);
      });
    }
    barrier();
    return SmallVector<Value>();
  });
}

void AttentionKernel::build() {
  switch (spec.kind) {
  case KernelKind::KvAppend:
    kvAppend();
    break;
  case KernelKind::GqaAttention:
    gqa();
    break;
  case KernelKind::MlaAttention:
    if (params<MlaAttentionParams>(spec).s == 0)
      mlaAbsorb();
    else if (params<MlaAttentionParams>(spec).s == 1 &&
             params<MlaAttentionParams>(spec).mf)
      mlaAttendMfma();
    else if (params<MlaAttentionParams>(spec).s == 1)
      mlaAttend();
    else if (params<MlaAttentionParams>(spec).s == 2)
      mlaExpand();
    else
      mlaCombine();
    break;
  case KernelKind::IndexerTopK:
    if (params<IndexerTopKParams>(spec).s == 0 &&
        params<IndexerTopKParams>(spec).mf)
      indexerScoreMfma();
    else if (params<IndexerTopKParams>(spec).s == 0)
      indexerScore();
    else
      indexerSelect();
    break;
  default:
    llvm_unreachable("not an attention kernel");
  }
  gpu::ReturnOp::create(b);
}

void kiln::rocdl::buildAttentionKernel(gpu::GPUModuleOp module,
                                       const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  AttentionKernel(b, spec, module).build();
}
