//===- Fp8Tiles.h - The native FP8 GEMM recipe (W8A8, block scales) -------===//
//
// Fp8Block128 weights (E4M3FN bytes, one f32 scale per 128 x 128 block) fed
// to the FP8 MFMAs as they are, with the activations quantized in the
// kernel to E4M3FN per 1 x 128 block of K (DeepSeek-V3's recipe: s = amax /
// 448). The kernels select it with the qa parameter (fp8_gemm, moe_gate_up,
// moe_down; kiln-compile --gpu-fp8-gemm=fp8); docs/gpu.md "Numerics".
//
// One K step is one 128-K block, which is one weight scale column and one
// activation scale per row. Lane l supplies row l % 16 of A and of B and
// the 32 contiguous K [32 (l / 16), +32) of the block (MfmaLayout.h fact 1:
// A and B share the lane -> K map, so the instructions' own split of the
// 32 bytes over K does not change the dot products):
//  * gfx950: one v_mfma_f32_16x16x128_f8f6f4 (E4M3 x E4M3, OCP encoding)
//    per tile and block, the f8f6f4 form at twice the rate of the older
//    16x16x32 FP8 MFMA;
//  * gfx942: four v_mfma_f32_16x16x32_fp8_fp8 (bytes [8j, 8j + 8) of each
//    lane). Its FP8 is E4M3FNUZ: the same code read as FNUZ is half the
//    E4M3FN value (bias 8), so the codes are used unchanged, the -0 code
//    0x80 (NaN in FNUZ) is cleared to +0 in the weights and never produced
//    for the activations, and the product is scaled by 4 with the block
//    scales.
// The MFMA's f32 partial sum P of the block (zero-started) is added to the
// accumulator as fma(P, s_a(row) * s_w(column block), acc), the row's
// activation scale moved from the lane that quantized it with a shuffle.
// K past the matrix (K a multiple of 32, not of 128) is zeros in both
// operands of the last block.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_FP8TILES_H
#define KILN_PASSES_CODEGEN_ROCDL_FP8TILES_H

#include "passes/codegen/rocdl/GemmTiles.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln::rocdl {

struct Fp8Tiles : GemmTiles {
  /// K (and weight rows) per scale.
  static constexpr int64_t kBlock = 128;
  /// K of a block each lane supplies.
  static constexpr int64_t kLaneK = kBlock / kLaneGroups;
  /// The largest E4M3FN magnitude: a block's amax maps to it.
  static constexpr float kFp8Max = 448.0f;

  /// `weights` of block / kLoop: q E4M3FN [N, K] bytes (an i8 memref, or,
  /// for expert stacks [E, N, K], one of vector<8xi8>: 32-bit indices count
  /// vectors); `scales[i]` weight i's f32 [ceil(N/128), ceil(K/128)]
  /// (stacked per matrix). With `matrix` set, the weight rows are rows of
  /// that matrix of each stack.
  Fp8Tiles(mlir::ImplicitLocOpBuilder &b, const KernelSpec &spec,
           llvm::ArrayRef<mlir::Value> scales,
           std::optional<IrIndex> matrix = std::nullopt,
           mlir::gpu::GPUModuleOp module = {})
      : GemmTiles(b, spec, module), scales(scales), matrix(matrix) {}
  llvm::SmallVector<mlir::Value> scales;
  std::optional<IrIndex> matrix;

  /// gfx950's 16x16x128 f8f6f4 MFMA (the chips with the scaled MFMA have
  /// it); else four 16x16x32 FP8 MFMAs per block.
  bool k128() const { return chipInfo(spec.chip).scaledMfma; }
  int64_t kBlocks() const { return ceilDiv(spec.k, kBlock); }

  mlir::Type fp8() {
    if (k128())
      return b.getType<mlir::Float8E4M3FNType>();
    return b.getType<mlir::Float8E4M3FNUZType>();
  }

  /// Eight i32 (32 codes, little-endian) as the MFMA operands of a block.
  llvm::SmallVector<mlir::Value> operands(llvm::ArrayRef<mlir::Value> words) {
    using namespace mlir;
    int64_t per = k128() ? 8 : 2;
    SmallVector<Value> out;
    for (size_t w = 0; w < words.size(); w += per) {
      Value v = vector::FromElementsOp::create(b, vec(per, i32()),
                                               words.slice(w, per));
      out.push_back(vector::BitCastOp::create(b, vec(4 * per, fp8()), v));
    }
    return out;
  }

  /// First K of the lane's run in block `blk`, clamped into the row for the
  /// lanes past K of a partial last block (`valid` then says which are in).
  IrIndex laneK(IrIndex blk, IrIndex lane, bool tail, mlir::Value &valid) {
    IrIndex kElem = blk * kBlock + operandKGroup(lane) * kLaneK;
    if (tail) {
      valid = ir.ult(kElem, ir.idx(spec.k));
      kElem = ir.min(kElem, ir.idx(spec.k - kLaneK));
    }
    return kElem;
  }

  /// The lane's 32 activations of row `row` in block `blk`, quantized:
  /// the MFMA operands and the row's scale amax / 448 (f32). Each element
  /// is rounded to nearest even from x * (448 / amax) (x * 224 / amax into
  /// FNUZ on gfx942: the same codes); an all-zero block has scale 0.
  std::pair<llvm::SmallVector<mlir::Value>, mlir::Value>
  activations(mlir::Value x, IrIndex row, IrIndex blk, IrIndex lane,
              bool tail) {
    using namespace mlir;
    Value valid;
    IrIndex kElem = laneK(blk, lane, tail, valid);
    SmallVector<Value> parts = loadActivations(x, row, kElem, kLaneK, valid);
    Value amax;
    for (Value p : parts) {
      Value m = vector::ReductionOp::create(b, vector::CombiningKind::MAXNUMF,
                                            math::AbsFOp::create(b, p));
      amax = amax ? arith::MaxNumFOp::create(b, amax, m).getResult() : m;
    }
    // The four lane groups hold the row's four quarters of the block.
    for (int32_t offset : {16, 32}) {
      Value other = gpu::ShuffleOp::create(b, amax, offset, int32_t(kWaveSize),
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      amax = arith::MaxNumFOp::create(b, amax, other);
    }
    Value zero = ir.f32(0.0f);
    Value positive =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, amax, zero);
    float top = k128() ? kFp8Max : kFp8Max / 2;
    Value inv = arith::SelectOp::create(
        b, positive, arith::DivFOp::create(b, ir.f32(top), amax), zero);
    Value scale = arith::DivFOp::create(b, amax, ir.f32(kFp8Max));
    Value invV = vector::BroadcastOp::create(b, vec(4, f32()), inv);
    Type packed = vec(4, fp8());
    SmallVector<Value> words;
    for (Value p : parts) {
      Value y = arith::MulFOp::create(b, p, invV);
      Value e[4];
      for (int64_t i = 0; i < 4; ++i)
        e[i] = vector::ExtractOp::create(b, y, i);
      Value w =
          amdgpu::PackedTrunc2xFp8Op::create(b, packed, e[0], e[1], 0, Value());
      w = amdgpu::PackedTrunc2xFp8Op::create(b, packed, e[2], e[3], 1, w);
      Value asI32 = vector::BitCastOp::create(b, vec(1, i32()), w);
      words.push_back(vector::ExtractOp::create(b, asI32, 0));
    }
    return {operands(words), scale};
  }

  /// The lane's 32 weight codes of row `row` in block `blk` as operands.
  llvm::SmallVector<mlir::Value> weightBlock(mlir::Value q, IrIndex row,
                                             IrIndex blk, IrIndex lane,
                                             bool tail) {
    using namespace mlir;
    Value valid;
    IrIndex kElem = laneK(blk, lane, tail, valid);
    IrIndex wRow = matrix ? *matrix * spec.n + row : row;
    SmallVector<Value> words;
    if (isa<VectorType>(cast<MemRefType>(q.getType()).getElementType())) {
      IrIndex base = wRow * (spec.k / 8) + kElem / 8;
      for (int64_t i = 0; i < kLaneK / 8; ++i) {
        Value v =
            vector::BitCastOp::create(b, vec(2, i32()), ir.load(q, base + i));
        for (int64_t j = 0; j < 2; ++j)
          words.push_back(vector::ExtractOp::create(b, v, j));
      }
    } else {
      Value v = vector::BitCastOp::create(
          b, vec(8, i32()),
          ir.loadVector(vec(kLaneK, b.getI8Type()), q, wRow * spec.k + kElem));
      for (int64_t j = 0; j < 8; ++j)
        words.push_back(vector::ExtractOp::create(b, v, j));
    }
    for (Value &w : words) {
      if (valid)
        w = arith::SelectOp::create(b, valid, w, ir.i32(0));
      if (!k128()) {
        // Bytes 0x80 (-0; NaN as FNUZ) to +0: a byte keeps its sign bit
        // only where its magnitude is nonzero (the add cannot carry).
        Value mag = arith::AndIOp::create(b, w, ir.i32(0x7f7f7f7f));
        Value nonzero = arith::AndIOp::create(
            b, arith::AddIOp::create(b, mag, ir.i32(0x7f7f7f7f)),
            ir.i32(int32_t(0x80808080u)));
        w = arith::AndIOp::create(
            b, w, arith::OrIOp::create(b, nonzero, ir.i32(0x7f7f7f7f)));
      }
    }
    return operands(words);
  }

  /// Weight `wi`'s scale for row `row` in block `blk`; on gfx942 times 4
  /// (the two halved FNUZ operands).
  mlir::Value weightScale(size_t wi, IrIndex row, IrIndex blk) {
    using namespace mlir;
    IrIndex idx = row / kBlock * kBlocks() + blk;
    if (matrix)
      idx = *matrix * (ceilDiv(spec.n, kBlock) * kBlocks()) + idx;
    Value s = ir.load(scales[wi], idx);
    if (!k128())
      s = arith::MulFOp::create(b, s, ir.f32(4.0f));
    return s;
  }

  /// Block `blk` for every weight of `weights` (rows `wRows` of each):
  /// accumulators [weight][M tile][N tile].
  llvm::SmallVector<mlir::Value>
  block(mlir::Value x, llvm::ArrayRef<mlir::Value> weights, IrIndex lane,
        llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> wRows,
        IrIndex blk, bool tail, mlir::ValueRange accIn) {
    using namespace mlir;
    SmallVector<Value> acc(accIn);
    SmallVector<SmallVector<Value>> a;
    SmallVector<Value> rowScales; // per M tile: the result rows' scales
    for (IrIndex row : rows) {
      auto [ops, scale] = activations(x, row, blk, lane, tail);
      a.push_back(ops);
      SmallVector<Value> s;
      for (int64_t i = 0; i < 4; ++i) {
        Value from = toI32(resultRow(lane, i));
        s.push_back(gpu::ShuffleOp::create(b, scale, from, ir.i32(kWaveSize),
                                           gpu::ShuffleMode::IDX)
                        .getShuffleResult());
      }
      rowScales.push_back(vector::FromElementsOp::create(b, vec(4, f32()), s));
    }
    size_t perWeight = rows.size() * wRows.size();
    for (size_t wi = 0; wi < weights.size(); ++wi)
      for (size_t nt = 0; nt < wRows.size(); ++nt) {
        SmallVector<Value> bOps =
            weightBlock(weights[wi], wRows[nt], blk, lane, tail);
        Value sw = vector::BroadcastOp::create(b, vec(4, f32()),
                                               weightScale(wi, wRows[nt], blk));
        for (size_t mt = 0; mt < rows.size(); ++mt) {
          Value p = zeroAcc();
          int64_t k = k128() ? kBlock : kBlock / 4;
          for (size_t j = 0; j < bOps.size(); ++j)
            p = amdgpu::MFMAOp::create(b, p.getType(), 16, 16, uint32_t(k), 1,
                                       a[mt][j], bOps[j], p);
          Value s = arith::MulFOp::create(b, rowScales[mt], sw);
          Value &c = acc[wi * perWeight + mt * wRows.size() + nt];
          c = math::FmaOp::create(b, p, s, c);
        }
      }
    return acc;
  }

  /// The whole K loop: full blocks in an scf.for, a partial last block
  /// unrolled.
  llvm::SmallVector<mlir::Value>
  kLoop(mlir::Value x, llvm::ArrayRef<mlir::Value> weights, IrIndex lane,
        llvm::ArrayRef<IrIndex> rows, llvm::ArrayRef<IrIndex> wRows,
        llvm::SmallVector<mlir::Value> acc) {
    using namespace mlir;
    int64_t full = spec.k / kBlock;
    if (full > 0)
      acc = ir.forLoop(ir.idx(0), ir.idx(full), 1, acc,
                       [&](IrIndex blk, ValueRange in) {
                         return block(x, weights, lane, rows, wRows, blk,
                                      /*tail=*/false, in);
                       });
    if (spec.k % kBlock != 0)
      acc = block(x, weights, lane, rows, wRows, ir.idx(full), /*tail=*/true,
                  acc);
    return acc;
  }
};

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_FP8TILES_H
