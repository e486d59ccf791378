//===- GemmKernels.cpp - MXFP4 and BF16 GEMMs on MFMA ---------------------===//
//
// y[M, N] = x[M, K] * W^T, f32 activations in and out, one wave per
// workgroup computing tiling.mTiles x tiling.nTiles 16x16 tiles, K in steps
// (MfmaLayout.h has every index used here).
//
// MXFP4 (mx_gemm):
//  * gfx950: the activations are quantized to MXFP4 in the kernel, one MX
//    block per lane and step, with Quark's "even" scale rule and the
//    hardware's round-to-nearest-even converter (v_cvt_scalef32_pk_fp4_f32).
//    This is the W4A4 recipe the Quark MXFP4 checkpoints are calibrated for
//    (dynamic MXFP4 activations); each block costs ~80 VALU and is reused by
//    every N tile of the wave. Then one v_mfma_scale_f32_16x16x128_f8f6f4
//    per tile pair and step, the weight scale picked from the lane's scale
//    word with op_sel.
//  * gfx942 (no FP4): activations become bf16 (round to nearest even), the
//    weights are dequantized to bf16 in registers with the exact bit trick of
//    AMDGPU.md section 7, and eight v_mfma_f32_16x16x16_bf16 cover a step.
// Dense BF16 (bf16_gemm): W is bf16 [N, K] row-major; one 16x16x32 bf16
// MFMA per step on gfx950, two 16x16x16 on gfx942.
//
// Rows past M and columns past N are clamped for loads (their results are
// never stored), so the K loop has no branches.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelIr.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln::rocdl;

namespace {

/// State shared by both GEMM bodies.
struct Gemm {
  Gemm(ImplicitLocOpBuilder &b, const KernelSpec &spec)
      : ir(b), b(b), spec(spec), t(spec.tiling) {}
  KernelIr ir;
  ImplicitLocOpBuilder &b;
  const KernelSpec &spec;
  GemmTiling t;

  Type f32() { return b.getF32Type(); }
  VectorType vec(int64_t n, Type elem) { return VectorType::get({n}, elem); }

  /// Loads `count` f32 of row `row` from K `kElem` as vectors of 4. When
  /// `valid` is set, invalid lanes read an in-bounds address and get zeros.
  SmallVector<Value> loadActivations(Value x, IrIndex row, IrIndex kElem,
                                     int64_t count, Value valid) {
    IrIndex base = row * spec.k + kElem;
    SmallVector<Value> parts;
    Value zero;
    if (valid)
      zero = arith::ConstantOp::create(
          b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
    for (int64_t i = 0; i < count; i += 4) {
      Value v = ir.loadVector(vec(4, f32()), x, base + i);
      if (valid)
        v = arith::SelectOp::create(b, valid, v, zero);
      parts.push_back(v);
    }
    return parts;
  }

  /// Stores the accumulators: tile (mt, nt) element i of this lane goes to
  /// y[tileRow + resultRow(lane, i)][16 * tileCol + resultCol(lane)].
  void storeResults(Value y, IrIndex lane, IrIndex bx, IrIndex by, IrIndex rows,
                    ArrayRef<Value> acc) {
    for (int64_t mt = 0; mt < t.mTiles; ++mt)
      for (int64_t nt = 0; nt < t.nTiles; ++nt) {
        IrIndex col = t.tileCol(bx, nt) * kTile + resultCol(lane);
        Value colOk = ir.ult(col, ir.idx(spec.n));
        Value tile = acc[mt * t.nTiles + nt];
        for (int64_t i = 0; i < 4; ++i) {
          IrIndex row = t.tileRow(by, mt) + resultRow(lane, i);
          Value ok = arith::AndIOp::create(b, colOk, ir.ult(row, rows));
          ir.ifThen(ok, [&] {
            Value v = vector::ExtractOp::create(b, tile, i);
            ir.store(v, y, row * spec.n + col);
          });
        }
      }
  }

  Value zeroAcc() {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
  }

  /// amdgpu.mfma 16x16xK bf16 (K = 4 * operand width).
  Value mfmaBf16(Value a, Value bv, Value c) {
    int64_t width = cast<VectorType>(a.getType()).getNumElements();
    return amdgpu::MFMAOp::create(b, c.getType(), 16, 16, uint32_t(4 * width),
                                  1, a, bv, c);
  }
};

//===----------------------------------------------------------------------===//
// MXFP4
//===----------------------------------------------------------------------===//

struct MxGemm : Gemm {
  MxGemm(ImplicitLocOpBuilder &b, const KernelSpec &spec)
      : Gemm(b, spec), layout(MxWeightLayout::forShape(spec.n, spec.k)) {}
  MxWeightLayout layout;
  bool scaled() const { return chipInfo(spec.chip).scaledMfma; }

  /// The lane's MX block of activation row `row` in step `kStep`: on
  /// gfx950 quantized to (vector<32xf4E2M1FN>, f8E8M0FNU scale); on gfx942
  /// eight vector<4xbf16> (elements [4j, 4j + 4)).
  SmallVector<Value> activationBlock(Value x, IrIndex row, IrIndex kStep,
                                     IrIndex lane) {
    IrIndex kElem = mxLaneK(kStep, lane);
    Value valid;
    if (spec.k % kMxStepK != 0) {
      // Only the last step has lanes past K (K is a multiple of 32, so a
      // lane's block is all in or all out); they read the row's last block.
      valid = ir.ult(kElem, ir.idx(spec.k));
      kElem = ir.min(kElem, ir.idx(spec.k - kMxLaneK));
    }
    SmallVector<Value> parts = loadActivations(x, row, kElem, kMxLaneK, valid);
    if (!scaled()) {
      SmallVector<Value> out;
      for (Value p : parts)
        out.push_back(arith::TruncFOp::create(b, vec(4, b.getBF16Type()), p));
      return out;
    }
    // Scale: Quark "even" -- round amax to E2M1 precision, then
    // floor(log2) - 2, as a biased E8M0 exponent clamped to [0, 254].
    Value amax;
    for (Value p : parts) {
      Value m = vector::ReductionOp::create(b, vector::CombiningKind::MAXNUMF,
                                            math::AbsFOp::create(b, p));
      amax = amax ? arith::MaxNumFOp::create(b, amax, m).getResult() : m;
    }
    Value bits = arith::BitcastOp::create(b, b.getI32Type(), amax);
    bits = arith::AddIOp::create(b, bits, ir.i32(0x200000));
    Value biased = arith::ShRUIOp::create(
        b, arith::AndIOp::create(b, bits, ir.i32(0x7F800000)), ir.i32(23));
    Value e = arith::SubIOp::create(b, biased, ir.i32(2));
    e = arith::MaxSIOp::create(b, e, ir.i32(0));
    e = arith::MinSIOp::create(b, e, ir.i32(254));
    // The converter divides by the scale and reads only its exponent.
    Value scaleF = arith::BitcastOp::create(
        b, f32(), arith::ShLIOp::create(b, e, ir.i32(23)));
    Type fp4x8 = vec(8, b.getType<Float4E2M1FNType>());
    SmallVector<Value> words;
    for (int64_t w = 0; w < 4; ++w) {
      Value word;
      for (int64_t pair = 0; pair < 4; ++pair) {
        int64_t elem = w * 8 + pair * 2; // 2 of the 32 f32
        Value src = vector::ShuffleOp::create(
            b, parts[elem / 4], parts[elem / 4],
            ArrayRef<int64_t>{elem % 4, elem % 4 + 1});
        word = amdgpu::PackedScaledTruncOp::create(b, fp4x8, src, scaleF,
                                                   uint32_t(pair), word);
      }
      Value asI32 = vector::BitCastOp::create(b, vec(1, b.getI32Type()), word);
      words.push_back(vector::ExtractOp::create(b, asI32, 0));
    }
    Value packed =
        vector::FromElementsOp::create(b, vec(4, b.getI32Type()), words);
    Value fp4 = vector::BitCastOp::create(
        b, vec(32, b.getType<Float4E2M1FNType>()), packed);
    Value scale =
        arith::BitcastOp::create(b, b.getType<Float8E8M0FNUType>(),
                                 arith::TruncIOp::create(b, b.getI8Type(), e));
    return {fp4, scale};
  }

  /// gfx942: the 32 FP4 of `chunk` (vector<4xi32>) times 2^(e - 127) as
  /// eight vector<4xbf16>. Per element: f32 bits (s << 31) | (em << 22) are
  /// e2m1 * 2^-126, ldexp by e - 1 gives the value exactly (denormals are
  /// kept), and its top 16 bits are the exact bf16.
  SmallVector<Value> dequantizeBf16(Value chunk, Value e) {
    Value shift = arith::SubIOp::create(b, e, ir.i32(1));
    SmallVector<Value> out;
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::ExtractOp::create(b, chunk, w);
      for (int64_t half = 0; half < 2; ++half) {
        SmallVector<Value> elems;
        for (int64_t p = half * 4; p < half * 4 + 4; ++p) {
          Value c = arith::AndIOp::create(
              b, arith::ShRUIOp::create(b, word, ir.i32(4 * p)), ir.i32(0xF));
          Value sign = arith::ShLIOp::create(
              b, arith::AndIOp::create(b, c, ir.i32(8)), ir.i32(28));
          Value em = arith::ShLIOp::create(
              b, arith::AndIOp::create(b, c, ir.i32(7)), ir.i32(22));
          Value f = arith::BitcastOp::create(b, f32(),
                                             arith::OrIOp::create(b, sign, em));
          f = ir.intrinsic("llvm.ldexp.f32.i32", f32(), {f, shift});
          Value hi = arith::ShRUIOp::create(
              b, arith::BitcastOp::create(b, b.getI32Type(), f), ir.i32(16));
          elems.push_back(arith::BitcastOp::create(
              b, b.getBF16Type(),
              arith::TruncIOp::create(b, b.getI16Type(), hi)));
        }
        out.push_back(
            vector::FromElementsOp::create(b, vec(4, b.getBF16Type()), elems));
      }
    }
    return out;
  }

  /// `count` K steps starting at scale word `kWord`.
  SmallVector<Value> steps(Value x, Value wq, Value ws, IrIndex lane,
                           ArrayRef<IrIndex> rows, ArrayRef<IrIndex> nTiles,
                           IrIndex kWord, int64_t count, ValueRange accIn) {
    SmallVector<Value> acc(accIn);
    SmallVector<Value> scaleWords;
    for (IrIndex nt : nTiles)
      scaleWords.push_back(ir.load(ws, layout.scaleWord(nt, kWord, lane)));
    for (int64_t j = 0; j < count; ++j) {
      IrIndex kStep = kWord * kMxStepsPerScaleWord + j;
      SmallVector<SmallVector<Value>> a;
      for (IrIndex row : rows)
        a.push_back(activationBlock(x, row, kStep, lane));
      for (size_t nt = 0; nt < nTiles.size(); ++nt) {
        Value chunk = ir.load(wq, layout.dataChunk(nTiles[nt], kStep, lane));
        int64_t opSel = MxWeightLayout::scaleByte(j);
        SmallVector<Value> bBf16;
        Value bFp4, bScales;
        if (scaled()) {
          bFp4 = vector::BitCastOp::create(
              b, vec(32, b.getType<Float4E2M1FNType>()), chunk);
          bScales = vector::BitCastOp::create(
              b, vec(4, b.getType<Float8E8M0FNUType>()),
              vector::BroadcastOp::create(b, vec(1, b.getI32Type()),
                                          scaleWords[nt]));
        } else {
          Value e = arith::AndIOp::create(
              b, arith::ShRUIOp::create(b, scaleWords[nt], ir.i32(8 * opSel)),
              ir.i32(0xFF));
          bBf16 = dequantizeBf16(chunk, e);
        }
        for (size_t mt = 0; mt < rows.size(); ++mt) {
          Value &c = acc[mt * nTiles.size() + nt];
          if (scaled()) {
            c = amdgpu::ScaledMFMAOp::create(
                b, c.getType(), b.getI32IntegerAttr(16),
                b.getI32IntegerAttr(16), b.getI32IntegerAttr(kMxStepK),
                a[mt][0], bFp4, c, a[mt][1], bScales, b.getI32IntegerAttr(0),
                b.getI32IntegerAttr(int32_t(opSel)));
          } else {
            for (int64_t q = 0; q < kMxLaneK / kBf16K16LaneK; ++q)
              c = mfmaBf16(a[mt][q], bBf16[q], c);
          }
        }
      }
    }
    return acc;
  }

  void build(gpu::GPUModuleOp module) {
    Type i32 = b.getI32Type();
    SmallVector<Type> args = {ir.activations(f32(), spec.k),
                              ir.global(vec(4, i32), layout.dataBytes() / 16),
                              ir.global(i32, layout.scaleBytes() / 4),
                              ir.activations(f32(), spec.n), i32};
    auto fn = createKernelFunc(b, module, spec, args);
    Value x = fn.getArgument(0), wq = fn.getArgument(1), ws = fn.getArgument(2),
          y = fn.getArgument(3);
    IrIndex rows = ir.idx(ir.toIndex(fn.getArgument(4)));
    IrIndex lane = ir.threadId();
    IrIndex bx = ir.blockId(gpu::Dimension::x);
    IrIndex by = ir.blockId(gpu::Dimension::y);
    IrIndex lastRow = rows - 1;
    SmallVector<IrIndex> rowIdx, nTileIdx;
    for (int64_t mt = 0; mt < t.mTiles; ++mt)
      rowIdx.push_back(ir.min(t.tileRow(by, mt) + operandRow(lane), lastRow));
    for (int64_t nt = 0; nt < t.nTiles; ++nt)
      nTileIdx.push_back(ir.min(t.tileCol(bx, nt), ir.idx(layout.nTiles - 1)));

    SmallVector<Value> acc(t.mTiles * t.nTiles, zeroAcc());
    int64_t fullWords = layout.kSteps / kMxStepsPerScaleWord;
    int64_t tail = layout.kSteps % kMxStepsPerScaleWord;
    if (fullWords > 0)
      acc = ir.forLoop(ir.idx(0), ir.idx(fullWords), 1, acc,
                       [&](IrIndex kWord, ValueRange in) {
                         return steps(x, wq, ws, lane, rowIdx, nTileIdx, kWord,
                                      kMxStepsPerScaleWord, in);
                       });
    if (tail > 0)
      acc = steps(x, wq, ws, lane, rowIdx, nTileIdx, ir.idx(fullWords), tail,
                  acc);
    storeResults(y, lane, bx, by, rows, acc);
    gpu::ReturnOp::create(b);
  }
};

//===----------------------------------------------------------------------===//
// Dense BF16
//===----------------------------------------------------------------------===//

struct Bf16Gemm : Gemm {
  using Gemm::Gemm;
  /// K steps per loop iteration.
  static constexpr int64_t kUnroll = 4;

  SmallVector<Value> step(Value x, Value w, IrIndex lane,
                          ArrayRef<IrIndex> rows, ArrayRef<IrIndex> wRows,
                          IrIndex kStep, ValueRange accIn) {
    SmallVector<Value> acc(accIn);
    Type bf16 = b.getBF16Type();
    bool k32 = chipInfo(spec.chip).bf16K32;
    // A: 8 f32 of the lane's run as two vector<4xbf16>.
    SmallVector<SmallVector<Value>> a;
    for (IrIndex row : rows) {
      SmallVector<Value> parts = loadActivations(
          x, row, kStep * kBf16StepK + operandKGroup(lane) * kBf16LaneK,
          kBf16LaneK, Value());
      for (Value &p : parts)
        p = arith::TruncFOp::create(b, vec(4, bf16), p);
      a.push_back(parts);
    }
    for (size_t nt = 0; nt < wRows.size(); ++nt) {
      Value wv = ir.loadVector(
          vec(8, bf16), w, bf16WeightOffset(wRows[nt], kStep, lane, spec.k));
      Value lo =
          vector::ShuffleOp::create(b, wv, wv, ArrayRef<int64_t>{0, 1, 2, 3});
      Value hi =
          vector::ShuffleOp::create(b, wv, wv, ArrayRef<int64_t>{4, 5, 6, 7});
      for (size_t mt = 0; mt < rows.size(); ++mt) {
        Value &c = acc[mt * wRows.size() + nt];
        if (k32) {
          Value av = vector::ShuffleOp::create(
              b, a[mt][0], a[mt][1], ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
          c = mfmaBf16(av, wv, c);
        } else {
          c = mfmaBf16(a[mt][0], lo, c);
          c = mfmaBf16(a[mt][1], hi, c);
        }
      }
    }
    return acc;
  }

  void build(gpu::GPUModuleOp module) {
    Type i32 = b.getI32Type();
    SmallVector<Type> args = {ir.activations(f32(), spec.k),
                              ir.global(b.getBF16Type(), spec.n * spec.k),
                              ir.activations(f32(), spec.n), i32};
    auto fn = createKernelFunc(b, module, spec, args);
    Value x = fn.getArgument(0), w = fn.getArgument(1), y = fn.getArgument(2);
    IrIndex rows = ir.idx(ir.toIndex(fn.getArgument(3)));
    IrIndex lane = ir.threadId();
    IrIndex bx = ir.blockId(gpu::Dimension::x);
    IrIndex by = ir.blockId(gpu::Dimension::y);
    SmallVector<IrIndex> rowIdx, wRows;
    for (int64_t mt = 0; mt < t.mTiles; ++mt)
      rowIdx.push_back(ir.min(t.tileRow(by, mt) + operandRow(lane), rows - 1));
    for (int64_t nt = 0; nt < t.nTiles; ++nt)
      wRows.push_back(ir.min(t.tileCol(bx, nt) * kTile + operandRow(lane),
                             ir.idx(spec.n - 1)));

    SmallVector<Value> acc(t.mTiles * t.nTiles, zeroAcc());
    int64_t kSteps = spec.k / kBf16StepK;
    int64_t full = kSteps / kUnroll;
    if (full > 0)
      acc = ir.forLoop(
          ir.idx(0), ir.idx(full), 1, acc, [&](IrIndex it, ValueRange in) {
            SmallVector<Value> cur(in);
            for (int64_t u = 0; u < kUnroll; ++u)
              cur = step(x, w, lane, rowIdx, wRows, it * kUnroll + u, cur);
            return cur;
          });
    for (int64_t s = full * kUnroll; s < kSteps; ++s)
      acc = step(x, w, lane, rowIdx, wRows, ir.idx(s), acc);
    storeResults(y, lane, bx, by, rows, acc);
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildMxGemm(gpu::GPUModuleOp module, const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  MxGemm(b, spec).build(module);
}

void kiln::rocdl::buildBf16Gemm(gpu::GPUModuleOp module,
                                const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  Bf16Gemm(b, spec).build(module);
}
