//===- GemmTiles.h - MFMA tile steps shared by the GEMM and MoE kernels ---===//
//
// The pieces of one wave's MFMA GEMM (MfmaLayout.h has every index): loading
// and quantizing activation rows, one K step of the MXFP4 recipe (gfx950:
// in-kernel MXFP4 activations + scaled MFMA; gfx942: weights dequantized to
// bf16 + bf16 MFMAs) and of the dense BF16 recipe, which also takes FP8
// block-scaled weights (Fp8Block128, decoded exactly to bf16 in registers).
// GemmKernels.cpp builds the plain GEMMs from them, DataKernels.cpp the
// fp8_gemm, MoeKernels.cpp the grouped expert GEMMs, which gather their rows
// and pick an expert's weights by offsetting the weight row or tile index
// (experts lie back to back).
//
// `spec` supplies the GEMM shape (n, k), the chip and the tiling; the K
// steps take any number of weights that share the activations (gate and up
// of an expert), accumulators ordered [weight][M tile][N tile].
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_GEMMTILES_H
#define KILN_PASSES_CODEGEN_ROCDL_GEMMTILES_H

#include "passes/codegen/rocdl/KernelIr.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

namespace kiln::rocdl {

/// State shared by both GEMM recipes.
struct GemmTiles : KernelBody {
  GemmTiles(mlir::ImplicitLocOpBuilder &b, const KernelSpec &spec,
            mlir::gpu::GPUModuleOp module = {})
      : KernelBody(b, spec, module), t(spec.tiling) {}
  GemmTiling t;

  /// Loads `count` f32 of row `row` from K `kElem` as vectors of 4. When
  /// `valid` is set, invalid lanes read an in-bounds address and get zeros.
  llvm::SmallVector<mlir::Value> loadActivations(mlir::Value x, IrIndex row,
                                                 IrIndex kElem, int64_t count,
                                                 mlir::Value valid) {
    using namespace mlir;
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
  void storeResults(mlir::Value y, IrIndex lane, IrIndex bx, IrIndex by,
                    IrIndex rows, llvm::ArrayRef<mlir::Value> acc) {
    using namespace mlir;
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

  mlir::Value zeroAcc() {
    using namespace mlir;
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(vec(4, f32()), 0.0f));
  }

  /// amdgpu.mfma 16x16xK bf16 (K = 4 * operand width).
  mlir::Value mfmaBf16(mlir::Value a, mlir::Value bv, mlir::Value c) {
    using namespace mlir;
    int64_t width = cast<VectorType>(a.getType()).getNumElements();
    return amdgpu::MFMAOp::create(b, c.getType(), 16, 16, uint32_t(4 * width),
                                  1, a, bv, c);
  }
};

/// One MXFP4 weight of a K step: packed data and scale words.
struct MxOperand {
  mlir::Value data, scales;
};

/// The MXFP4 recipe over MxWeightLayout::forShape(spec.n, spec.k).
struct MxTiles : GemmTiles {
  MxTiles(mlir::ImplicitLocOpBuilder &b, const KernelSpec &spec,
          mlir::gpu::GPUModuleOp module = {})
      : GemmTiles(b, spec, module),
        layout(MxWeightLayout::forShape(spec.n, spec.k)) {}
  MxWeightLayout layout;
  bool scaled() const { return chipInfo(spec.chip).scaledMfma; }

  /// The lane's MX block of activation row `row` in step `kStep`: on
  /// gfx950 quantized to (vector<32xf4E2M1FN>, f8E8M0FNU scale); on gfx942
  /// eight vector<4xbf16> (elements [4j, 4j + 4)).
  llvm::SmallVector<mlir::Value> activationBlock(mlir::Value x, IrIndex row,
                                                 IrIndex kStep, IrIndex lane) {
    using namespace mlir;
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
  llvm::SmallVector<mlir::Value> dequantizeBf16(mlir::Value chunk,
                                                mlir::Value e) {
    using namespace mlir;
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

  /// `count` K steps starting at scale word `kWord` for every weight of
  /// `weights`; `nTiles` are weight tile indices (an expert's tiles follow
  /// the previous expert's). Accumulators [weight][row][N tile].
  llvm::SmallVector<mlir::Value>
  steps(mlir::Value x, llvm::ArrayRef<MxOperand> weights, IrIndex lane,
        llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> nTiles,
        IrIndex kWord, int64_t count, mlir::ValueRange accIn) {
    using namespace mlir;
    SmallVector<Value> acc(accIn);
    SmallVector<Value> scaleWords;
    for (const MxOperand &w : weights)
      for (IrIndex nt : nTiles)
        scaleWords.push_back(
            ir.load(w.scales, layout.scaleWord(nt, kWord, lane)));
    size_t perWeight = rows.size() * nTiles.size();
    for (int64_t j = 0; j < count; ++j) {
      IrIndex kStep = kWord * kMxStepsPerScaleWord + j;
      SmallVector<SmallVector<Value>> a;
      for (IrIndex row : rows)
        a.push_back(activationBlock(x, row, kStep, lane));
      for (size_t wi = 0; wi < weights.size(); ++wi)
        for (size_t nt = 0; nt < nTiles.size(); ++nt) {
          Value chunk = ir.load(weights[wi].data,
                                layout.dataChunk(nTiles[nt], kStep, lane));
          Value scaleWord = scaleWords[wi * nTiles.size() + nt];
          int64_t opSel = MxWeightLayout::scaleByte(j);
          SmallVector<Value> bBf16;
          Value bFp4, bScales;
          if (scaled()) {
            bFp4 = vector::BitCastOp::create(
                b, vec(32, b.getType<Float4E2M1FNType>()), chunk);
            bScales = vector::BitCastOp::create(
                b, vec(4, b.getType<Float8E8M0FNUType>()),
                vector::BroadcastOp::create(b, vec(1, b.getI32Type()),
                                            scaleWord));
          } else {
            Value e = arith::AndIOp::create(
                b, arith::ShRUIOp::create(b, scaleWord, ir.i32(8 * opSel)),
                ir.i32(0xFF));
            bBf16 = dequantizeBf16(chunk, e);
          }
          for (size_t mt = 0; mt < rows.size(); ++mt) {
            Value &c = acc[wi * perWeight + mt * nTiles.size() + nt];
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

  /// The whole K loop (scale words in an scf.for, the tail unrolled).
  llvm::SmallVector<mlir::Value>
  kLoop(mlir::Value x, llvm::ArrayRef<MxOperand> weights, IrIndex lane,
        llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> nTiles,
        llvm::SmallVector<mlir::Value> acc) {
    using namespace mlir;
    int64_t fullWords = layout.kSteps / kMxStepsPerScaleWord;
    int64_t tail = layout.kSteps % kMxStepsPerScaleWord;
    if (fullWords > 0)
      acc = ir.forLoop(ir.idx(0), ir.idx(fullWords), 1, acc,
                       [&](IrIndex kWord, ValueRange in) {
                         return steps(x, weights, lane, rows, nTiles, kWord,
                                      kMxStepsPerScaleWord, in);
                       });
    if (tail > 0)
      acc = steps(x, weights, lane, rows, nTiles, ir.idx(fullWords), tail, acc);
    return acc;
  }
};

/// The dense BF16 recipe: W bf16 [N, K] row-major (or stacks of them), or,
/// with `fp8` set, Fp8Block128 weights decoded exactly to bf16 in registers.
struct Bf16Tiles : GemmTiles {
  using GemmTiles::GemmTiles;
  /// K steps per loop iteration.
  static constexpr int64_t kUnroll = 4;
  /// Rows and columns of W per FP8 scale.
  static constexpr int64_t kFp8Block = 128;

  /// FP8 block-scaled weights (Fp8Block128): the `weights` of step / kLoop
  /// are then q F8E4M3FN [N, K] bytes (an i8 memref, or, for expert stacks
  /// [E, N, K], one of vector<8xi8>: 32-bit indices count vectors) and
  /// `scales[i]` weight i's f32 [ceil(N/128), ceil(K/128)] (stacked per
  /// matrix); W = q * s. With `matrix` set, the weight rows of the steps are
  /// rows of that matrix of each stack.
  struct Fp8 {
    llvm::SmallVector<mlir::Value> scales;
    std::optional<IrIndex> matrix;
  };
  std::optional<Fp8> fp8;

  /// The 8 bf16 at element `offset` of `w`: a bf16 memref, or one of
  /// vector<8xbf16> (large expert stacks: 32-bit indices count vectors).
  mlir::Value loadWeight8(mlir::Value w, IrIndex offset) {
    using namespace mlir;
    auto type = cast<MemRefType>(w.getType());
    if (isa<VectorType>(type.getElementType()))
      return ir.load(w, offset / 8);
    return ir.loadVector(vec(8, b.getBF16Type()), w, offset);
  }

  /// One E4M3FN byte as f32, exactly, with integer ops (no FP8 conversion
  /// instructions: gfx942's are FNUZ): normals by moving the fields into
  /// place and rebiasing the exponent (+120), subnormals (exponent field 0)
  /// as m * 2^-9. The NaN code (S.1111.111) is not special-cased:
  /// checkpoints hold none.
  mlir::Value decodeFp8(mlir::Value byte) {
    using namespace mlir;
    Type i32 = b.getI32Type();
    Value v = arith::ExtUIOp::create(b, i32, byte);
    Value mag = arith::AndIOp::create(b, v, ir.i32(0x7f));
    Value normal = arith::BitcastOp::create(
        b, f32(),
        arith::AddIOp::create(b, arith::ShLIOp::create(b, mag, ir.i32(20)),
                              ir.i32(int64_t(120) << 23)));
    Value subnormal = arith::MulFOp::create(
        b, arith::UIToFPOp::create(b, f32(), mag), ir.f32(0x1p-9f));
    Value isSub =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, mag, ir.i32(8));
    Value f = arith::SelectOp::create(b, isSub, subnormal, normal);
    Value sign = arith::ShLIOp::create(
        b, arith::AndIOp::create(b, v, ir.i32(0x80)), ir.i32(24));
    return arith::BitcastOp::create(
        b, f32(),
        arith::OrIOp::create(b, arith::BitcastOp::create(b, i32, f), sign));
  }

  /// The 8 bf16 of FP8 weight (q, scales) the lane supplies for row `row`
  /// in `kStep` (one dwordx2 load), each decoded, times its block's scale,
  /// rounded to bf16.
  mlir::Value fp8Weight8(mlir::Value q, mlir::Value scales, IrIndex row,
                         IrIndex kStep, IrIndex lane) {
    using namespace mlir;
    IrIndex kElem = kStep * kBf16StepK + operandKGroup(lane) * kBf16LaneK;
    Value bytes;
    if (isa<VectorType>(cast<MemRefType>(q.getType()).getElementType())) {
      IrIndex wRow = fp8->matrix ? *fp8->matrix * spec.n + row : row;
      bytes = ir.load(q, wRow * (spec.k / 8) + kStep * (kBf16StepK / 8) +
                             operandKGroup(lane) * (kBf16LaneK / 8));
    } else {
      bytes = ir.loadVector(vec(8, b.getI8Type()), q,
                            bf16WeightOffset(row, kStep, lane, spec.k));
    }
    int64_t kBlocks = ceilDiv(spec.k, kFp8Block);
    IrIndex scaleIdx = row / kFp8Block * kBlocks + kElem / kFp8Block;
    if (fp8->matrix)
      scaleIdx =
          *fp8->matrix * (ceilDiv(spec.n, kFp8Block) * kBlocks) + scaleIdx;
    Value s = ir.load(scales, scaleIdx);
    SmallVector<Value> w;
    for (int64_t e = 0; e < 8; ++e)
      w.push_back(arith::MulFOp::create(
          b, decodeFp8(vector::ExtractOp::create(b, bytes, e)), s));
    Value wf = vector::FromElementsOp::create(b, vec(8, f32()), w);
    return arith::TruncFOp::create(b, vec(8, b.getBF16Type()), wf);
  }

  /// One K step for every weight of `weights` (rows `wRows` of each).
  llvm::SmallVector<mlir::Value>
  step(mlir::Value x, llvm::ArrayRef<mlir::Value> weights, IrIndex lane,
       llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> wRows,
       IrIndex kStep, mlir::ValueRange accIn) {
    using namespace mlir;
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
    size_t perWeight = rows.size() * wRows.size();
    for (size_t wi = 0; wi < weights.size(); ++wi)
      for (size_t nt = 0; nt < wRows.size(); ++nt) {
        Value wv =
            fp8 ? fp8Weight8(weights[wi], fp8->scales[wi], wRows[nt], kStep,
                             lane)
                : loadWeight8(weights[wi],
                              bf16WeightOffset(wRows[nt], kStep, lane, spec.k));
        Value lo =
            vector::ShuffleOp::create(b, wv, wv, ArrayRef<int64_t>{0, 1, 2, 3});
        Value hi =
            vector::ShuffleOp::create(b, wv, wv, ArrayRef<int64_t>{4, 5, 6, 7});
        for (size_t mt = 0; mt < rows.size(); ++mt) {
          Value &c = acc[wi * perWeight + mt * wRows.size() + nt];
          if (k32) {
            Value av = vector::ShuffleOp::create(
                b, a[mt][0], a[mt][1],
                ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
            c = mfmaBf16(av, wv, c);
          } else {
            c = mfmaBf16(a[mt][0], lo, c);
            c = mfmaBf16(a[mt][1], hi, c);
          }
        }
      }
    return acc;
  }

  /// The whole K loop (kUnroll steps per scf.for iteration, the rest
  /// unrolled).
  llvm::SmallVector<mlir::Value>
  kLoop(mlir::Value x, llvm::ArrayRef<mlir::Value> weights, IrIndex lane,
        llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> wRows,
        llvm::SmallVector<mlir::Value> acc) {
    using namespace mlir;
    int64_t kSteps = spec.k / kBf16StepK;
    int64_t full = kSteps / kUnroll;
    if (full > 0)
      acc = ir.forLoop(
          ir.idx(0), ir.idx(full), 1, acc, [&](IrIndex it, ValueRange in) {
            SmallVector<Value> cur(in);
            for (int64_t u = 0; u < kUnroll; ++u)
              cur = step(x, weights, lane, rows, wRows, it * kUnroll + u, cur);
            return cur;
          });
    for (int64_t s = full * kUnroll; s < kSteps; ++s)
      acc = step(x, weights, lane, rows, wRows, ir.idx(s), acc);
    return acc;
  }
};

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_GEMMTILES_H
