//===- DataKernels.cpp - Data movement and row kernels -------------------===//
//
// Two shapes of kernel (params: KernelParams.def):
//
//  * Row kernels, one workgroup of kRowBlock threads per row (grid x =
//    rows): embedding, layer_norm, softmax, normalize, group_limit, top_k,
//    take_rows. Thread t handles elements t*w, (t + kRowBlock)*w, ... with
//    w = 4 (8 for 16-bit tables) where the row width allows, so loads are
//    coalesced 16-byte accesses; reductions go through KernelIr::blockReduce.
//    Args: embedding (i32 ids[T], table[v*h] f32|bf16|f16, f32 out[T, h]);
//    layer_norm (x, f32 w[c], f32 b[c], y); softmax, normalize (x, y);
//    group_limit (x, y); top_k (x, f32 values[rows, k], i32 idx[rows, k]);
//    take_rows (x[.., c], i32 rows[R'], out[R', c], i32 rows of x), grid x =
//    R' (the index buffer's rows).
//  * Flat kernels over rows * row elements, one vector of w per thread (grid
//    x = ceil(rows * elems / (wg * w)), the row count an i32 argument):
//    unary (x, y, rows); binary (full, other, out, rows) where `other` is a
//    vector of bc values repeated along the row when bc > 0; gather (x, i32
//    idx, out, rows); copy_blocks (src, dst, rows).
//
// fp8_gemm (x f32 [M, k], q u8 [n, k], scales f32 [ceil(n/128),
// ceil(k/128)], y f32 [M, n], i32 M) is the dense BF16 GEMM of GemmTiles.h
// with FP8 block-scaled weights dequantized in registers (Fp8Gemm below),
// or with qa = 1 the FP8 MFMAs over in-kernel FP8 activations (Fp8Tiles.h).
//
// Matching the CPU (runtime/cpu): ties and NaNs order as RowOps.h says (NaN
// below every number, ties to the lower index); the divisions the CPU does
// are divisions here too (correctly rounded), exp is llvm.exp.f32 (the
// backend's accurate expansion around v_exp_f32), 1/sqrt is v_rsq_f32.
// Indices from memory are never trusted: an out-of-range embedding id or
// gather index is clamped to 0 for the (discarded) load and yields zeros, an
// out-of-range take_rows row skips the loads and writes zeros (the CPU
// reports an error, or for gather reads out of bounds).
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/Fp8Tiles.h"
#include "passes/codegen/rocdl/KernelParams.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::rocdl;

namespace {

using FPred = arith::CmpFPredicate;
using IPred = arith::CmpIPredicate;

struct DataKernel : KernelBody {
  using KernelBody::KernelBody;

  static int64_t widthFor(int64_t elems) { return elems % 4 == 0 ? 4 : 1; }

  // Scalars and vectors alike: a width of 1 means a scalar.
  Type typeOf(int64_t w, Type elem) {
    return w == 1 ? elem : VectorType::get({w}, elem);
  }
  Value constant(int64_t w, Type elem, Attribute scalar) {
    if (w == 1)
      return arith::ConstantOp::create(b, cast<TypedAttr>(scalar));
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(cast<ShapedType>(typeOf(w, elem)), scalar));
  }
  Value fconst(int64_t w, float v) {
    return constant(w, f32(), b.getF32FloatAttr(v));
  }
  Value loadN(Value mem, IrIndex i, int64_t w, Type elem) {
    if (w == 1)
      return ir.load(mem, i);
    return ir.loadVector(cast<VectorType>(typeOf(w, elem)), mem, i);
  }
  void storeN(Value v, Value mem, IrIndex i) {
    if (isa<VectorType>(v.getType()))
      ir.storeVector(v, mem, i);
    else
      ir.store(v, mem, i);
  }
  SmallVector<Value> scalars(Value v) {
    auto type = dyn_cast<VectorType>(v.getType());
    if (!type)
      return {v};
    SmallVector<Value> out;
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      out.push_back(vector::ExtractOp::create(b, v, i));
    return out;
  }
  /// `fn` on every element of a scalar or vector (the AMDGPU intrinsics
  /// select on scalars only).
  Value map(Value v, const std::function<Value(Value)> &fn) {
    auto type = dyn_cast<VectorType>(v.getType());
    if (!type)
      return fn(v);
    SmallVector<Value> out;
    for (Value s : scalars(v))
      out.push_back(fn(s));
    return vector::FromElementsOp::create(b, type, out);
  }
  Value horizontal(vector::CombiningKind kind, Value v) {
    if (!isa<VectorType>(v.getType()))
      return v;
    return vector::ReductionOp::create(b, kind, v);
  }

  Value both(Value a, Value c) { return arith::AndIOp::create(b, a, c); }
  Value either(Value a, Value c) { return arith::OrIOp::create(b, a, c); }
  Value negate(Value a) {
    return arith::XOrIOp::create(b, a, arith::ConstantIntOp::create(b, 1, 1));
  }
  Value isNan(Value v) { return cmpf(FPred::UNO, v, v); }
  Value exp(Value v) { return ir.intrinsic("llvm.exp.f32", f32(), {v}); }
  /// 0 <= v < limit for an i32 `v` read from memory.
  Value inRange(Value v, Value limit) {
    return both(cmpi(IPred::sge, v, ir.i32(0)), cmpi(IPred::slt, v, limit));
  }

  /// RowOps.h's strict order: (a, ia) ranks before (c, ic).
  Value ranksBefore(Value a, Value ia, Value c, Value ic) {
    Value nanA = isNan(a), nanC = isNan(c);
    Value lower = cmpi(IPred::slt, ia, ic);
    Value nanCase = select(nanA, both(nanC, lower), nanC);
    Value numCase =
        either(cmpf(FPred::OGT, a, c), both(cmpf(FPred::OEQ, a, c), lower));
    return select(either(nanA, nanC), nanCase, numCase);
  }
  /// The better of two (value, index) pairs.
  SmallVector<Value> better(ArrayRef<Value> l, ArrayRef<Value> r) {
    Value takeR = ranksBefore(r[0], r[1], l[0], l[1]);
    return {select(takeR, r[0], l[0]), select(takeR, r[1], l[1])};
  }

  /// for (i = tid; i < cols / w; i += wg) body(i * w, acc).
  SmallVector<Value>
  rowLoop(int64_t cols, int64_t w, ValueRange init,
          const std::function<SmallVector<Value>(IrIndex, ValueRange)> &body) {
    return ir.forLoop(
        ir.threadId(), ir.idx(cols / w), wg(), init,
        [&](IrIndex i, ValueRange acc) { return body(i * w, acc); });
  }
  /// A workgroup reduction followed by a barrier, so the LDS scratch can be
  /// reused by the next one.
  SmallVector<Value> reduce(ArrayRef<Value> values,
                            const KernelIr::Combine &combine,
                            ArrayRef<Value> scratch) {
    SmallVector<Value> r = ir.blockReduce(values, combine, scratch);
    barrier();
    return r;
  }
  Value sum(Value partial, Value scratch) {
    return reduce({partial},
                  [&](ArrayRef<Value> l, ArrayRef<Value> r) {
                    return SmallVector<Value>{
                        arith::AddFOp::create(b, l[0], r[0])};
                  },
                  {scratch})[0];
  }
  /// Flat kernels: this thread's first element.
  IrIndex flatStart(int64_t w) {
    return (ir.blockId(gpu::Dimension::x) * wg() + ir.threadId()) * w;
  }
  IrIndex rowBase(int64_t rowElems) {
    return ir.blockId(gpu::Dimension::x) * rowElems;
  }
  void ifElse(Value cond, const std::function<void()> &then,
              const std::function<void()> &otherwise) {
    auto op = scf::IfOp::create(b, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&op.getThenRegion().front());
    then();
    b.setInsertionPointToStart(&op.getElseRegion().front());
    otherwise();
  }

  gpu::GPUFuncOp func(TypeRange args, TypeRange workgroup = {}) {
    return createKernelFunc(b, module, spec, args, workgroup);
  }
  MemRefType rows(Type elem, int64_t rowElems) {
    return ir.activations(elem, rowElems);
  }
  void embedding() {
    auto p = params<EmbeddingParams>(spec);
    int64_t h = p.h, v = p.v;
    Type dt = p.dt == 0   ? f32()
              : p.dt == 1 ? Type(b.getBF16Type())
                          : Type(b.getF16Type());
    int64_t w = dt != f32() && h % 8 == 0 ? 8 : widthFor(h);
    auto fn = func({rows(i32(), 1), ir.global(dt, v * h), rows(f32(), h)});
    Value ids = fn.getArgument(0), table = fn.getArgument(1),
          out = fn.getArgument(2);
    IrIndex token = ir.blockId(gpu::Dimension::x);
    Value id = ir.load(ids, token);
    Value valid = inRange(id, ir.i32(v));
    IrIndex src = ir.idx(ir.toIndex(select(valid, id, ir.i32(0)))) * h;
    IrIndex dst = token * h;
    Value zero = fconst(w, 0.0f);
    rowLoop(h, w, {}, [&](IrIndex c, ValueRange) {
      Value x = loadN(table, src + c, w, dt);
      if (dt != f32())
        x = arith::ExtFOp::create(b, typeOf(w, f32()), x);
      storeN(select(valid, x, zero), out, dst + c);
      return SmallVector<Value>();
    });
  }

  void layerNorm() {
    auto p = params<LayerNormParams>(spec);
    int64_t c = p.c, w = widthFor(c);
    auto fn = func({rows(f32(), c), ir.global(f32(), c), ir.global(f32(), c),
                    rows(f32(), c)},
                   {ir.workgroup(f32(), kRowBlock / kWaveSize)});
    Value x = fn.getArgument(0), gamma = fn.getArgument(1),
          beta = fn.getArgument(2), y = fn.getArgument(3);
    Value scratch = fn.getWorkgroupAttributions()[0];
    IrIndex base = rowBase(c);
    Value total =
        rowLoop(c, w, {fconst(w, 0.0f)}, [&](IrIndex i, ValueRange acc) {
          Value v = loadN(x, base + i, w, f32());
          return SmallVector<Value>{arith::AddFOp::create(b, acc[0], v)};
        })[0];
    Value mean = arith::DivFOp::create(
        b, sum(horizontal(vector::CombiningKind::ADD, total), scratch),
        ir.f32(float(c)));
    Value meanN = w == 1
                      ? mean
                      : vector::BroadcastOp::create(b, typeOf(w, f32()), mean)
                            .getResult();
    Value squares =
        rowLoop(c, w, {fconst(w, 0.0f)}, [&](IrIndex i, ValueRange acc) {
          Value d =
              arith::SubFOp::create(b, loadN(x, base + i, w, f32()), meanN);
          return SmallVector<Value>{math::FmaOp::create(b, d, d, acc[0])};
        })[0];
    Value var = arith::DivFOp::create(
        b, sum(horizontal(vector::CombiningKind::ADD, squares), scratch),
        ir.f32(float(c)));
    Value inv = ir.intrinsic("llvm.amdgcn.rsq.f32", f32(),
                             {arith::AddFOp::create(b, var, ir.f32(p.eps))});
    Value invN =
        w == 1
            ? inv
            : vector::BroadcastOp::create(b, typeOf(w, f32()), inv).getResult();
    rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
      Value d = arith::SubFOp::create(b, loadN(x, base + i, w, f32()), meanN);
      Value n = arith::MulFOp::create(b, d, invN);
      Value r = math::FmaOp::create(b, n, loadN(gamma, i, w, f32()),
                                    loadN(beta, i, w, f32()));
      storeN(r, y, base + i);
      return SmallVector<Value>();
    });
  }

  /// y = exp(x - max) / Σ exp(x - max); the max skips NaNs as std::max
  /// does, so a NaN makes the whole row NaN through the sum, as on the CPU.
  void softmax() {
    auto p = params<SoftmaxParams>(spec);
    int64_t c = p.c, w = widthFor(c);
    auto fn = func({rows(f32(), c), rows(f32(), c)},
                   {ir.workgroup(f32(), kRowBlock / kWaveSize)});
    Value x = fn.getArgument(0), y = fn.getArgument(1);
    Value scratch = fn.getWorkgroupAttributions()[0];
    IrIndex base = rowBase(c);
    float ninf = -std::numeric_limits<float>::infinity();
    Value m = rowLoop(c, w, {fconst(w, ninf)}, [&](IrIndex i, ValueRange acc) {
      Value v = loadN(x, base + i, w, f32());
      return SmallVector<Value>{arith::MaxNumFOp::create(b, acc[0], v)};
    })[0];
    m = reduce({horizontal(vector::CombiningKind::MAXNUMF, m)},
               [&](ArrayRef<Value> l, ArrayRef<Value> r) {
                 return SmallVector<Value>{
                     arith::MaxNumFOp::create(b, l[0], r[0])};
               },
               {scratch})[0];
    auto expShifted = [&](IrIndex i) {
      return map(loadN(x, base + i, w, f32()),
                 [&](Value v) { return exp(arith::SubFOp::create(b, v, m)); });
    };
    Value s = rowLoop(c, w, {fconst(w, 0.0f)}, [&](IrIndex i, ValueRange acc) {
      return SmallVector<Value>{
          arith::AddFOp::create(b, acc[0], expShifted(i))};
    })[0];
    Value total = sum(horizontal(vector::CombiningKind::ADD, s), scratch);
    Value inv = arith::DivFOp::create(b, ir.f32(1.0f), total);
    Value invN =
        w == 1
            ? inv
            : vector::BroadcastOp::create(b, typeOf(w, f32()), inv).getResult();
    rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
      storeN(arith::MulFOp::create(b, expShifted(i), invN), y, base + i);
      return SmallVector<Value>();
    });
  }

  /// y = x / (Σ x + eps).
  void normalize() {
    auto p = params<NormalizeParams>(spec);
    int64_t c = p.c, w = widthFor(c);
    auto fn = func({rows(f32(), c), rows(f32(), c)},
                   {ir.workgroup(f32(), kRowBlock / kWaveSize)});
    Value x = fn.getArgument(0), y = fn.getArgument(1);
    IrIndex base = rowBase(c);
    Value s = rowLoop(c, w, {fconst(w, 0.0f)}, [&](IrIndex i, ValueRange acc) {
      return SmallVector<Value>{
          arith::AddFOp::create(b, acc[0], loadN(x, base + i, w, f32()))};
    })[0];
    Value total = sum(horizontal(vector::CombiningKind::ADD, s),
                      fn.getWorkgroupAttributions()[0]);
    Value denom = arith::AddFOp::create(b, total, ir.f32(p.eps));
    Value denomN = w == 1
                       ? denom
                       : vector::BroadcastOp::create(b, typeOf(w, f32()), denom)
                             .getResult();
    rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
      Value v = loadN(x, base + i, w, f32());
      storeN(arith::DivFOp::create(b, v, denomN), y, base + i);
      return SmallVector<Value>();
    });
  }

  /// Groups ranked by the sum of their two best entries (one thread per
  /// group, scores in LDS), then every thread ranks its groups against all
  /// others; the row is copied with the dropped groups at -inf.
  void groupLimit() {
    auto p = params<GroupLimitParams>(spec);
    int64_t c = p.c, g = p.g, keepCount = p.k, size = c / g;
    int64_t w = widthFor(size);
    auto fn = func({rows(f32(), c), rows(f32(), c)},
                   {ir.workgroup(f32(), g), ir.workgroup(i32(), g)});
    Value x = fn.getArgument(0), y = fn.getArgument(1);
    Value scores = fn.getWorkgroupAttributions()[0];
    Value keep = fn.getWorkgroupAttributions()[1];
    IrIndex base = rowBase(c);
    IrIndex tid = ir.threadId();
    ir.forLoop(tid, ir.idx(g), wg(), {}, [&](IrIndex grp, ValueRange) {
      IrIndex start = base + grp * size;
      Value first = ir.load(x, start);
      // A later entry replaces an earlier one only when strictly better
      // (RowOps.cpp topTwoSum, whose indices only grow).
      auto beats = [&](Value v, Value old) {
        return both(negate(isNan(v)),
                    either(isNan(old), cmpf(FPred::OGT, v, old)));
      };
      SmallVector<Value> top = ir.forLoop(
          ir.idx(1), ir.idx(size), 1,
          {first, ir.f32(0.0f), arith::ConstantIntOp::create(b, 0, 1)},
          [&](IrIndex i, ValueRange acc) {
            Value v = ir.load(x, start + i);
            Value overFirst = beats(v, acc[0]);
            Value overSecond = either(negate(acc[2]), beats(v, acc[1]));
            Value second =
                select(overFirst, acc[0], select(overSecond, v, acc[1]));
            return SmallVector<Value>{select(overFirst, v, acc[0]), second,
                                      arith::ConstantIntOp::create(b, 1, 1)};
          });
      Value score = size > 1
                        ? arith::AddFOp::create(b, top[0], top[1]).getResult()
                        : top[0];
      ir.store(score, scores, grp);
      return SmallVector<Value>();
    });
    barrier();
    ir.forLoop(tid, ir.idx(g), wg(), {}, [&](IrIndex grp, ValueRange) {
      Value mine = ir.load(scores, grp);
      Value mineIdx = toI32(grp);
      Value ahead = ir.forLoop(
          ir.idx(0), ir.idx(g), 1, {ir.i32(0)}, [&](IrIndex h, ValueRange acc) {
            Value before =
                ranksBefore(ir.load(scores, h), toI32(h), mine, mineIdx);
            return SmallVector<Value>{arith::AddIOp::create(
                b, acc[0], arith::ExtUIOp::create(b, i32(), before))};
          })[0];
      Value kept = cmpi(IPred::slt, ahead, ir.i32(keepCount));
      ir.store(arith::ExtUIOp::create(b, i32(), kept), keep, grp);
      return SmallVector<Value>();
    });
    barrier();
    Value ninf = fconst(w, -std::numeric_limits<float>::infinity());
    rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
      Value kept = cmpi(IPred::ne, ir.load(keep, i / size), ir.i32(0));
      Value v = loadN(x, base + i, w, f32());
      storeN(select(kept, v, ninf), y, base + i);
      return SmallVector<Value>();
    });
  }

  /// k rounds of a workgroup argmax; round j only considers the entries
  /// that rank after round j-1's pick, so the picks come out in the CPU's
  /// order (RowOps.h: descending, NaN last, ties to the lower index).
  void topK() {
    auto p = params<TopKParams>(spec);
    int64_t c = p.c, k = p.k, w = widthFor(c);
    int64_t waves = kRowBlock / kWaveSize;
    auto fn = func({rows(f32(), c), rows(f32(), k), rows(i32(), k)},
                   {ir.workgroup(f32(), waves), ir.workgroup(i32(), waves)});
    Value x = fn.getArgument(0), values = fn.getArgument(1),
          indices = fn.getArgument(2);
    Value scratchV = fn.getWorkgroupAttributions()[0];
    Value scratchI = fn.getWorkgroupAttributions()[1];
    IrIndex row = ir.blockId(gpu::Dimension::x);
    IrIndex base = row * c;
    Value nan = ir.f32(std::nanf(""));
    Value none = ir.i32(INT32_MAX);
    Value isFirstThread = cmpi(IPred::eq, ir.threadId(), ir.idx(0));
    ir.forLoop(
        ir.idx(0), ir.idx(k), 1, {nan, none}, [&](IrIndex j, ValueRange prev) {
          Value firstRound = cmpi(IPred::eq, j, ir.idx(0));
          SmallVector<Value> best =
              rowLoop(c, w, {nan, none}, [&](IrIndex i, ValueRange acc) {
                SmallVector<Value> cur(acc);
                SmallVector<Value> v = scalars(loadN(x, base + i, w, f32()));
                for (int64_t e = 0; e < w; ++e) {
                  Value ci = toI32(i + e);
                  Value eligible = either(
                      firstRound, ranksBefore(prev[0], prev[1], v[e], ci));
                  SmallVector<Value> cand = better(cur, {v[e], ci});
                  cur = {select(eligible, cand[0], cur[0]),
                         select(eligible, cand[1], cur[1])};
                }
                return cur;
              });
          SmallVector<Value> pick =
              reduce(best,
                     [&](ArrayRef<Value> l, ArrayRef<Value> r) {
                       return better(l, r);
                     },
                     {scratchV, scratchI});
          ir.ifThen(isFirstThread, [&] {
            ir.store(pick[0], values, row * k + j);
            ir.store(pick[1], indices, row * k + j);
          });
          return pick;
        });
  }

  void takeRows() {
    auto p = params<TakeRowsParams>(spec);
    int64_t c = p.c, w = widthFor(c);
    auto fn = func({rows(i32(), c), rows(i32(), 1), rows(i32(), c), i32()});
    Value x = fn.getArgument(0), index = fn.getArgument(1),
          out = fn.getArgument(2), limit = fn.getArgument(3);
    IrIndex r = ir.blockId(gpu::Dimension::x);
    Value src = ir.load(index, r);
    IrIndex dst = r * c;
    ifElse(
        inRange(src, limit),
        [&] {
          IrIndex from = ir.idx(ir.toIndex(src)) * c;
          rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
            storeN(loadN(x, from + i, w, i32()), out, dst + i);
            return SmallVector<Value>();
          });
        },
        [&] {
          Value zero = constant(w, i32(), b.getI32IntegerAttr(0));
          rowLoop(c, w, {}, [&](IrIndex i, ValueRange) {
            storeN(zero, out, dst + i);
            return SmallVector<Value>();
          });
        });
  }

  /// rank_sum (f32 gathered[ranks * count], f32 out[count], i32 count,
  /// i32 ranks), grid ceil(count / (w * wg)): out[i] = g[0][i] + g[1][i] +
  /// ... + g[ranks - 1][i], added left to right as comm::sumInRankOrder, g[r]
  /// = gathered + r * count. count is a multiple of w.
  void rankSum() {
    int64_t w = params<RankSumParams>(spec).w;
    auto fn = func({rows(f32(), 1), rows(f32(), 1), i32(), i32()});
    Value gathered = fn.getArgument(0), out = fn.getArgument(1);
    Value count = fn.getArgument(2), ranks = fn.getArgument(3);
    IrIndex start = flatStart(w);
    IrIndex n = ir.idx(ir.toIndex(count));
    ir.ifThen(ir.ult(start, n), [&] {
      Value first = loadN(gathered, start, w, f32());
      Value sum = ir.forLoop(
          ir.idx(1), ir.idx(ir.toIndex(ranks)), 1, {first},
          [&](IrIndex r, ValueRange acc) {
            Value part = loadN(gathered, r * n + start, w, f32());
            return SmallVector<Value>{arith::AddFOp::create(b, acc[0], part)};
          })[0];
      storeN(sum, out, start);
    });
  }

  /// Flat kernels: body(first element) for threads inside rows * rowElems.
  void flat(Value rowsArg, int64_t rowElems, int64_t w,
            const std::function<void(IrIndex)> &body) {
    IrIndex start = flatStart(w);
    IrIndex total = ir.idx(ir.toIndex(rowsArg)) * rowElems;
    ir.ifThen(ir.ult(start, total), [&] { body(start); });
  }

  void unary() {
    auto p = params<UnaryParams>(spec);
    int64_t c = p.c, w = p.w, op = p.op;
    auto fn = func({rows(f32(), c), rows(f32(), c), i32()});
    Value x = fn.getArgument(0), y = fn.getArgument(1);
    flat(fn.getArgument(2), c, w, [&](IrIndex i) {
      Value v = loadN(x, i, w, f32());
      Value r;
      if (op <= 1) {
        // sigmoid 1 / (1 + e^-v), silu v / (1 + e^-v), as the CPU divides.
        r = map(v, [&](Value s) {
          Value den = arith::AddFOp::create(b, ir.f32(1.0f),
                                            exp(arith::NegFOp::create(b, s)));
          return arith::DivFOp::create(b, op == 0 ? ir.f32(1.0f) : s, den)
              .getResult();
        });
      } else if (op == 2) {
        // std::max(v, 0): NaN and -0 pass through.
        r = select(cmpf(FPred::OLT, v, fconst(w, 0.0f)), fconst(w, 0.0f), v);
      } else {
        r = arith::MulFOp::create(b, v, fconst(w, p.s));
      }
      storeN(r, y, i);
    });
  }

  void binary() {
    auto p = params<BinaryParams>(spec);
    int64_t c = p.c, w = p.w, bc = p.bc;
    auto fn =
        func({rows(f32(), c), bc > 0 ? ir.global(f32(), bc) : rows(f32(), c),
              rows(f32(), c), i32()});
    Value full = fn.getArgument(0), other = fn.getArgument(1),
          out = fn.getArgument(2);
    flat(fn.getArgument(3), c, w, [&](IrIndex i) {
      Value a = loadN(full, i, w, f32());
      Value o = loadN(other, bc > 0 ? i % bc : i, w, f32());
      Value r = p.op == 0 ? arith::AddFOp::create(b, a, o).getResult()
                          : arith::MulFOp::create(b, a, o).getResult();
      storeN(r, out, i);
    });
  }

  void gather() {
    auto p = params<GatherParams>(spec);
    int64_t c = p.c, k = p.k, n = p.n;
    auto fn =
        func({rows(f32(), n / k * c), rows(i32(), n), rows(f32(), n), i32()});
    Value x = fn.getArgument(0), index = fn.getArgument(1),
          out = fn.getArgument(2);
    flat(fn.getArgument(3), n, 1, [&](IrIndex o) {
      Value at = ir.load(index, o);
      Value valid = inRange(at, ir.i32(c));
      IrIndex col = ir.idx(ir.toIndex(select(valid, at, ir.i32(0))));
      Value v = ir.load(x, o / k * c + col);
      ir.store(select(valid, v, ir.f32(0.0f)), out, o);
    });
  }

  /// dst[b * dstride + doff + j] = src[b * sstride + soff + j], j < chunk,
  /// for the rows * outer blocks; bits copied as i32.
  void copyBlocks() {
    auto p = params<CopyBlocksParams>(spec);
    int64_t outer = p.outer, chunk = p.chunk, w = p.w;
    auto fn = func({rows(i32(), outer * p.sstride),
                    rows(i32(), outer * p.dstride), i32()});
    Value src = fn.getArgument(0), dst = fn.getArgument(1);
    flat(fn.getArgument(2), outer * chunk, w, [&](IrIndex e) {
      IrIndex block = e / chunk, j = e % chunk;
      Value v = loadN(src, block * p.sstride + j + p.soff, w, i32());
      storeN(v, dst, block * p.dstride + j + p.doff);
    });
  }

  void build() {
    switch (spec.kind) {
    case KernelKind::Embedding:
      embedding();
      break;
    case KernelKind::LayerNorm:
      layerNorm();
      break;
    case KernelKind::Unary:
      unary();
      break;
    case KernelKind::Binary:
      binary();
      break;
    case KernelKind::Softmax:
      softmax();
      break;
    case KernelKind::Normalize:
      normalize();
      break;
    case KernelKind::GroupLimit:
      groupLimit();
      break;
    case KernelKind::TopK:
      topK();
      break;
    case KernelKind::Gather:
      gather();
      break;
    case KernelKind::CopyBlocks:
      copyBlocks();
      break;
    case KernelKind::TakeRows:
      takeRows();
      break;
    case KernelKind::RankSum:
      rankSum();
      break;
    default:
      llvm_unreachable("not a data kernel");
    }
    gpu::ReturnOp::create(b);
  }
};

/// fp8_gemm: the dense BF16 recipe (GemmTiles.h) with Fp8Block128 weights,
/// q F8E4M3FN [n, k] and f32 scales [ceil(n/128), ceil(k/128)], W = q * s.
/// Each lane's 8 bytes of a K step (one dwordx2 load) are decoded exactly
/// with integer ops, scaled by their block's scale and rounded to bf16 in
/// registers (Bf16Tiles::fp8Weight8); then the bf16 MFMAs of Bf16Tiles.
/// With qa = 1 the native FP8 recipe instead (Fp8Tiles.h).
struct Fp8Gemm : Bf16Tiles {
  using Bf16Tiles::Bf16Tiles;

  void build(const KernelSpec &symbolSpec) {
    Type i32 = b.getI32Type();
    int64_t n = spec.n, k = spec.k;
    SmallVector<Type> args = {
        ir.activations(f32(), k), ir.global(b.getI8Type(), n * k),
        ir.global(f32(), ceilDiv(n, kFp8Block) * ceilDiv(k, kFp8Block)),
        ir.activations(f32(), n), i32};
    auto fn = createKernelFunc(b, module, symbolSpec, args);
    Value x = fn.getArgument(0), q = fn.getArgument(1),
          scales = fn.getArgument(2), y = fn.getArgument(3);
    IrIndex rows = ir.idx(ir.toIndex(fn.getArgument(4)));
    IrIndex lane = ir.threadId();
    IrIndex bx = ir.blockId(gpu::Dimension::x);
    IrIndex by = ir.blockId(gpu::Dimension::y);
    SmallVector<IrIndex> rowIdx, wRows;
    for (int64_t mt = 0; mt < t.mTiles; ++mt)
      rowIdx.push_back(ir.min(t.tileRow(by, mt) + operandRow(lane), rows - 1));
    for (int64_t nt = 0; nt < t.nTiles; ++nt)
      wRows.push_back(
          ir.min(t.tileCol(bx, nt) * kTile + operandRow(lane), ir.idx(n - 1)));
    SmallVector<Value> acc(t.mTiles * t.nTiles, zeroAcc());
    if (params<Fp8GemmParams>(symbolSpec).qa == 1) {
      acc = Fp8Tiles(b, spec, {scales}).kLoop(x, {q}, lane, rowIdx, wRows, acc);
    } else {
      fp8 = Fp8{{scales}, std::nullopt};
      acc = kLoop(x, {q}, lane, rowIdx, wRows, acc);
    }
    storeResults(y, lane, bx, by, rows, acc);
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildDataKernel(gpu::GPUModuleOp module,
                                  const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  if (spec.kind == KernelKind::Fp8Gemm) {
    // GemmTiles reads the shape and tiling from the named fields.
    auto p = params<Fp8GemmParams>(spec);
    KernelSpec gemm = spec;
    gemm.n = p.n;
    gemm.k = p.k;
    gemm.tiling.mTiles = p.mt;
    gemm.tiling.nTiles = p.nt;
    Fp8Gemm(b, gemm, module).build(spec);
    return;
  }
  DataKernel(b, spec, module).build();
}
