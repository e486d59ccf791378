//===- AttentionKernel.h - The attention kernels' shared body ---*- C++ -*-===//
//
// struct AttentionKernel: the element conversions, cache and kv_b access,
// block reductions and the small IR helpers of the attention family.
// AttentionKernels.cpp builds the KV caches, GQA and MLA kernels with it,
// IndexerKernels.cpp the DSA indexer (indexer_top_k).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_ATTENTIONKERNEL_H
#define KILN_PASSES_CODEGEN_ROCDL_ATTENTIONKERNEL_H

#include "passes/codegen/rocdl/KernelIr.h"
#include "passes/codegen/rocdl/KernelParams.h"
#include "passes/codegen/rocdl/MfmaLayout.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

namespace kiln::rocdl::attention {

using namespace mlir;

/// kv_b formats (MlaAttentionParams::wf), as AttentionSpecs.cpp.
enum WeightFormat : int64_t { kF32 = 0, kBf16 = 1, kMxfp4 = 2, kFp8 = 3 };

struct AttentionKernel : KernelBody {
  using KernelBody::KernelBody;

  int64_t waves() const { return wg() / kWaveSize; }

  IrIndex c(int64_t v) { return ir.idx(v); }
  IrIndex index(Value i32Value) { return ir.idx(ir.toIndex(i32Value)); }
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

  MlaAttentionParams mla() const { return params<MlaAttentionParams>(spec); }

  int64_t kvbRows() const {
    MlaAttentionParams p = mla();
    return p.h * (p.n + p.v);
  }
  /// Argument types of kv_b: values, and scales for MXFP4.
  SmallVector<Type> kvbTypes() {
    int64_t rows = kvbRows(), l = mla().l;
    switch (int64_t(mla().wf)) {
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
    int64_t l = mla().l;
    switch (int64_t(mla().wf)) {
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
    int64_t l = mla().l;
    switch (int64_t(mla().wf)) {
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

  // -- Reductions and scans --------------------------------------------------

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

  // -- f32 MFMA tiles (MlaDecodeMfma.cpp, IndexerKernels.cpp) ----------------

  /// A thread's place in its wave's 16x16 MFMA tiles (MfmaLayout.h): lane
  /// group g = lane / 16 (K run and result rows 4 g ..), cl = lane % 16
  /// (operand row, result column).
  struct MfmaLane {
    IrIndex wave, g, cl;
  };
  MfmaLane mfmaLane() {
    IrIndex tid = ir.threadId();
    IrIndex lane = tid % kWaveSize;
    return {tid / kWaveSize, lane / kTile, lane % kTile};
  }
  Value zeros4() {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
  }
  /// acc[16x16] += a[16x4] b[4x16]^T, one f32 of each per lane.
  Value mfmaF32(Value a, Value bv, Value acc) {
    return amdgpu::MFMAOp::create(b, acc.getType(), 16, 16, 4, 1, a, bv, acc)
        .getResult();
  }
  /// acc += the 4 MFMAs of one 16-dim chunk: a4, b4 hold the lane's 4
  /// dims of its A row and B row (the same dims on both sides).
  Value mfmaChunk(Value a4, Value b4, Value acc) {
    for (int64_t e = 0; e < 4; ++e)
      acc = mfmaF32(vector::ExtractOp::create(b, a4, e),
                    vector::ExtractOp::create(b, b4, e), acc);
    return acc;
  }

  /// exp(x) through the hardware exp2.
  Value exp(Value x) {
    return ir.intrinsic("llvm.exp2", f32(), {mulf(x, ir.f32(kLog2e))});
  }

  // -- Paged caches -----------------------------------------------------------

  /// The last three arguments of every kernel that reads or writes a cache
  /// (AttentionKernels.cpp): i32 capacity (positions per sequence, a
  /// multiple of page_rows), i32 table[slots, capacity / page_rows] (the
  /// page id holding each page of each slot), i32 page_rows.
  struct Paging {
    Value capacity, table, pageRows;
  };
  SmallVector<Type> pagingTypes() {
    return {i32(), ir.activations(i32(), 1), i32()};
  }
  template <class Fn> Paging paging(Fn fn) {
    unsigned n = fn.getNumArguments();
    return {fn.getArgument(n - 3), fn.getArgument(n - 2),
            fn.getArgument(n - 1)};
  }
  /// Row of the cache (in rows of its width) holding position `pos` of slot
  /// `seq`: table[seq][pos / page_rows] * page_rows + pos % page_rows.
  IrIndex cacheRow(const Paging &p, Value seq, IrIndex pos) {
    IrIndex rowsPer = index(p.pageRows);
    IrIndex pagesPer = index(p.capacity) / rowsPer;
    Value page = ir.load(p.table, index(seq) * pagesPer + pos / rowsPer);
    return index(page) * rowsPer + pos % rowsPer;
  }

  // -- Kernels (AttentionKernels.cpp) ----------------------------------------

  void kvAppend();

  /// One (token, query head) of GQA or MLA stage 1.
  struct Attend {
    int64_t qHeads, kvHeads, keyDim, valueDim, keyWidth, valueWidth;
    int64_t listWidth; // 0: causal
    bool bf;
    float scale;
    Value q, keys, values, seqs, positions, list, out;
    Paging paging;
    // Workgroup buffers.
    Value qs, weights, rows, redMax, redSum, partial;
    /// Key splits (flash decoding): with keySplits > 1 workgroup z of the
    /// grid's third axis attends keys [z c, (z + 1) c), c = ceil(keys /
    /// keySplits), and writes [max, sum, unnormalized values] to `out` at
    /// ((t qHeads + h) keySplits + z) (valueDim + 2).
    int64_t keySplits = 0;
  };
  /// Workgroup buffer types of attend(), in Attend's order.
  SmallVector<Type> attendBuffers(int64_t keyDim, int64_t valueDim);
  void attend(const Attend &a);
  void gqa();
  void mlaAttend();
  void mlaAbsorb();
  void mlaExpand();
  void mlaCombine();
  void mlaAttendMfma(); // MlaDecodeMfma.cpp
  void build();

  // -- Indexer (IndexerKernels.cpp) ------------------------------------------

  /// Stage 0's function (both kernels) with q staged in LDS.
  struct IndexerScore {
    gpu::GPUFuncOp fn;
    Value wts, keys, scores, qs, seq;
    Paging paged;
  };
  IndexerScore indexerScoreBegin();
  void indexerScore();
  void indexerScoreMfma();
  Value orderKey(Value f);
  void indexerSelect();
};

} // namespace kiln::rocdl::attention

#endif // KILN_PASSES_CODEGEN_ROCDL_ATTENTIONKERNEL_H
