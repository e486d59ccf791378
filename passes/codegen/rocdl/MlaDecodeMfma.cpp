//===- MlaDecodeMfma.cpp - MLA stage 1 on the matrix units ----------------===//
//
// mla_attention stage 1 with mf = 1 (decode plans, GpuLowerAttention.cpp):
// a workgroup takes 16 heads of one token (and, with sp key splits, one
// split of its keys), so the heads share every latent row they read. Grid
// (R, ceil(h / 16), max(1, sp)); arguments as stage 1 (AttentionKernels.cpp).
//
// Per tile of 16 keys, with f32 16x16x4 MFMAs (A = q rows = heads, B = key
// rows, C[head][key]; MfmaLayout.h):
//  * scores: D / 4 MFMAs over the key width D = l + r, shared by the four
//    waves: wave w takes the 16-dim chunks j = w, w + 4, ... Lane group
//    g = l / 16 supplies, in the 4 MFMAs of chunk j, dims 16 j + 4 g + e
//    (e = 0 .. 3) of its head (A, q held in registers for the whole loop)
//    and of its key (B, one 4-element cache load): the same permutation of
//    K on both sides, so the products are those of q . k. The waves' parts
//    meet in LDS and are added in wave order;
//  * online softmax per head as cpu::detail::attend: the tile's max and sum
//    over the 16 lanes that hold one head's row (xor shuffles);
//  * values: O[head][col] += P[head][key] V[key][col], 4 MFMAs of 4 keys per
//    16 columns; A = P moved from the C layout by lane shuffles, B = the
//    first l elements of the key rows. The four waves split the l columns
//    (l / 64 tiles of 16 each) and each computes the scores for itself.
// Without splits: o_lat = O / sum; with them, each split's [max, sum, O]
// for stage 3, as the vector kernel writes them.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/AttentionKernel.h"
#include "passes/codegen/rocdl/KernelParams.h"

using namespace mlir;
using namespace kiln::rocdl;
using namespace kiln::rocdl::attention;

void AttentionKernel::mlaAttendMfma() {
  auto p = params<MlaAttentionParams>(spec);
  const bool bf = p.bf;
  const int64_t h = p.h, l = p.l, r = p.r, k = p.k, width = l + r;
  const int64_t splits = p.sp > 1 ? int64_t(p.sp) : 0;
  SmallVector<Type> args = {ir.activations(f32(), h * width),
                            cacheType(bf, width), ir.activations(i32(), 1),
                            ir.activations(i32(), 1)};
  if (k)
    args.push_back(ir.activations(i32(), k));
  args.push_back(ir.activations(f32(), splits ? h * splits * (l + 2) : h * l));
  args.append(pagingTypes());
  // LDS: each wave's part of the tile's scores, [wave][lane][4].
  auto fn = createKernelFunc(b, module, spec, args,
                             {ir.workgroup(f32(), waves() * kWaveSize * 4)});
  Value q = fn.getArgument(0), cache = fn.getArgument(1);
  Value list = k ? fn.getArgument(4) : Value();
  Value out = fn.getArgument(k ? 5 : 4);
  Paging paged = paging(fn);
  Value parts = fn.getWorkgroupAttributions()[0];

  IrIndex t = ir.blockId(gpu::Dimension::x);
  IrIndex group = ir.blockId(gpu::Dimension::y);
  IrIndex tid = ir.threadId();
  IrIndex lane = tid % kWaveSize;
  auto [wave, g, cl] = mfmaLane();
  Value seq = ir.load(fn.getArgument(2), t);
  Value pos = ir.load(fn.getArgument(3), t);
  IrIndex n = k ? c(k) : index(pos) + 1;
  IrIndex first = c(0), last = n;
  if (splits) {
    IrIndex z = ir.blockId(gpu::Dimension::z);
    IrIndex chunk = (n + (splits - 1)) / splits;
    first = ir.min(z * chunk, n);
    last = ir.min(first + chunk, n);
  }

  const int64_t colTiles = l / (kTile * waves());
  IrIndex colBase = wave * (colTiles * kTile);
  VectorType acc4 = vec(4, f32());
  Value zero = ir.f32(0.0f);
  Value zero4 = zeros4();

  // This wave's chunks of q (head 16 group + cl; zero past h and past the
  // wave's last chunk), read once.
  const int64_t chunks = width / kTile, mine = ceilDiv(chunks, waves());
  IrIndex head = group * kTile + cl;
  Value headInside = ir.ult(head, c(h));
  SmallVector<IrIndex> dims;
  SmallVector<Value> q4s;
  for (int64_t jj = 0; jj < mine; ++jj) {
    IrIndex j = wave + jj * waves();
    Value ok = andi(headInside, ir.ult(j, c(chunks)));
    dims.push_back(ir.min(j, c(chunks - 1)) * kTile + g * 4);
    Value q4 = ir.loadVector(
        acc4, q, (t * h + ir.min(head, c(h - 1))) * width + dims.back());
    q4s.push_back(select(ok, q4, zero4));
  }
  auto shuffle = [&](Value v, Value from, gpu::ShuffleMode mode) {
    return gpu::ShuffleOp::create(b, v, from, ci32(kWaveSize), mode)
        .getShuffleResult();
  };
  // Max or sum over the 16 lanes of this lane's group (one head's row).
  auto rowReduce = [&](Value v, bool max) {
    for (int32_t off = 1; off < kTile; off *= 2) {
      Value o = shuffle(v, ci32(off), gpu::ShuffleMode::XOR);
      v = max ? arith::MaxNumFOp::create(b, v, o).getResult() : addf(v, o);
    }
    return v;
  };

  // Carried: max[4], sum[4] of heads 4 g + i, then the column tiles' C.
  SmallVector<Value> init(4, negInf());
  init.append(4, zero);
  init.append(colTiles, zero4);
  IrIndex tiles = (last - first + (kTile - 1)) / kTile;
  SmallVector<Value> state =
      ir.forLoop(c(0), tiles, 1, init, [&](IrIndex tile, ValueRange carried) {
        // This lane's key (cl) and its cache row.
        IrIndex key = first + tile * kTile + cl;
        Value valid = ir.ult(key, last);
        IrIndex kc = ir.min(key, last - 1);
        IrIndex position = kc;
        if (k) {
          Value listed = ir.load(list, t * k + kc);
          Value inCache =
              andi(cmpi(arith::CmpIPredicate::sge, listed, ci32(0)),
                   cmpi(arith::CmpIPredicate::slt, listed, paged.capacity));
          valid = andi(valid, inCache);
          position = index(select(inCache, listed, ci32(0)));
        }
        IrIndex row = cacheRow(paged, seq, position);

        // This wave's part of the scores C[head 4 g + i][key cl], then the
        // four parts added in wave order.
        Value part = zero4;
        for (int64_t jj = 0; jj < mine; ++jj) {
          part = mfmaChunk(q4s[jj],
                           loadCache4(cache, bf, row * width + dims[jj]), part);
        }
        ir.storeVector(part, parts, tid * 4);
        barrier();
        Value s4 = ir.loadVector(acc4, parts, lane * 4);
        for (int64_t w = 1; w < waves(); ++w)
          s4 = arith::AddFOp::create(
              b, s4, ir.loadVector(acc4, parts, (lane + w * kWaveSize) * 4));
        barrier();

        SmallVector<Value> next(carried.begin(), carried.end());
        SmallVector<Value> prob(4), corr(4);
        for (int64_t i = 0; i < 4; ++i) {
          Value m = carried[i], sum = carried[4 + i];
          Value s = select(
              valid, mulf(vector::ExtractOp::create(b, s4, i), ir.f32(p.scale)),
              negInf());
          Value mNew = arith::MaxNumFOp::create(b, m, rowReduce(s, true));
          Value noMax = cmpf(arith::CmpFPredicate::OEQ, mNew, negInf());
          prob[i] = select(noMax, zero, exp(arith::SubFOp::create(b, s, mNew)));
          corr[i] = select(cmpf(arith::CmpFPredicate::OEQ, m, negInf()), zero,
                           exp(arith::SubFOp::create(b, m, mNew)));
          next[i] = mNew;
          next[4 + i] = addf(mulf(sum, corr[i]), rowReduce(prob[i], false));
        }
        Value corr4 = vector::FromElementsOp::create(b, acc4, ValueRange(corr));
        for (int64_t ct = 0; ct < colTiles; ++ct)
          next[8 + ct] = arith::MulFOp::create(b, carried[8 + ct], corr4);

        // O += P V over the tile's keys, 4 at a time: lane (cl, g) supplies
        // P[head cl][key 4 ks + g], held by lane 16 (cl / 4) + 4 ks + g as
        // its element cl % 4, and V[key 4 ks + g][column].
        Value rowI32 = toI32(row);
        Value validI32 = select(valid, ci32(1), ci32(0));
        for (int64_t ks = 0; ks < 4; ++ks) {
          IrIndex keyLane = g + 4 * ks;
          Value from = toI32(cl / 4 * kTile + keyLane);
          Value a = zero;
          for (int64_t i = 0; i < 4; ++i) {
            Value pi = shuffle(prob[i], from, gpu::ShuffleMode::IDX);
            a = select(cmpi(arith::CmpIPredicate::eq, cl % 4, c(i)), pi, a);
          }
          Value keyRow = shuffle(rowI32, toI32(keyLane), gpu::ShuffleMode::IDX);
          Value keyOk =
              cmpi(arith::CmpIPredicate::ne,
                   shuffle(validI32, toI32(keyLane), gpu::ShuffleMode::IDX),
                   ci32(0));
          for (int64_t ct = 0; ct < colTiles; ++ct) {
            IrIndex col = colBase + ct * kTile + cl;
            Value v = loadCache(cache, bf, index(keyRow) * width + col);
            next[8 + ct] = mfmaF32(a, select(keyOk, v, zero), next[8 + ct]);
          }
        }
        return next;
      });

  // Heads 4 g + i of this group; columns colBase + 16 ct + cl.
  for (int64_t i = 0; i < 4; ++i) {
    IrIndex head = group * kTile + g * 4 + i;
    Value inside = ir.ult(head, c(h));
    Value m = state[i], sum = state[4 + i];
    if (splits) {
      IrIndex z = ir.blockId(gpu::Dimension::z);
      IrIndex base = ((t * h + head) * splits + z) * (l + 2);
      ir.ifThen(inside, [&] {
        ir.ifThen(andi(cmpi(arith::CmpIPredicate::eq, wave, c(0)),
                       cmpi(arith::CmpIPredicate::eq, cl, c(0))),
                  [&] {
                    ir.store(m, out, base);
                    ir.store(sum, out, base + 1);
                  });
        for (int64_t ct = 0; ct < colTiles; ++ct)
          ir.store(vector::ExtractOp::create(b, state[8 + ct], i), out,
                   base + 2 + colBase + ct * kTile + cl);
      });
      continue;
    }
    Value inv = select(cmpf(arith::CmpFPredicate::OGT, sum, zero),
                       arith::DivFOp::create(b, ir.f32(1.0f), sum), zero);
    ir.ifThen(inside, [&] {
      for (int64_t ct = 0; ct < colTiles; ++ct)
        ir.store(mulf(vector::ExtractOp::create(b, state[8 + ct], i), inv), out,
                 (t * h + head) * l + colBase + ct * kTile + cl);
    });
  }
}
