//===- MoeKernels.cpp - Fused MoE: route, align, expert GEMMs, combine ----===//
//
// A moe dispatch runs as (GpuLowerMoe.cpp; parameters in KernelParams.def):
//
//  moe_route   (f32 x[R, H], router[E, H] f32|bf16, f32 bias[E],
//               i32 ids[R, topk], f32 weights[R, topk])       grid (R)
//     One workgroup per token: each wave takes experts e = wave, wave + 4,
//     ... (lanes stride over H, then a wave sum); sigmoid; selection on
//     s + bias after the group limit; topk rounds of a workgroup argmax
//     (ties to the lower id, NaN last: RowOps.h order); weights = unbiased
//     s, normalized, times the scaling factor (Router.cpp). With el > 0
//     (expert parallelism) the ids are this rank's stack indices id - off,
//     or -1 for an expert outside [off, off + el), as cpu::moeForward.
//  moe_align   (i32 ids[R * topk], i32 R, i32 sorted[], i32 blockExpert[],
//               i32 meta[4], i32 hist[E * 256])               grid (1)
//     vLLM moe_align_block_size: pairs p = t * topk + j grouped by expert
//     (ascending), each expert's pairs in ascending p, padded with R * topk
//     to whole blocks of bm rows; blockExpert per block, meta[0] = blocks.
//     A stable counting sort: S = min(256, max(1, pairs / 32)) threads own
//     contiguous segments of the pairs and count them per expert in their
//     column of hist; the owner of expert x (threads x, x + 256, ...) turns
//     row x into each segment's first rank; the segments scatter. O(pairs +
//     E S) work, O(pairs / S + E S / 256 + S) steps per thread, no atomics,
//     the CPU's order.
//  moe_gate_up (f32 x[R, H], gate, up (MXFP4 data + scales, bf16, or FP8
//               block-128 bytes + f32 scales [E, N/128, K/128] rounded up),
//               sorted, blockExpert, meta, f32 act[R * topk, I], i32 R)
//               grid (ceil(I / (16 nt)), max blocks)
//     One wave per (block, N range): gathers the block's token rows, runs
//     the MfmaLayout GEMM recipe (GemmTiles.h; FP8 weights take the BF16
//     recipe, decoded to bf16 in registers, or with qa = 1 the FP8 MFMAs
//     over in-kernel FP8 activations, Fp8Tiles.h) against the expert's gate and
//     up with shared activations, and writes silu(gate) * up to the pair's
//     row of act. Blocks past meta[0] exit at once.
//  moe_down    (f32 act, down, sorted, blockExpert, meta, f32 y[R * topk, H],
//               i32 R)                    grid (ceil(H / (16 nt)), max blocks)
//     The same over the down weights: y row p = Expert(act row p).
//  moe_down combine=1 (f32 y[R, topk, H], f32 weights[R, topk],
//               [i32 ids[R, topk]], [f32 shared[R, H]], f32 out[R, H])
//                                                              grid (R)
//     out[t] = shared[t] + sum_j weights[t, j] * y[t, j] in slot order:
//     deterministic, no atomics. With ep = 1 the slots whose id is -1 (an
//     expert of another rank: no row of y was written) are skipped.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/Fp8Tiles.h"
#include "passes/codegen/rocdl/KernelParams.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::rocdl;

namespace {

struct MoeKernel : KernelBody {
  using KernelBody::KernelBody;

  /// RowOps.h order: a ranks before b if it is larger, NaN ranks last, ties
  /// (and two NaNs) go to the lower index (ia, ib i32).
  Value ranksBefore(Value a, Value ia, Value vb, Value ib) {
    Value nanA = cmpf(arith::CmpFPredicate::UNO, a, a);
    Value nanB = cmpf(arith::CmpFPredicate::UNO, vb, vb);
    Value lower = cmpi(arith::CmpIPredicate::slt, ia, ib);
    Value nanCase =
        select(cmpi(arith::CmpIPredicate::eq, nanA, nanB), lower, nanB);
    Value numCase = select(cmpf(arith::CmpFPredicate::ONE, a, vb),
                           cmpf(arith::CmpFPredicate::OGT, a, vb), lower);
    return select(arith::OrIOp::create(b, nanA, nanB), nanCase, numCase);
  }
  /// The better of two (value, i32 index) candidates.
  SmallVector<Value> better(ArrayRef<Value> l, ArrayRef<Value> r) {
    Value takeR = ranksBefore(r[0], r[1], l[0], l[1]);
    return {select(takeR, r[0], l[0]), select(takeR, r[1], l[1])};
  }

  Value sigmoid(Value v) {
    Value t = arith::MulFOp::create(b, v, ir.f32(-kLog2e));
    Value e = ir.intrinsic("llvm.amdgcn.exp2", f32(), {t});
    return ir.intrinsic("llvm.amdgcn.rcp", f32(),
                        {arith::AddFOp::create(b, e, ir.f32(1.0f))});
  }

  //===--------------------------------------------------------------------===//
  // moe_route
  //===--------------------------------------------------------------------===//

  void route() {
    auto p = params<MoeRouteParams>(spec);
    int64_t e = p.e, h = p.h, topk = p.topk, groups = p.ngroup,
            topkGroup = p.topkgroup;
    bool norm = p.norm != 0, rbf = p.rbf != 0;
    float scale = p.scale;
    Type wElem = rbf ? Type(b.getBF16Type()) : f32();
    int64_t waves = kRowBlock / kWaveSize;
    auto fn = createKernelFunc(
        b, module, spec,
        {ir.activations(f32(), h), ir.global(wElem, e * h), ir.global(f32(), e),
         ir.activations(i32(), topk), ir.activations(f32(), topk)},
        {ir.workgroup(f32(), e), ir.workgroup(f32(), e), ir.workgroup(i32(), e),
         ir.workgroup(f32(), groups), ir.workgroup(f32(), waves),
         ir.workgroup(i32(), waves), ir.workgroup(f32(), topk)});
    Value x = fn.getArgument(0), w = fn.getArgument(1),
          bias = fn.getArgument(2), ids = fn.getArgument(3),
          weights = fn.getArgument(4);
    auto wgb = fn.getWorkgroupAttributions();
    Value scores = wgb[0], sel = wgb[1], taken = wgb[2], groupScore = wgb[3],
          redV = wgb[4], redI = wgb[5], chosen = wgb[6];
    IrIndex t = ir.blockId(gpu::Dimension::x);
    IrIndex tid = ir.threadId();
    IrIndex wave = tid / kWaveSize, lane = tid % kWaveSize;
    Value first = cmpi(arith::CmpIPredicate::eq, tid, ir.idx(0));

    // Logits, sigmoid, the selection scores.
    int64_t width = h % 4 == 0 ? 4 : 1;
    VectorType fv = vec(width, f32());
    Value zero = arith::ConstantOp::create(b, DenseElementsAttr::get(fv, 0.0f));
    ir.forLoop(wave, ir.idx(e), waves, {}, [&](IrIndex ex, ValueRange) {
      Value acc = ir.forLoop(
          lane, ir.idx(h / width), kWaveSize, {zero},
          [&](IrIndex i, ValueRange in) {
            Value xv = ir.loadVector(fv, x, t * h + i * width);
            Value wv = ir.loadVector(vec(width, wElem), w, ex * h + i * width);
            if (rbf)
              wv = arith::ExtFOp::create(b, fv, wv);
            return SmallVector<Value>{math::FmaOp::create(b, xv, wv, in[0])};
          })[0];
      Value partial =
          vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc);
      Value logit =
          ir.waveReduce({partial}, [&](ArrayRef<Value> l, ArrayRef<Value> r) {
            return SmallVector<Value>{arith::AddFOp::create(b, l[0], r[0])};
          })[0];
      ir.ifThen(cmpi(arith::CmpIPredicate::eq, lane, ir.idx(0)), [&] {
        Value s = sigmoid(logit);
        ir.store(s, scores, ex);
        ir.store(arith::AddFOp::create(b, s, ir.load(bias, ex)), sel, ex);
      });
      return SmallVector<Value>();
    });
    barrier();

    if (groups > 1)
      groupLimit(sel, groupScore, tid, e, groups, topkGroup);

    ir.forLoop(tid, ir.idx(e), kRowBlock, {}, [&](IrIndex i, ValueRange) {
      ir.store(ir.i32(0), taken, i);
      return SmallVector<Value>();
    });
    barrier();

    // topk rounds of a workgroup argmax over the experts not yet taken.
    Value nan = ir.f32(std::nanf(""));
    Value none = ir.i32(INT32_MAX);
    auto combine = [&](ArrayRef<Value> l, ArrayRef<Value> r) {
      return better(l, r);
    };
    ir.forLoop(ir.idx(0), ir.idx(topk), 1, {}, [&](IrIndex j, ValueRange) {
      SmallVector<Value> best =
          ir.forLoop(tid, ir.idx(e), kRowBlock, {nan, none},
                     [&](IrIndex i, ValueRange acc) {
                       Value isTaken = cmpi(arith::CmpIPredicate::ne,
                                            ir.load(taken, i), ir.i32(0));
                       Value v = select(isTaken, nan, ir.load(sel, i));
                       Value vi = select(isTaken, none, toI32(i));
                       return better({acc[0], acc[1]}, {v, vi});
                     });
      SmallVector<Value> total = ir.blockReduce(best, combine, {redV, redI});
      ir.ifThen(first, [&] {
        IrIndex pick = ir.idx(ir.toIndex(total[1]));
        ir.store(ir.i32(1), taken, pick);
        Value id = total[1];
        if (p.el > 0) {
          // This rank's stack index, or -1 (cpu::moeForward).
          Value local = arith::SubIOp::create(b, id, ir.i32(p.off));
          Value mine = arith::AndIOp::create(
              b, cmpi(arith::CmpIPredicate::sge, local, ir.i32(0)),
              cmpi(arith::CmpIPredicate::slt, local, ir.i32(p.el)));
          id = select(mine, local, ir.i32(-1));
        }
        ir.store(id, ids, t * topk + j);
        ir.store(ir.load(scores, pick), chosen, j);
      });
      barrier();
      return SmallVector<Value>();
    });

    // Unbiased scores of the chosen experts, normalized, scaled.
    ir.ifThen(first, [&] {
      Value denom = ir.f32(1.0f);
      if (norm) {
        Value sum =
            ir.forLoop(ir.idx(0), ir.idx(topk), 1, {ir.f32(0.0f)},
                       [&](IrIndex j, ValueRange in) {
                         return SmallVector<Value>{arith::AddFOp::create(
                             b, in[0], ir.load(chosen, j))};
                       })[0];
        denom = arith::AddFOp::create(b, sum, ir.f32(1e-20f));
      }
      ir.forLoop(ir.idx(0), ir.idx(topk), 1, {}, [&](IrIndex j, ValueRange) {
        Value v = ir.load(chosen, j);
        if (norm)
          v = arith::DivFOp::create(b, v, denom);
        v = arith::MulFOp::create(b, v, ir.f32(scale));
        ir.store(v, weights, t * topk + j);
        return SmallVector<Value>();
      });
    });
    gpu::ReturnOp::create(b);
  }

  /// Keeps the topkGroup groups with the best top-two sums of `sel` (RowOps
  /// groupLimit) and sets the others to -inf. One thread per group.
  void groupLimit(Value sel, Value groupScore, IrIndex tid, int64_t e,
                  int64_t groups, int64_t topkGroup) {
    int64_t size = e / groups;
    ir.forLoop(tid, ir.idx(groups), kRowBlock, {}, [&](IrIndex g, ValueRange) {
      IrIndex base = g * size;
      Value score;
      if (size == 1) {
        score = ir.load(sel, base);
      } else {
        Value v0 = ir.load(sel, base), v1 = ir.load(sel, base + 1);
        Value swap = ranksBefore(v1, ir.i32(1), v0, ir.i32(0));
        SmallVector<Value> init = {
            select(swap, v1, v0), select(swap, ir.i32(1), ir.i32(0)),
            select(swap, v0, v1), select(swap, ir.i32(0), ir.i32(1))};
        SmallVector<Value> top = ir.forLoop(
            ir.idx(2), ir.idx(size), 1, init, [&](IrIndex i, ValueRange in) {
              Value v = ir.load(sel, base + i);
              Value vi = toI32(i);
              Value overFirst = ranksBefore(v, vi, in[0], in[1]);
              Value overSecond = ranksBefore(v, vi, in[2], in[3]);
              Value secondV =
                  select(overFirst, in[0], select(overSecond, v, in[2]));
              Value secondI =
                  select(overFirst, in[1], select(overSecond, vi, in[3]));
              return SmallVector<Value>{select(overFirst, v, in[0]),
                                        select(overFirst, vi, in[1]), secondV,
                                        secondI};
            });
        score = arith::AddFOp::create(b, top[0], top[2]);
      }
      ir.store(score, groupScore, g);
      return SmallVector<Value>();
    });
    barrier();
    Value ninf = ir.f32(-std::numeric_limits<float>::infinity());
    ir.forLoop(tid, ir.idx(groups), kRowBlock, {}, [&](IrIndex g, ValueRange) {
      Value mine = ir.load(groupScore, g);
      Value gi = toI32(g);
      Value ahead = ir.forLoop(
          ir.idx(0), ir.idx(groups), 1, {ir.i32(0)},
          [&](IrIndex hh, ValueRange in) {
            Value before =
                ranksBefore(ir.load(groupScore, hh), toI32(hh), mine, gi);
            Value one = arith::ExtUIOp::create(b, i32(), before);
            return SmallVector<Value>{arith::AddIOp::create(b, in[0], one)};
          })[0];
      Value drop = cmpi(arith::CmpIPredicate::sge, ahead, ir.i32(topkGroup));
      ir.ifThen(drop, [&] {
        ir.forLoop(g * size, g * size + size, 1, {},
                   [&](IrIndex i, ValueRange) {
                     ir.store(ninf, sel, i);
                     return SmallVector<Value>();
                   });
      });
      return SmallVector<Value>();
    });
    barrier();
  }

  //===--------------------------------------------------------------------===//
  // moe_align
  //===--------------------------------------------------------------------===//

  /// Pairs per counting segment before a second segment pays for its
  /// histogram column (zeroed and summed by every expert's owner).
  static constexpr int64_t kPairsPerSegment = 32;

  void align() {
    auto p = params<MoeAlignParams>(spec);
    int64_t e = p.e, topk = p.topk, bm = p.bm;
    auto fn =
        createKernelFunc(b, module, spec,
                         {ir.activations(i32(), topk), i32(),
                          ir.activations(i32(), 1), ir.activations(i32(), 1),
                          ir.global(i32(), 4), ir.global(i32(), e * kRowBlock)},
                         {ir.workgroup(i32(), e), ir.workgroup(i32(), e + 1)});
    Value ids = fn.getArgument(0), sorted = fn.getArgument(2),
          blockExpert = fn.getArgument(3), meta = fn.getArgument(4),
          hist = fn.getArgument(5);
    auto wgb = fn.getWorkgroupAttributions();
    Value count = wgb[0], start = wgb[1];
    IrIndex rows = ir.idx(ir.toIndex(fn.getArgument(1)));
    IrIndex pairs = rows * topk;
    Value pairsI32 = toI32(pairs);
    IrIndex tid = ir.threadId();
    auto udiv = [&](IrIndex a, IrIndex c) {
      return ir.idx(arith::DivUIOp::create(b, a, c));
    };
    auto umax = [&](IrIndex a, IrIndex c) {
      return ir.idx(arith::MaxUIOp::create(b, a, c));
    };

    // Segments: `used` threads each own a contiguous run of pairs, in
    // order; hist[x * kRowBlock + s] counts segment s's pairs of expert x
    // (ids outside [0, e): experts of other ranks, skipped).
    IrIndex used =
        ir.min(umax(pairs / kPairsPerSegment, ir.idx(1)), ir.idx(kRowBlock));
    IrIndex segLen = udiv(pairs + used - 1, used);
    IrIndex segBegin = ir.min(tid * segLen, pairs);
    IrIndex segEnd = ir.min(segBegin + segLen, pairs);
    Value mine = ir.ult(tid, used);
    auto forSegment = [&](const std::function<void(IrIndex, Value)> &body) {
      ir.ifThen(mine, [&] {
        ir.forLoop(segBegin, segEnd, 1, {}, [&](IrIndex q, ValueRange) {
          Value id = ir.load(ids, q);
          Value inRange = ir.ult(ir.idx(ir.toIndex(id)), ir.idx(e));
          ir.ifThen(inRange, [&] { body(q, id); });
          return SmallVector<Value>();
        });
      });
    };
    auto histAt = [&](Value id, IrIndex segment) {
      return ir.idx(ir.toIndex(id)) * kRowBlock + segment;
    };
    auto forOwned = [&](const std::function<void(IrIndex)> &body) {
      ir.forLoop(tid, ir.idx(e), kRowBlock, {}, [&](IrIndex x, ValueRange) {
        body(x);
        return SmallVector<Value>();
      });
    };

    // 1. Zero the columns in use, every thread a share; 2. count.
    ir.forLoop(
        tid, ir.idx(e) * used, kRowBlock, {}, [&](IrIndex i, ValueRange) {
          ir.store(ir.i32(0), hist,
                   udiv(i, used) * kRowBlock + (i - udiv(i, used) * used));
          return SmallVector<Value>();
        });
    barrier();
    forSegment([&](IrIndex, Value id) {
      IrIndex at = histAt(id, tid);
      ir.store(arith::AddIOp::create(b, ir.load(hist, at), ir.i32(1)), hist,
               at);
    });
    barrier();
    // 3. Each expert's owner turns its row of counts into each segment's
    // first rank within the expert, and its total.
    forOwned([&](IrIndex x) {
      Value total = ir.forLoop(
          ir.idx(0), used, 1, {ir.i32(0)}, [&](IrIndex sgm, ValueRange in) {
            IrIndex at = x * kRowBlock + sgm;
            Value c = ir.load(hist, at);
            ir.store(in[0], hist, at);
            return SmallVector<Value>{arith::AddIOp::create(b, in[0], c)};
          })[0];
      ir.store(total, count, x);
    });
    barrier();
    // Block starts: one thread, E steps.
    Value first = cmpi(arith::CmpIPredicate::eq, tid, ir.idx(0));
    ir.ifThen(first, [&] {
      ir.store(ir.i32(0), start, ir.idx(0));
      Value end = ir.forLoop(
          ir.idx(0), ir.idx(e), 1, {ir.i32(0)}, [&](IrIndex x, ValueRange in) {
            Value c = ir.load(count, x);
            Value padded = arith::MulIOp::create(
                b,
                arith::DivUIOp::create(
                    b, arith::AddIOp::create(b, c, ir.i32(bm - 1)), ir.i32(bm)),
                ir.i32(bm));
            Value next = arith::AddIOp::create(b, in[0], padded);
            ir.store(next, start, x + 1);
            return SmallVector<Value>{next};
          })[0];
      ir.store(arith::DivUIOp::create(b, end, ir.i32(bm)), meta, ir.idx(0));
    });
    barrier();
    // 4. Scatter: a segment's pairs of expert x go, in order, after those
    // of the segments before it. No atomics; the order is the CPU's.
    forSegment([&](IrIndex q, Value id) {
      IrIndex at = histAt(id, tid);
      Value rank = ir.load(hist, at);
      IrIndex dst = ir.idx(ir.toIndex(ir.load(start, ir.idx(ir.toIndex(id))))) +
                    ir.idx(ir.toIndex(rank));
      ir.store(toI32(q), sorted, dst);
      ir.store(arith::AddIOp::create(b, rank, ir.i32(1)), hist, at);
    });
    // Padding and the expert of each block.
    forOwned([&](IrIndex x) {
      IrIndex begin = ir.idx(ir.toIndex(ir.load(start, x)));
      IrIndex end = ir.idx(ir.toIndex(ir.load(start, x + 1)));
      IrIndex filled = begin + ir.idx(ir.toIndex(ir.load(count, x)));
      ir.forLoop(filled, end, 1, {}, [&](IrIndex i, ValueRange) {
        ir.store(pairsI32, sorted, i);
        return SmallVector<Value>();
      });
      Value xi = toI32(x);
      ir.forLoop(begin / bm, end / bm, 1, {}, [&](IrIndex blk, ValueRange) {
        ir.store(xi, blockExpert, blk);
        return SmallVector<Value>();
      });
    });
    gpu::ReturnOp::create(b);
  }

  //===--------------------------------------------------------------------===//
  // moe_gate_up / moe_down
  //===--------------------------------------------------------------------===//

  /// The expert GEMM's parameters: moe_down's GEMM declares the same as
  /// moe_gate_up.
  MoeGateUpParams gemmParams() const {
    if (spec.kind == KernelKind::MoeGateUp)
      return params<MoeGateUpParams>(spec);
    auto d = params<MoeDownParams>(spec);
    MoeGateUpParams g;
    g.e = d.e;
    g.n = d.n;
    g.k = d.k;
    g.topk = d.topk;
    g.mt = d.mt;
    g.nt = d.nt;
    g.fmt = d.fmt;
    g.qa = d.qa.get();
    return g;
  }

  /// The GEMM shape and tiling GemmTiles reads.
  KernelSpec tileSpec() const {
    MoeGateUpParams p = gemmParams();
    KernelSpec g;
    g.kind = p.fmt == 0 ? KernelKind::MxGemm : KernelKind::Bf16Gemm;
    g.chip = spec.chip;
    g.n = p.n;
    g.k = p.k;
    g.tiling.mTiles = p.mt;
    g.tiling.nTiles = p.nt;
    return g;
  }

  void expertGemm(bool gateUp) {
    MoeGateUpParams p = gemmParams();
    KernelSpec g = tileSpec();
    int64_t e = p.e, n = g.n, k = g.k, topk = p.topk;
    int64_t mTiles = g.tiling.mTiles, nTiles = g.tiling.nTiles;
    int64_t bm = kTile * mTiles;
    bool mx = g.kind == KernelKind::MxGemm;
    bool fp8 = p.fmt == 2;
    int64_t fp8ScaleCount =
        ceilDiv(n, Bf16Tiles::kFp8Block) * ceilDiv(k, Bf16Tiles::kFp8Block);
    MxWeightLayout layout = MxWeightLayout::forShape(n, k);
    int64_t weightCount = gateUp ? 2 : 1;

    SmallVector<Type> args = {ir.activations(f32(), k)};
    for (int64_t i = 0; i < weightCount; ++i) {
      if (mx) {
        args.push_back(ir.global(vec(4, i32()), e * (layout.dataBytes() / 16)));
        args.push_back(ir.global(i32(), e * (layout.scaleBytes() / 4)));
      } else if (fp8) {
        args.push_back(ir.global(vec(8, b.getI8Type()), e * n * k / 8));
        args.push_back(ir.global(f32(), e * fp8ScaleCount));
      } else {
        args.push_back(ir.global(vec(8, b.getBF16Type()), e * n * k / 8));
      }
    }
    args.append({ir.activations(i32(), 1), ir.activations(i32(), 1),
                 ir.global(i32(), 4), ir.activations(f32(), n), i32()});
    auto fn = createKernelFunc(b, module, spec, args);
    unsigned next = 1;
    Value x = fn.getArgument(0);
    SmallVector<MxOperand> mxWeights;
    SmallVector<Value> bfWeights, fp8Scales;
    for (int64_t i = 0; i < weightCount; ++i) {
      if (mx) {
        mxWeights.push_back({fn.getArgument(next), fn.getArgument(next + 1)});
        next += 2;
      } else if (fp8) {
        bfWeights.push_back(fn.getArgument(next));
        fp8Scales.push_back(fn.getArgument(next + 1));
        next += 2;
      } else {
        bfWeights.push_back(fn.getArgument(next++));
      }
    }
    Value sorted = fn.getArgument(next), blockExpert = fn.getArgument(next + 1),
          meta = fn.getArgument(next + 2), y = fn.getArgument(next + 3);
    IrIndex rows = ir.idx(ir.toIndex(fn.getArgument(next + 4)));

    IrIndex bx = ir.blockId(gpu::Dimension::x);
    IrIndex blk = ir.blockId(gpu::Dimension::y);
    IrIndex used = ir.idx(ir.toIndex(ir.load(meta, ir.idx(0))));
    ir.ifThen(ir.ult(blk, used), [&] {
      IrIndex pairs = rows * topk;
      IrIndex expert = ir.idx(ir.toIndex(ir.load(blockExpert, blk)));
      IrIndex lane = ir.threadId();
      IrIndex firstRow = blk * bm;
      // The operand rows: gate_up gathers tokens, down the pairs' act rows.
      // Padding entries read the last pair (results never stored).
      SmallVector<IrIndex> rowIdx;
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        IrIndex pair =
            ir.min(ir.idx(ir.toIndex(ir.load(sorted, firstRow + mt * kTile +
                                                         operandRow(lane)))),
                   pairs - 1);
        rowIdx.push_back(gateUp ? pair / topk : pair);
      }
      Value zero = GemmTiles(b, g).zeroAcc();
      SmallVector<Value> acc(weightCount * mTiles * nTiles, zero);
      if (mx) {
        MxTiles tiles(b, g);
        SmallVector<IrIndex> nTileIdx;
        for (int64_t nt = 0; nt < nTiles; ++nt)
          nTileIdx.push_back(
              expert * layout.nTiles +
              ir.min(g.tiling.tileCol(bx, nt), ir.idx(layout.nTiles - 1)));
        acc = tiles.kLoop(x, mxWeights, lane, rowIdx, nTileIdx, acc);
      } else {
        // BF16 rows count from the stack's first row; FP8 rows are the
        // expert matrix's (its scales are per matrix).
        SmallVector<IrIndex> wRows;
        for (int64_t nt = 0; nt < nTiles; ++nt) {
          IrIndex row =
              ir.min(g.tiling.tileCol(bx, nt) * kTile + operandRow(lane),
                     ir.idx(n - 1));
          wRows.push_back(fp8 ? row : expert * n + row);
        }
        if (fp8 && p.qa == 1) {
          acc = Fp8Tiles(b, g, fp8Scales, expert)
                    .kLoop(x, bfWeights, lane, rowIdx, wRows, acc);
        } else {
          Bf16Tiles tiles(b, g);
          if (fp8)
            tiles.fp8 = Bf16Tiles::Fp8{fp8Scales, expert};
          acc = tiles.kLoop(x, bfWeights, lane, rowIdx, wRows, acc);
        }
      }
      // Results: lane holds rows resultRow(lane, i) of each tile.
      int64_t perWeight = mTiles * nTiles;
      for (int64_t mt = 0; mt < mTiles; ++mt)
        for (int64_t nt = 0; nt < nTiles; ++nt) {
          IrIndex col = g.tiling.tileCol(bx, nt) * kTile + resultCol(lane);
          Value colOk = ir.ult(col, ir.idx(n));
          for (int64_t i = 0; i < 4; ++i) {
            IrIndex pair = ir.idx(ir.toIndex(
                ir.load(sorted, firstRow + mt * kTile + resultRow(lane, i))));
            Value ok = arith::AndIOp::create(b, colOk, ir.ult(pair, pairs));
            ir.ifThen(ok, [&] {
              Value v = vector::ExtractOp::create(b, acc[mt * nTiles + nt], i);
              if (gateUp) {
                Value up = vector::ExtractOp::create(
                    b, acc[perWeight + mt * nTiles + nt], i);
                v = arith::MulFOp::create(
                    b, arith::MulFOp::create(b, v, sigmoid(v)), up);
              }
              ir.store(v, y, pair * n + col);
            });
          }
        }
    });
    gpu::ReturnOp::create(b);
  }

  //===--------------------------------------------------------------------===//
  // moe_down combine=1
  //===--------------------------------------------------------------------===//

  void combine() {
    auto p = params<MoeDownParams>(spec);
    int64_t h = p.h, topk = p.topk;
    bool shared = p.shared != 0, ep = p.ep != 0;
    SmallVector<Type> args = {ir.activations(f32(), topk * h),
                              ir.activations(f32(), topk)};
    if (ep)
      args.push_back(ir.activations(i32(), topk));
    if (shared)
      args.push_back(ir.activations(f32(), h));
    args.push_back(ir.activations(f32(), h));
    auto fn = createKernelFunc(b, module, spec, args);
    Value y = fn.getArgument(0), weights = fn.getArgument(1);
    unsigned next = 2;
    Value ids = ep ? fn.getArgument(next++) : Value();
    Value sh = shared ? fn.getArgument(next++) : Value();
    Value out = fn.getArgument(next);
    int64_t width = h % 4 == 0 ? 4 : 1;
    VectorType fv = vec(width, f32());
    IrIndex t = ir.blockId(gpu::Dimension::x);
    SmallVector<Value> w, mine;
    for (int64_t j = 0; j < topk; ++j) {
      w.push_back(
          vector::BroadcastOp::create(b, fv, ir.load(weights, t * topk + j)));
      if (ep)
        mine.push_back(cmpi(arith::CmpIPredicate::sge,
                            ir.load(ids, t * topk + j), ir.i32(0)));
    }
    ir.forLoop(ir.threadId(), ir.idx(h / width), kRowBlock, {},
               [&](IrIndex i, ValueRange) {
                 IrIndex c = i * width;
                 Value acc = shared ? ir.loadVector(fv, sh, t * h + c)
                                    : arith::ConstantOp::create(
                                          b, DenseElementsAttr::get(fv, 0.0f))
                                          .getResult();
                 for (int64_t j = 0; j < topk; ++j) {
                   Value v = ir.loadVector(fv, y, (t * topk + j) * h + c);
                   Value sum = math::FmaOp::create(b, v, w[j], acc);
                   acc = ep ? select(mine[j], sum, acc) : sum;
                 }
                 ir.storeVector(acc, out, t * h + c);
                 return SmallVector<Value>();
               });
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildMoeKernel(gpu::GPUModuleOp module,
                                 const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  MoeKernel k(b, spec, module);
  switch (spec.kind) {
  case KernelKind::MoeRoute:
    k.route();
    break;
  case KernelKind::MoeAlign:
    k.align();
    break;
  case KernelKind::MoeGateUp:
    k.expertGemm(/*gateUp=*/true);
    break;
  case KernelKind::MoeDown:
    if (params<MoeDownParams>(spec).combine == 1)
      k.combine();
    else
      k.expertGemm(/*gateUp=*/false);
    break;
  default:
    llvm_unreachable("not a moe kernel");
  }
}
