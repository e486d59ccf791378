//===- IndexerKernels.cpp - The DSA indexer (indexer_top_k) ---------------===//
//
// The attention family's indexer kernels, on AttentionKernel.h (arguments
// as AttentionKernels.cpp lists them; params in KernelParams.def):
//
//   indexer_top_k s0   (f32 q[R, h*d], f32 weights[R, h], key cache,
//                       i32 seq[R], i32 pos[R], f32 scores[R, capacity],
//                       paging)                            grid (R, sp)
//       scores[t, s] = sum_h w[t, h] relu(scale q[t, h] . key[s]) for
//       s <= pos[t] (NaN -> -inf), as cpu::indexerTopK.
//   indexer_top_k s1   (f32 scores, i32 pos[R], i32 out[R, k],
//                       i32 capacity)                      grid (R)
//       the k best positions in ascending order (ties: lower position),
//       or 0..pos then -1 when pos + 1 <= k.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/AttentionKernel.h"
#include "passes/codegen/rocdl/KernelParams.h"

using namespace mlir;
using namespace kiln::rocdl;
using namespace kiln::rocdl::attention;

namespace {

/// Indexer heads whose dot products a thread accumulates at once.
constexpr int64_t kHeadGroup = 16;

} // namespace

/// Stage 0: one key per thread, every head's dot product accumulated in
/// registers while the key streams in (q in LDS: h * d * 4 bytes, 16 KiB
/// for GLM-5, so four workgroups fit gfx942's 64 KiB; the weights are
/// uniform loads).
AttentionKernel::IndexerScore AttentionKernel::indexerScoreBegin() {
  auto p = params<IndexerTopKParams>(spec);
  int64_t h = p.h, d = p.d;
  SmallVector<Type> args = {
      ir.activations(f32(), h * d), ir.activations(f32(), h),
      cacheType(p.bf, d),           ir.activations(i32(), 1),
      ir.activations(i32(), 1),     ir.activations(f32(), 1)};
  args.append(pagingTypes());
  auto fn =
      createKernelFunc(b, module, spec, args, {ir.workgroup(f32(), h * d)});
  Value q = fn.getArgument(0), qs = fn.getWorkgroupAttributions()[0];
  IrIndex t = ir.blockId(gpu::Dimension::x);
  ir.forLoop(ir.threadId(), c(h * d), wg(), {}, [&](IrIndex i, ValueRange) {
    ir.store(ir.load(q, t * (h * d) + i), qs, i);
    return SmallVector<Value>();
  });
  barrier();
  return {fn,
          fn.getArgument(1),
          fn.getArgument(2),
          fn.getArgument(5),
          qs,
          ir.load(fn.getArgument(3), t),
          paging(fn)};
}

void AttentionKernel::indexerScore() {
  auto p = params<IndexerTopKParams>(spec);
  bool bf = p.bf;
  int64_t h = p.h, d = p.d, sp = p.sp;
  float scale = p.scale;
  IndexerScore f = indexerScoreBegin();
  Value wts = f.wts, keys = f.keys, scores = f.scores, qs = f.qs, seq = f.seq;
  Paging paged = f.paged;
  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex split = ir.blockId(gpu::Dimension::y);
  IrIndex tid = ir.threadId();
  IrIndex n = index(ir.load(f.fn.getArgument(4), t)) + 1;
  IrIndex cap = index(paged.capacity);
  int64_t step = d % 4 == 0 ? 4 : 1;
  ir.forLoop(split * wg(), n, sp * wg(), {}, [&](IrIndex j0, ValueRange) {
    IrIndex j = j0 + tid;
    IrIndex keyBase = cacheRow(paged, seq, ir.min(j, n - 1)) * d;
    // Heads in groups of kHeadGroup accumulators (the key row is read
    // once per group, the repeats from cache): bounded register pressure.
    Value total = ir.f32(0.0f);
    for (int64_t h0 = 0; h0 < h; h0 += kHeadGroup) {
      int64_t group = std::min(kHeadGroup, h - h0);
      SmallVector<Value> zeros(group, ir.f32(0.0f));
      SmallVector<Value> dots = ir.forLoop(
          c(0), opaque(d, cap), step, zeros, [&](IrIndex dd, ValueRange acc) {
            SmallVector<Value> k;
            if (step == 4) {
              Value k4 = loadCache4(keys, bf, keyBase + dd);
              for (int64_t e = 0; e < 4; ++e)
                k.push_back(vector::ExtractOp::create(b, k4, e));
            } else {
              k.push_back(loadCache(keys, bf, keyBase + dd));
            }
            SmallVector<Value> next;
            for (int64_t g = 0; g < group; ++g) {
              IrIndex at = dd + (h0 + g) * d;
              Value x = acc[g];
              if (step == 4) {
                Value q4 = ir.loadVector(vec(4, f32()), qs, at);
                for (int64_t e = 0; e < 4; ++e)
                  x = fma(vector::ExtractOp::create(b, q4, e), k[e], x);
              } else {
                x = fma(ir.load(qs, at), k[0], x);
              }
              next.push_back(x);
            }
            return next;
          });
      // total += w[h] * max(0, scale * dot[h]), in head order (NaN -> 0
      // in the ReLU, as std::max(0.0f, x)).
      for (int64_t g = 0; g < group; ++g) {
        Value x = mulf(ir.f32(scale), dots[g]);
        Value relu = select(cmpf(arith::CmpFPredicate::OGT, x, ir.f32(0.0f)), x,
                            ir.f32(0.0f));
        total = addf(total, mulf(ir.load(wts, t * h + (h0 + g)), relu));
      }
    }
    total =
        select(cmpf(arith::CmpFPredicate::UNO, total, total), negInf(), total);
    ir.ifThen(ir.ult(j, n), [&] { ir.store(total, scores, t * cap + j); });
    // The loop is uniform; the barrier keeps the compiler from hoisting
    // every LDS read of q out of it (spills on small shapes).
    barrier();
    return SmallVector<Value>();
  });
}

/// Stage 0 with mf = 1: each wave scores 16 keys at a time against every
/// head, 16 heads a tile: C[head][key] = q . key over d / 4 f32 16x16x4
/// MFMAs (lane group g supplies dims 16 j + 4 g + e of chunk j for its head
/// from LDS and its key from the cache, the same permutation of K on both
/// sides); then w[h] relu(scale C) summed over the lane's 4 heads and over
/// the 4 lane groups (xor shuffles 16, 32), tile after tile. The waves take
/// key tiles w, w + 4, ... of the workgroup's share; no barrier in the loop.
/// The sum's order differs from the vector kernel's head order (equal keys
/// still score equal).
void AttentionKernel::indexerScoreMfma() {
  auto p = params<IndexerTopKParams>(spec);
  const bool bf = p.bf;
  const int64_t h = p.h, d = p.d, sp = p.sp;
  IndexerScore f = indexerScoreBegin();
  Value wts = f.wts, keys = f.keys, scores = f.scores, qs = f.qs, seq = f.seq;
  Paging paged = f.paged;
  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex split = ir.blockId(gpu::Dimension::y);
  auto [wave, g, cl] = mfmaLane();
  IrIndex n = index(ir.load(f.fn.getArgument(4), t)) + 1;
  IrIndex cap = index(paged.capacity);
  VectorType acc4 = vec(4, f32());
  Value zero = ir.f32(0.0f);
  Value zero4 = zeros4();
  const int64_t headTiles = ceilDiv(h, kTile);
  // The weights of this lane's heads 16 ht + 4 g + i (0 past h).
  SmallVector<Value> weight;
  for (int64_t ht = 0; ht < headTiles; ++ht)
    for (int64_t i = 0; i < 4; ++i) {
      IrIndex head = g * 4 + (ht * kTile + i);
      Value w = ir.load(wts, t * h + ir.min(head, c(h - 1)));
      weight.push_back(select(ir.ult(head, c(h)), w, zero));
    }
  const int64_t perRound = waves() * kTile;
  ir.forLoop(
      split * perRound + wave * kTile, n, sp * perRound, {},
      [&](IrIndex j0, ValueRange) {
        IrIndex j = j0 + cl;
        IrIndex row = cacheRow(paged, seq, ir.min(j, n - 1));
        Value total = zero;
        for (int64_t ht = 0; ht < headTiles; ++ht) {
          // Lane's A row: head 16 ht + cl (q 0 past h).
          IrIndex head = cl + ht * kTile;
          Value inside = ir.ult(head, c(h));
          IrIndex qRow = ir.min(head, c(h - 1)) * d;
          Value dot = ir.forLoop(
              c(0), opaque(d / kTile, cap), 1, {zero4},
              [&](IrIndex chunk, ValueRange acc) {
                IrIndex d0 = chunk * kTile + g * 4;
                Value q4 =
                    select(inside, ir.loadVector(acc4, qs, qRow + d0), zero4);
                Value k4 = loadCache4(keys, bf, row * d + d0);
                return SmallVector<Value>{mfmaChunk(q4, k4, acc[0])};
              })[0];
          // w[h] relu(scale q . k) for the lane's 4 heads (NaN -> 0).
          for (int64_t i = 0; i < 4; ++i) {
            Value x =
                mulf(ir.f32(p.scale), vector::ExtractOp::create(b, dot, i));
            Value relu =
                select(cmpf(arith::CmpFPredicate::OGT, x, zero), x, zero);
            total = addf(total, mulf(weight[ht * 4 + i], relu));
          }
        }
        // Over the 4 lane groups that hold this key's other heads.
        for (int32_t off : {16, 32})
          total = addf(total,
                       gpu::ShuffleOp::create(b, total, off, int32_t(kWaveSize),
                                              gpu::ShuffleMode::XOR)
                           .getShuffleResult());
        total = select(cmpf(arith::CmpFPredicate::UNO, total, total), negInf(),
                       total);
        ir.ifThen(andi(ir.ult(j, n), cmpi(arith::CmpIPredicate::eq, g, c(0))),
                  [&] { ir.store(total, scores, t * cap + j); });
        return SmallVector<Value>();
      });
}

/// Orderable key of a score: unsigned order = float order, -0 = +0.
Value AttentionKernel::orderKey(Value f) {
  Value bits = arith::BitcastOp::create(b, i32(), f);
  bits = select(cmpi(arith::CmpIPredicate::eq, bits, ci32(INT32_MIN)), ci32(0),
                bits);
  Value neg = cmpi(arith::CmpIPredicate::slt, bits, ci32(0));
  return select(neg, arith::XOrIOp::create(b, bits, ci32(-1)),
                arith::XOrIOp::create(b, bits, ci32(INT32_MIN)));
}

/// Stage 1: radix select (4 passes of 8 bits over LDS histograms) finds
/// the k-th best key T and how many keys equal to T to take; a last pass
/// writes, in position order, every key above T and the first of those
/// equal to T.
void AttentionKernel::indexerSelect() {
  auto p = params<IndexerTopKParams>(spec);
  int64_t k = p.k;
  auto fn = createKernelFunc(
      b, module, spec,
      {ir.activations(f32(), 1), ir.activations(i32(), 1),
       ir.activations(i32(), k), i32()},
      {ir.workgroup(i32(), 256), ir.workgroup(i32(), 2),
       ir.workgroup(i32(), waves()), ir.workgroup(i32(), waves())});
  Value scores = fn.getArgument(0), out = fn.getArgument(2);
  auto wb = fn.getWorkgroupAttributions();
  Value hist = wb[0], sel = wb[1], totA = wb[2], totB = wb[3];
  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex tid = ir.threadId();
  IrIndex n = index(ir.load(fn.getArgument(1), t)) + 1;
  IrIndex base = t * index(fn.getArgument(3));
  IrIndex outBase = t * k;
  Value few = cmpi(arith::CmpIPredicate::ule, n, c(k));
  ifElse(
      few, {},
      [&] {
        ir.forLoop(tid, c(k), wg(), {}, [&](IrIndex i, ValueRange) {
          ir.store(select(ir.ult(i, n), toI32(i), ci32(-1)), out, outBase + i);
          return SmallVector<Value>();
        });
        return SmallVector<Value>();
      },
      [&] {
        Value prefix = ci32(0), remaining = ci32(k);
        for (int pass = 0; pass < 4; ++pass) {
          ir.forLoop(tid, c(256), wg(), {}, [&](IrIndex i, ValueRange) {
            ir.store(ci32(0), hist, i);
            return SmallVector<Value>();
          });
          barrier();
          ir.forLoop(tid, n, wg(), {}, [&](IrIndex j, ValueRange) {
            Value key = orderKey(ir.load(scores, base + j));
            Value match = arith::ConstantIntOp::create(b, 1, 1);
            if (pass > 0)
              match = cmpi(arith::CmpIPredicate::eq,
                           arith::ShRUIOp::create(b, key, ci32(32 - 8 * pass)),
                           prefix);
            ir.ifThen(match, [&] {
              Value digit =
                  andi(arith::ShRUIOp::create(b, key, ci32(24 - 8 * pass)),
                       ci32(255));
              memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi,
                                          ci32(1), hist,
                                          ValueRange{ir.toIndex(digit)});
            });
            return SmallVector<Value>();
          });
          barrier();
          ir.ifThen(cmpi(arith::CmpIPredicate::eq, tid, c(0)), [&] {
            // Bins from the top: the one where the count reaches
            // `remaining`.
            Value no = arith::ConstantIntOp::create(b, 0, 1);
            SmallVector<Value> found = ir.forLoop(
                c(0), c(256), 1, {ci32(0), ci32(0), ci32(0), no},
                [&](IrIndex i, ValueRange s) {
                  IrIndex bin = c(255) - i;
                  Value count = ir.load(hist, bin);
                  Value above = addi(s[0], count);
                  Value hit =
                      andi(cmpi(arith::CmpIPredicate::eq, s[3], no),
                           cmpi(arith::CmpIPredicate::sge, above, remaining));
                  return SmallVector<Value>{
                      above, select(hit, toI32(bin), s[1]),
                      select(hit, s[0], s[2]), ori(s[3], hit)};
                });
            ir.store(ori(arith::ShLIOp::create(b, prefix, ci32(8)), found[1]),
                     sel, c(0));
            ir.store(arith::SubIOp::create(b, remaining, found[2]), sel, c(1));
          });
          barrier();
          prefix = ir.load(sel, c(0));
          remaining = ir.load(sel, c(1));
        }
        Value threshold = prefix, takeEqual = remaining;
        ir.forLoop(
            c(0), n, wg(), {ci32(0), ci32(0)}, [&](IrIndex j0, ValueRange s) {
              IrIndex j = j0 + tid;
              Value valid = ir.ult(j, n);
              Value key = orderKey(ir.load(scores, base + ir.min(j, n - 1)));
              Value gt =
                  andi(valid, cmpi(arith::CmpIPredicate::ugt, key, threshold));
              Value eq =
                  andi(valid, cmpi(arith::CmpIPredicate::eq, key, threshold));
              auto [eqBefore, eqTotal] =
                  blockScan(arith::ExtUIOp::create(b, i32(), eq), totA);
              Value take =
                  ori(gt, andi(eq, cmpi(arith::CmpIPredicate::slt,
                                        addi(s[0], eqBefore), takeEqual)));
              auto [takeBefore, takeTotal] =
                  blockScan(arith::ExtUIOp::create(b, i32(), take), totB);
              ir.ifThen(take, [&] {
                ir.store(toI32(j), out,
                         outBase + index(addi(s[1], takeBefore)));
              });
              return SmallVector<Value>{addi(s[0], eqTotal),
                                        addi(s[1], takeTotal)};
            });
        return SmallVector<Value>();
      });
}
