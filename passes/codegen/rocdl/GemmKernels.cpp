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
// never stored), so the K loop has no branches. The tile steps live in
// GemmTiles.h, shared with the MoE expert GEMMs.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/GemmTiles.h"

using namespace mlir;
using namespace kiln::rocdl;

namespace {

//===----------------------------------------------------------------------===//
// MXFP4
//===----------------------------------------------------------------------===//

struct MxGemm : MxTiles {
  using MxTiles::MxTiles;

  void build() {
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
    acc = kLoop(x, {MxOperand{wq, ws}}, lane, rowIdx, nTileIdx, acc);
    storeResults(y, lane, bx, by, rows, acc);
    gpu::ReturnOp::create(b);
  }
};

//===----------------------------------------------------------------------===//
// Dense BF16
//===----------------------------------------------------------------------===//

struct Bf16Gemm : Bf16Tiles {
  using Bf16Tiles::Bf16Tiles;

  void build() {
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
    acc = kLoop(x, {w}, lane, rowIdx, wRows, acc);
    storeResults(y, lane, bx, by, rows, acc);
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildMxGemm(gpu::GPUModuleOp module, const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  MxGemm(b, spec, module).build();
}

void kiln::rocdl::buildBf16Gemm(gpu::GPUModuleOp module,
                                const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  Bf16Gemm(b, spec, module).build();
}
