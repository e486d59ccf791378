//===- AttentionKernels.cpp - KV caches, MLA, GQA and the DSA indexer -----===//
//
// Caches are [slots, capacity, width] rows of f32 or BF16 (i16 bit
// patterns, converted with exact bit operations: BF16 -> f32 is a shift,
// f32 -> BF16 rounds to nearest even and keeps NaN, as cpu::floatToBf16).
// Every workgroup has kRowBlock threads (4 waves). Kernel arguments (params
// in AttentionSpecs.cpp; "act" = rows of activations, R at run time):
//
//   kv_append          (cache, i32 seq[R], i32 pos[R], f32 values[R, w],
//                       i32 capacity)                       grid (R)
//       cache[seq][pos][:] = values; a position outside [0, capacity) is
//       not written.
//   gqa_attention      (f32 q[R, qh*d], kcache, vcache, i32 seq[R],
//                       i32 pos[R], f32 out[R, qh*dv], i32 capacity)
//                                                          grid (R, qh)
//   mla_attention s0   (f32 q_nope[R, h*n], f32 q_pe[R, h*r], kv_b[, kv_b
//                       scales], f32 q_lat[R, h*(l+r)], i32 R)
//                                                   grid (ceil(R/tt), h)
//       q_lat[t, h] = [W_UK_h^T q_nope[t, h] | q_pe[t, h]].
//   mla_attention s1   (f32 q_lat, latent cache, i32 seq[R], i32 pos[R]
//                       [, i32 top_k[R, k]], f32 o_lat[R, h*l],
//                       i32 capacity)                      grid (R, h)
//   mla_attention s2   (f32 o_lat, kv_b[, scales], f32 out[R, h*v], i32 R)
//                                                   grid (ceil(R/tt), h)
//       out[t, h] = W_UV_h o_lat[t, h].
//   indexer_top_k s0   (f32 q[R, h*d], f32 weights[R, h], key cache,
//                       i32 seq[R], i32 pos[R], f32 scores[R, capacity],
//                       i32 capacity)                      grid (R, sp)
//       scores[t, s] = sum_h w[t, h] relu(scale q[t, h] . key[s]) for
//       s <= pos[t] (NaN -> -inf), as cpu::indexerTopK.
//   indexer_top_k s1   (f32 scores, i32 pos[R], i32 out[R, k],
//                       i32 capacity)                      grid (R)
//       the k best positions in ascending order (ties: lower position),
//       or 0..pos then -1 when pos + 1 <= k.
//
// Attention (GQA and MLA stage 1) runs one workgroup per (token, query
// head): tiles of kRowBlock keys, one key per thread for the score (q in
// LDS), an online softmax (running maximum and sum, max-rescaled) as
// cpu::detail::attend, then the tile's weights and rows go through LDS and
// each thread accumulates value columns (coalesced across the threads).
// kv_b (MLA) is f32, BF16, MXFP4 in its checkpoint layout (row-major
// [rows, l/2] bytes, low nibble first, E8M0 scales [rows, l/32]) or FP8
// E4M3 [rows, l] with f32 scales per 128x128 block.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelIr.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kiln::rocdl;

namespace {

/// kv_b formats (param "wf"), as AttentionSpecs.cpp.
enum WeightFormat : int64_t { kF32 = 0, kBf16 = 1, kMxfp4 = 2, kFp8 = 3 };

constexpr float kLog2e = 1.4426950408889634f;
/// Indexer heads whose dot products a thread accumulates at once.
constexpr int64_t kHeadGroup = 16;

struct AttentionKernel {
  AttentionKernel(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module,
                  const KernelSpec &spec)
      : ir(b), b(b), module(module), spec(spec) {}
  KernelIr ir;
  ImplicitLocOpBuilder &b;
  gpu::GPUModuleOp module;
  const KernelSpec &spec;

  int64_t p(StringRef name) const { return spec.param(name); }
  int64_t wg() const { return spec.blockSize(); }
  int64_t waves() const { return wg() / kWaveSize; }

  Type f32() { return b.getF32Type(); }
  Type i32() { return b.getI32Type(); }
  Type i16() { return b.getIntegerType(16); }
  Type i8() { return b.getIntegerType(8); }
  VectorType vec(int64_t n, Type t) { return VectorType::get({n}, t); }

  IrIndex c(int64_t v) { return ir.idx(v); }
  IrIndex index(Value i32Value) { return ir.idx(ir.toIndex(i32Value)); }
  Value toI32(Value indexValue) {
    return arith::IndexCastUIOp::create(b, i32(), indexValue);
  }
  Value cmpi(arith::CmpIPredicate pred, Value l, Value r) {
    return arith::CmpIOp::create(b, pred, l, r);
  }
  Value cmpf(arith::CmpFPredicate pred, Value l, Value r) {
    return arith::CmpFOp::create(b, pred, l, r);
  }
  Value select(Value cond, Value l, Value r) {
    return arith::SelectOp::create(b, cond, l, r);
  }
  Value andi(Value l, Value r) { return arith::AndIOp::create(b, l, r); }
  Value ori(Value l, Value r) { return arith::OrIOp::create(b, l, r); }
  Value addi(Value l, Value r) { return arith::AddIOp::create(b, l, r); }
  Value addf(Value l, Value r) { return arith::AddFOp::create(b, l, r); }
  Value mulf(Value l, Value r) { return arith::MulFOp::create(b, l, r); }
  Value fma(Value x, Value y, Value acc) {
    return math::FmaOp::create(b, x, y, acc);
  }
  Value ci32(int64_t v) { return ir.i32(v); }
  Value negInf() { return ir.f32(-INFINITY); }
  void barrier() { gpu::BarrierOp::create(b); }
  /// `v` as a value the compiler cannot see (`positive` is never 0): a
  /// loop bound that keeps LLVM from unrolling the loop fully, which on
  /// small shapes turns into every LDS read up front and spills.
  IrIndex opaque(int64_t v, IrIndex positive) {
    return ir.idx(
        select(cmpi(arith::CmpIPredicate::ugt, positive, c(0)), c(v), c(0)));
  }
  /// Nothing moves across it in the machine scheduler: without it, fully
  /// unrolled small loops get every LDS read hoisted to the top (spills).
  void schedBarrier() {
    LLVM::CallIntrinsicOp::create(
        b, b.getStringAttr("llvm.amdgcn.sched.barrier"), ValueRange{ci32(0)});
  }

  /// A constant of `type` (scalar or vector) with every element `v`.
  Value splatI32(Type type, int32_t v) {
    if (auto vt = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(b, DenseElementsAttr::get(vt, v));
    return ci32(v);
  }

  /// if (cond) then() else otherwise(), yielding `types`.
  SmallVector<Value>
  ifElse(Value cond, TypeRange types,
         const std::function<SmallVector<Value>()> &then,
         const std::function<SmallVector<Value>()> &otherwise) {
    auto op = scf::IfOp::create(b, types, cond, /*withElseRegion=*/true);
    for (int branch = 0; branch < 2; ++branch) {
      OpBuilder::InsertionGuard guard(b);
      Region &region = branch == 0 ? op.getThenRegion() : op.getElseRegion();
      Block &block = region.front();
      if (types.empty())
        b.setInsertionPoint(block.getTerminator());
      else
        b.setInsertionPointToStart(&block);
      SmallVector<Value> values = branch == 0 ? then() : otherwise();
      if (!types.empty())
        scf::YieldOp::create(b, values);
    }
    return SmallVector<Value>(op.getResults());
  }

  // -- Element conversions --------------------------------------------------

  /// BF16 bit patterns (i16 or vector of i16) to f32: bits << 16.
  Value bf16ToF32(Value bits) {
    Type wide = i32(), fl = f32();
    if (auto vt = dyn_cast<VectorType>(bits.getType())) {
      wide = vec(vt.getNumElements(), i32());
      fl = vec(vt.getNumElements(), f32());
    }
    Value w = arith::ExtUIOp::create(b, wide, bits);
    Value shifted = arith::ShLIOp::create(b, w, splatI32(wide, 16));
    return arith::BitcastOp::create(b, fl, shifted);
  }

  /// f32 to BF16 bits, round to nearest even, NaN stays NaN.
  Value f32ToBf16(Value f) {
    Value bits = arith::BitcastOp::create(b, i32(), f);
    Value hi = arith::ShRUIOp::create(b, bits, ci32(16));
    Value nan = cmpi(arith::CmpIPredicate::ugt, andi(bits, ci32(0x7fffffff)),
                     ci32(0x7f800000));
    Value quiet = ori(hi, ci32(0x40));
    Value bias = addi(ci32(0x7fff), andi(hi, ci32(1)));
    Value rounded = arith::ShRUIOp::create(b, addi(bits, bias), ci32(16));
    return arith::TruncIOp::create(b, i16(), select(nan, quiet, rounded));
  }

  /// E2M1 code (low 4 bits of an i32) to f32, exactly.
  Value e2m1(Value code) {
    Value e = andi(arith::ShRUIOp::create(b, code, ci32(1)), ci32(3));
    Value m = andi(code, ci32(1));
    // e > 0: 2^(e-1) (1 + m/2); e == 0: m/2.
    Value normal = ori(arith::ShLIOp::create(b, addi(e, ci32(126)), ci32(23)),
                       arith::ShLIOp::create(b, m, ci32(22)));
    Value sub = select(cmpi(arith::CmpIPredicate::eq, m, ci32(0)), ci32(0),
                       ci32(0x3f000000));
    Value mag = select(cmpi(arith::CmpIPredicate::eq, e, ci32(0)), sub, normal);
    Value sign = arith::ShLIOp::create(b, andi(code, ci32(8)), ci32(28));
    return arith::BitcastOp::create(b, f32(), ori(mag, sign));
  }

  /// E4M3FN byte (i8) to f32, exactly (as cpu::e4m3ToFloat): S.1111.111
  /// is NaN, exponent 0 is subnormal (m * 2^-9).
  Value e4m3(Value byte) {
    Value v = arith::ExtUIOp::create(b, i32(), byte);
    Value e = andi(arith::ShRUIOp::create(b, v, ci32(3)), ci32(15));
    Value m = andi(v, ci32(7));
    Value normal = ori(arith::ShLIOp::create(b, addi(e, ci32(120)), ci32(23)),
                       arith::ShLIOp::create(b, m, ci32(20)));
    Value mag = arith::BitcastOp::create(b, f32(), normal);
    Value sub =
        mulf(arith::UIToFPOp::create(b, f32(), m), ir.f32(1.0f / 512.0f));
    mag = select(cmpi(arith::CmpIPredicate::eq, e, ci32(0)), sub, mag);
    Value nan = cmpi(arith::CmpIPredicate::eq, andi(v, ci32(0x7f)), ci32(0x7f));
    mag = select(nan, ir.f32(NAN), mag);
    Value neg = cmpi(arith::CmpIPredicate::ne, andi(v, ci32(0x80)), ci32(0));
    return select(neg, arith::NegFOp::create(b, mag), mag);
  }

  /// E8M0 scale byte (i8) to f32: 2^(e-127); 0 is 2^-127, 0xFF NaN.
  Value e8m0(Value byte) {
    Value e = arith::ExtUIOp::create(b, i32(), byte);
    Value bits = arith::ShLIOp::create(b, e, ci32(23));
    bits = select(cmpi(arith::CmpIPredicate::eq, e, ci32(0)), ci32(0x00400000),
                  bits);
    bits = select(cmpi(arith::CmpIPredicate::eq, e, ci32(255)),
                  ci32(0x7fc00000), bits);
    return arith::BitcastOp::create(b, f32(), bits);
  }

  // -- Caches ---------------------------------------------------------------

  MemRefType cacheType(bool bf, int64_t width) {
    return ir.activations(bf ? i16() : f32(), width);
  }
  Value loadCache(Value mem, bool bf, IrIndex i) {
    Value v = ir.load(mem, i);
    return bf ? bf16ToF32(v) : v;
  }
  Value loadCache4(Value mem, bool bf, IrIndex i) {
    if (!bf)
      return ir.loadVector(vec(4, f32()), mem, i);
    return bf16ToF32(ir.loadVector(vec(4, i16()), mem, i));
  }

  // -- kv_b (MLA) -------------------------------------------------------------

  int64_t kvbRows() const { return p("h") * (p("n") + p("v")); }
  /// Argument types of kv_b: values, and scales for MXFP4.
  SmallVector<Type> kvbTypes() {
    int64_t rows = kvbRows(), l = p("l");
    switch (p("wf")) {
    case kF32:
      return {ir.global(f32(), rows * l)};
    case kBf16:
      return {ir.global(i16(), rows * l)};
    case kFp8:
      return {ir.global(i8(), rows * l),
              ir.global(f32(), ceilDiv(rows, 128) * ceilDiv(l, 128))};
    default:
      return {ir.global(i8(), rows * l / 2), ir.global(i8(), rows * l / 32)};
    }
  }
  /// kv_b[row, col].
  Value kvbElem(ValueRange w, IrIndex row, IrIndex col) {
    int64_t l = p("l");
    switch (p("wf")) {
    case kF32:
      return ir.load(w[0], row * l + col);
    case kBf16:
      return bf16ToF32(ir.load(w[0], row * l + col));
    case kFp8:
      return mulf(e4m3(ir.load(w[0], row * l + col)),
                  ir.load(w[1], row / 128 * ceilDiv(l, 128) + col / 128));
    default: {
      Value byte = arith::ExtUIOp::create(
          b, i32(), ir.load(w[0], row * (l / 2) + col / 2));
      Value shift = toI32(col % 2 * 4);
      Value code = andi(arith::ShRUIOp::create(b, byte, shift), ci32(15));
      return mulf(e2m1(code), e8m0(ir.load(w[1], row * (l / 32) + col / 32)));
    }
    }
  }
  /// kv_b[row, col .. col + 4), col a multiple of 4.
  Value kvbElem4(ValueRange w, IrIndex row, IrIndex col) {
    int64_t l = p("l");
    switch (p("wf")) {
    case kF32:
      return ir.loadVector(vec(4, f32()), w[0], row * l + col);
    case kBf16:
      return bf16ToF32(ir.loadVector(vec(4, i16()), w[0], row * l + col));
    case kFp8: {
      Value bytes = ir.loadVector(vec(4, i8()), w[0], row * l + col);
      Value scale = ir.load(w[1], row / 128 * ceilDiv(l, 128) + col / 128);
      SmallVector<Value> elems;
      for (int64_t i = 0; i < 4; ++i)
        elems.push_back(
            mulf(e4m3(vector::ExtractOp::create(b, bytes, i)), scale));
      return vector::FromElementsOp::create(b, vec(4, f32()), elems);
    }
    default: {
      Value bytes = ir.loadVector(vec(2, i8()), w[0], row * (l / 2) + col / 2);
      Value scale = e8m0(ir.load(w[1], row * (l / 32) + col / 32));
      SmallVector<Value> elems;
      for (int64_t i = 0; i < 2; ++i) {
        Value byte = arith::ExtUIOp::create(
            b, i32(), vector::ExtractOp::create(b, bytes, i));
        elems.push_back(mulf(e2m1(andi(byte, ci32(15))), scale));
        elems.push_back(
            mulf(e2m1(arith::ShRUIOp::create(b, byte, ci32(4))), scale));
      }
      return vector::FromElementsOp::create(b, vec(4, f32()), elems);
    }
    }
  }

  // -- Reductions and scans
  // -----------------------------------------------------

  Value blockMax(Value v, Value scratch) {
    auto combine = [&](ArrayRef<Value> l, ArrayRef<Value> r) {
      return SmallVector<Value>{arith::MaxNumFOp::create(b, l[0], r[0])};
    };
    return ir.blockReduce({v}, combine, {scratch})[0];
  }
  Value blockSum(Value v, Value scratch) {
    auto combine = [&](ArrayRef<Value> l, ArrayRef<Value> r) {
      return SmallVector<Value>{addf(l[0], r[0])};
    };
    return ir.blockReduce({v}, combine, {scratch})[0];
  }

  /// Exclusive prefix sum of an i32 over the workgroup, in thread order,
  /// and the total. `totals` holds one i32 per wave; a barrier separates
  /// its writes from its reads.
  std::pair<Value, Value> blockScan(Value v, Value totals) {
    IrIndex tid = ir.threadId();
    IrIndex lane = tid % kWaveSize;
    Value x = v;
    for (int32_t off = 1; off < kWaveSize; off *= 2) {
      Value y = gpu::ShuffleOp::create(b, x, off, int32_t(kWaveSize),
                                       gpu::ShuffleMode::UP)
                    .getShuffleResult();
      x = select(cmpi(arith::CmpIPredicate::uge, lane, c(off)), addi(x, y), x);
    }
    IrIndex wave = tid / kWaveSize;
    ir.ifThen(cmpi(arith::CmpIPredicate::eq, lane, c(kWaveSize - 1)),
              [&] { ir.store(x, totals, wave); });
    barrier();
    Value before = ci32(0), total = ci32(0);
    for (int64_t w = 0; w < waves(); ++w) {
      Value t = ir.load(totals, c(w));
      before = addi(before, select(ir.ult(c(w), wave), t, ci32(0)));
      total = addi(total, t);
    }
    Value exclusive = arith::SubIOp::create(b, addi(before, x), v).getResult();
    return {exclusive, total};
  }

  /// exp(x) through the hardware exp2.
  Value exp(Value x) {
    return ir.intrinsic("llvm.exp2", f32(), {mulf(x, ir.f32(kLog2e))});
  }

  // -- kv_append --------------------------------------------------------------

  void kvAppend() {
    bool bf = p("bf");
    int64_t w = p("w");
    auto fn = createKernelFunc(b, module, spec,
                               {cacheType(bf, w), ir.activations(i32(), 1),
                                ir.activations(i32(), 1),
                                ir.activations(f32(), w), i32()});
    Value cache = fn.getArgument(0), values = fn.getArgument(3);
    Value capacity = fn.getArgument(4);
    IrIndex t = ir.blockId(gpu::Dimension::x);
    Value seq = ir.load(fn.getArgument(1), t);
    Value pos = ir.load(fn.getArgument(2), t);
    Value ok = andi(andi(cmpi(arith::CmpIPredicate::sge, pos, ci32(0)),
                         cmpi(arith::CmpIPredicate::slt, pos, capacity)),
                    cmpi(arith::CmpIPredicate::sge, seq, ci32(0)));
    ir.ifThen(ok, [&] {
      IrIndex base = (index(seq) * index(capacity) + index(pos)) * w;
      ir.forLoop(ir.threadId(), c(w), wg(), {}, [&](IrIndex i, ValueRange) {
        Value v = ir.load(values, t * w + i);
        ir.store(bf ? f32ToBf16(v) : v, cache, base + i);
        return SmallVector<Value>();
      });
    });
  }

  // -- Attention core
  // -----------------------------------------------------------

  struct Attend {
    int64_t qHeads, kvHeads, keyDim, valueDim, keyWidth, valueWidth;
    int64_t listWidth; // 0: causal
    bool bf;
    float scale;
    Value q, keys, values, seqs, positions, list, out, capacity;
    // Workgroup buffers.
    Value qs, weights, rows, redMax, redSum, partial;
  };
  /// Workgroup buffer types of attend(), in Attend's order.
  SmallVector<Type> attendBuffers(int64_t keyDim, int64_t valueDim) {
    int64_t colThreads = std::min(valueDim, wg());
    int64_t splits = wg() / colThreads;
    int64_t cols = (valueDim + colThreads - 1) / colThreads;
    return {ir.workgroup(f32(), keyDim),
            ir.workgroup(f32(), wg()),
            ir.workgroup(i32(), wg()),
            ir.workgroup(f32(), waves()),
            ir.workgroup(f32(), waves()),
            ir.workgroup(
                f32(), std::max<int64_t>(1, (splits - 1) * colThreads * cols))};
  }

  void attend(const Attend &a) {
    IrIndex t = ir.blockId(gpu::Dimension::x);
    IrIndex h = ir.blockId(gpu::Dimension::y);
    IrIndex tid = ir.threadId();
    Value seq = ir.load(a.seqs, t), pos = ir.load(a.positions, t);
    IrIndex slotRow = index(seq) * index(a.capacity);
    IrIndex n = a.listWidth ? c(a.listWidth) : index(pos) + 1;
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
        ir.forLoop(c(0), n, wg(), init, [&](IrIndex j0, ValueRange carried) {
          Value m = carried[0], l = carried[1];
          IrIndex j = j0 + tid;
          Value valid = ir.ult(j, n);
          IrIndex jc = ir.min(j, n - 1);
          IrIndex position = jc;
          if (a.listWidth) {
            Value listed = ir.load(a.list, t * a.listWidth + jc);
            Value inCache =
                andi(cmpi(arith::CmpIPredicate::sge, listed, ci32(0)),
                     cmpi(arith::CmpIPredicate::slt, listed, a.capacity));
            valid = andi(valid, inCache);
            position = index(select(inCache, listed, ci32(0)));
          }
          IrIndex row = slotRow + position;
          IrIndex keyBase = row * a.keyWidth + keyCol;
          Value dot;
          if (vec4) {
            Value acc =
                ir.forLoop(c(0), opaque(a.keyDim, index(a.capacity)), 4,
                           {arith::ConstantOp::create(
                               b, DenseElementsAttr::get(vec(4, f32()), 0.0f))},
                           [&](IrIndex d, ValueRange acc) {
                             Value k = loadCache4(a.keys, a.bf, keyBase + d);
                             Value qv = ir.loadVector(vec(4, f32()), a.qs, d);
                             return SmallVector<Value>{fma(qv, k, acc[0])};
                           })[0];
            dot =
                vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc);
          } else {
            dot = ir.forLoop(c(0), opaque(a.keyDim, index(a.capacity)), 1,
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
          Value corr = select(cmpf(arith::CmpFPredicate::OEQ, m, negInf()),
                              zero, exp(arith::SubFOp::create(b, m, mNew)));
          Value lNew = addf(mulf(l, corr), blockSum(w, a.redSum));
          ir.store(w, a.weights, tid);
          ir.store(select(valid, toI32(row), ci32(-1)), a.rows, tid);
          barrier();

          SmallVector<Value> acc;
          for (int64_t i = 0; i < cols; ++i)
            acc.push_back(mulf(carried[2 + i], corr));
          IrIndex count = ir.min(c(wg()), n - j0);
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
          IrIndex at = ir.min(partialAt(c(s), i),
                              c((splits - 1) * colThreads * cols - 1));
          acc[i] = addf(acc[i], ir.load(a.partial, at));
        }
    }
    Value l = state[1];
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

  void gqa() {
    bool bf = p("bf");
    int64_t qh = p("qh"), kvh = p("kvh"), d = p("d"), dv = p("dv");
    auto fn = createKernelFunc(
        b, module, spec,
        {ir.activations(f32(), qh * d), cacheType(bf, kvh * d),
         cacheType(bf, kvh * dv), ir.activations(i32(), 1),
         ir.activations(i32(), 1), ir.activations(f32(), qh * dv), i32()},
        attendBuffers(d, dv));
    auto wb = fn.getWorkgroupAttributions();
    Attend a{qh,
             kvh,
             d,
             dv,
             kvh * d,
             kvh * dv,
             0,
             bf,
             spec.paramFloat("scale"),
             fn.getArgument(0),
             fn.getArgument(1),
             fn.getArgument(2),
             fn.getArgument(3),
             fn.getArgument(4),
             Value(),
             fn.getArgument(5),
             fn.getArgument(6),
             wb[0],
             wb[1],
             wb[2],
             wb[3],
             wb[4],
             wb[5]};
    attend(a);
  }

  // -- MLA
  // ----------------------------------------------------------------------

  void mlaAttend() {
    bool bf = p("bf");
    int64_t h = p("h"), l = p("l"), r = p("r"), k = p("k");
    SmallVector<Type> args = {ir.activations(f32(), h * (l + r)),
                              cacheType(bf, l + r), ir.activations(i32(), 1),
                              ir.activations(i32(), 1)};
    if (k)
      args.push_back(ir.activations(i32(), k));
    args.push_back(ir.activations(f32(), h * l));
    args.push_back(i32());
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
             spec.paramFloat("scale"),
             fn.getArgument(0),
             fn.getArgument(1),
             fn.getArgument(1),
             fn.getArgument(2),
             fn.getArgument(3),
             k ? fn.getArgument(4) : Value(),
             fn.getArgument(next),
             fn.getArgument(next + 1),
             wb[0],
             wb[1],
             wb[2],
             wb[3],
             wb[4],
             wb[5]};
    attend(a);
  }

  /// Stage 0: q_lat = [W_UK_h^T q_nope | q_pe] for tt tokens of one head;
  /// each kv_b element read serves all of them.
  void mlaAbsorb() {
    int64_t h = p("h"), n = p("n"), r = p("r"), v = p("v"), l = p("l"),
            tt = p("tt");
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
  void mlaExpand() {
    int64_t h = p("h"), n = p("n"), v = p("v"), l = p("l"), tt = p("tt");
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
    Value zero4 = arith::ConstantOp::create(
        b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
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
              next.push_back(fma(ir.loadVector(vec(4, f32()), os, col + k * l),
                                 x, acc[k]));
            return next;
          });
      for (int64_t k = 0; k < tt; ++k) {
        IrIndex tok = t0 + k;
        ir.ifThen(andi(ir.ult(tok, rows), ir.ult(v0 + tid, c(v))), [&] {
          Value sum = vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                                  acc[k]);
          ir.store(sum, out, (tok * h + hh) * v + vr);
        });
      }
      barrier();
      return SmallVector<Value>();
    });
  }

  // -- Indexer
  // ------------------------------------------------------------------

  /// Stage 0: one key per thread, every head's dot product accumulated in
  /// registers while the key streams in (q in LDS: h * d * 4 bytes, 16 KiB
  /// for GLM-5, so four workgroups fit gfx942's 64 KiB; the weights are
  /// uniform loads).
  void indexerScore() {
    bool bf = p("bf");
    int64_t h = p("h"), d = p("d"), sp = p("sp");
    float scale = spec.paramFloat("scale");
    auto fn = createKernelFunc(
        b, module, spec,
        {ir.activations(f32(), h * d), ir.activations(f32(), h),
         cacheType(bf, d), ir.activations(i32(), 1), ir.activations(i32(), 1),
         ir.activations(f32(), 1), i32()},
        {ir.workgroup(f32(), h * d)});
    Value q = fn.getArgument(0), wts = fn.getArgument(1);
    Value keys = fn.getArgument(2), scores = fn.getArgument(5);
    Value capacity = fn.getArgument(6);
    Value qs = fn.getWorkgroupAttributions()[0];
    IrIndex t = ir.blockId(gpu::Dimension::x);
    IrIndex split = ir.blockId(gpu::Dimension::y);
    IrIndex tid = ir.threadId();
    ir.forLoop(tid, c(h * d), wg(), {}, [&](IrIndex i, ValueRange) {
      ir.store(ir.load(q, t * (h * d) + i), qs, i);
      return SmallVector<Value>();
    });
    barrier();
    Value seq = ir.load(fn.getArgument(3), t);
    IrIndex n = index(ir.load(fn.getArgument(4), t)) + 1;
    IrIndex cap = index(capacity);
    IrIndex slotRow = index(seq) * cap;
    int64_t step = d % 4 == 0 ? 4 : 1;
    ir.forLoop(split * wg(), n, sp * wg(), {}, [&](IrIndex j0, ValueRange) {
      IrIndex j = j0 + tid;
      IrIndex keyBase = (slotRow + ir.min(j, n - 1)) * d;
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
          Value relu = select(cmpf(arith::CmpFPredicate::OGT, x, ir.f32(0.0f)),
                              x, ir.f32(0.0f));
          total = addf(total, mulf(ir.load(wts, t * h + (h0 + g)), relu));
        }
      }
      total = select(cmpf(arith::CmpFPredicate::UNO, total, total), negInf(),
                     total);
      ir.ifThen(ir.ult(j, n), [&] { ir.store(total, scores, t * cap + j); });
      // The loop is uniform; the barrier keeps the compiler from hoisting
      // every LDS read of q out of it (spills on small shapes).
      barrier();
      return SmallVector<Value>();
    });
  }

  /// Orderable key of a score: unsigned order = float order, -0 = +0.
  Value orderKey(Value f) {
    Value bits = arith::BitcastOp::create(b, i32(), f);
    bits = select(cmpi(arith::CmpIPredicate::eq, bits, ci32(INT32_MIN)),
                  ci32(0), bits);
    Value neg = cmpi(arith::CmpIPredicate::slt, bits, ci32(0));
    return select(neg, arith::XOrIOp::create(b, bits, ci32(-1)),
                  arith::XOrIOp::create(b, bits, ci32(INT32_MIN)));
  }

  /// Stage 1: radix select (4 passes of 8 bits over LDS histograms) finds
  /// the k-th best key T and how many keys equal to T to take; a last pass
  /// writes, in position order, every key above T and the first of those
  /// equal to T.
  void indexerSelect() {
    int64_t k = p("k");
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
            ir.store(select(ir.ult(i, n), toI32(i), ci32(-1)), out,
                     outBase + i);
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
                match =
                    cmpi(arith::CmpIPredicate::eq,
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
              ir.store(arith::SubIOp::create(b, remaining, found[2]), sel,
                       c(1));
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
                Value gt = andi(
                    valid, cmpi(arith::CmpIPredicate::ugt, key, threshold));
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

  void build() {
    switch (spec.kind) {
    case KernelKind::KvAppend:
      kvAppend();
      break;
    case KernelKind::GqaAttention:
      gqa();
      break;
    case KernelKind::MlaAttention:
      if (p("s") == 0)
        mlaAbsorb();
      else if (p("s") == 1)
        mlaAttend();
      else
        mlaExpand();
      break;
    case KernelKind::IndexerTopK:
      if (p("s") == 0)
        indexerScore();
      else
        indexerSelect();
      break;
    default:
      llvm_unreachable("not an attention kernel");
    }
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildAttentionKernel(gpu::GPUModuleOp module,
                                       const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  AttentionKernel(b, module, spec).build();
}
