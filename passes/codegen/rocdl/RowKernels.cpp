//===- RowKernels.cpp - One workgroup per row: norms, elementwise, RoPE ---===//
//
// kRowBlock threads per workgroup, row = workgroup id x; thread t handles
// elements t, t + kRowBlock, ... of its row (vectors of 4 when the row
// width allows), so every access is coalesced. Transcendentals use the
// hardware instructions through LLVM AMDGPU intrinsics (v_exp_f32,
// v_rcp_f32, v_rsq_f32, v_sin_f32, v_cos_f32), never the ROCm device
// libraries. Their accuracy is the instructions' (about 1 ulp for exp, rcp
// and rsq); RoPE reduces the angle in f64 first, so v_sin/v_cos only see
// [0, 1) revolutions.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelIr.h"
#include "passes/codegen/rocdl/KernelParams.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kiln::rocdl;

namespace {

/// Elements per row: c, or rope's h * d.
int64_t rowElements(const KernelSpec &spec) {
  switch (spec.kind) {
  case KernelKind::RmsNorm:
    return params<RmsNormParams>(spec).c;
  case KernelKind::SwiGlu:
    return params<SwiGluParams>(spec).c;
  case KernelKind::Argmax:
    return params<ArgmaxParams>(spec).c;
  case KernelKind::Rope: {
    RopeParams p = params<RopeParams>(spec);
    return p.h * p.d;
  }
  default:
    llvm_unreachable("not a row kernel");
  }
}

struct RowKernel : KernelBody {
  RowKernel(ImplicitLocOpBuilder &b, const KernelSpec &spec,
            gpu::GPUModuleOp module)
      : KernelBody(b, spec, module), cols(rowElements(spec)) {}
  const int64_t cols;

  /// Elements per thread access: 4 when rows stay 16-byte aligned.
  int64_t width() const { return cols % 4 == 0 ? 4 : 1; }
  VectorType vecType() { return VectorType::get({width()}, f32()); }
  MemRefType rowsOf(Type elem) { return ir.activations(elem, cols); }
  Value splat(float v) {
    return arith::ConstantOp::create(b, DenseElementsAttr::get(vecType(), v));
  }

  /// Calls body(elementOffsetInRow) for this thread's accesses of one row.
  void forEachAccess(const std::function<void(IrIndex)> &body) {
    IrIndex tid = ir.threadId();
    ir.forLoop(tid, ir.idx(cols / width()), kRowBlock, {},
               [&](IrIndex i, ValueRange) {
                 body(i * width());
                 return SmallVector<Value>();
               });
  }

  /// Elementwise intrinsic on a vector, element by element: the AMDGPU
  /// intrinsics only select on scalars.
  Value mapIntrinsic(StringRef name, Value v) {
    auto type = cast<VectorType>(v.getType());
    SmallVector<Value> elems;
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      elems.push_back(
          ir.intrinsic(name, f32(), {vector::ExtractOp::create(b, v, i)}));
    return vector::FromElementsOp::create(b, type, elems);
  }

  void rmsNorm(Value x, Value w, Value y, Value scratch) {
    IrIndex base = ir.blockId(gpu::Dimension::x) * cols;
    IrIndex tid = ir.threadId();
    Value sum = ir.forLoop(
        tid, ir.idx(cols / width()), kRowBlock, {splat(0.0f)},
        [&](IrIndex i, ValueRange acc) {
          Value v = ir.loadVector(vecType(), x, base + i * width());
          return SmallVector<Value>{math::FmaOp::create(b, v, v, acc[0])};
        })[0];
    Value partial =
        vector::ReductionOp::create(b, vector::CombiningKind::ADD, sum);
    auto add = [&](ArrayRef<Value> l, ArrayRef<Value> r) {
      return SmallVector<Value>{arith::AddFOp::create(b, l[0], r[0])};
    };
    Value total = ir.blockReduce({partial}, add, {scratch})[0];
    Value mean = arith::MulFOp::create(b, total, ir.f32(1.0f / cols));
    Value inv =
        ir.intrinsic("llvm.amdgcn.rsq.f32", f32(),
                     {arith::AddFOp::create(
                         b, mean, ir.f32(params<RmsNormParams>(spec).eps))});
    Value invV = vector::BroadcastOp::create(b, vecType(), inv);
    forEachAccess([&](IrIndex c) {
      Value v = ir.loadVector(vecType(), x, base + c);
      Value g = ir.loadVector(vecType(), w, c);
      Value r = arith::MulFOp::create(b, arith::MulFOp::create(b, v, invV), g);
      ir.storeVector(r, y, base + c);
    });
  }

  /// silu(g) * u = g * u / (1 + 2^(-g * log2 e)).
  void swiglu(Value g, Value u, Value y) {
    IrIndex base = ir.blockId(gpu::Dimension::x) * cols;
    forEachAccess([&](IrIndex c) {
      Value gv = ir.loadVector(vecType(), g, base + c);
      Value uv = ir.loadVector(vecType(), u, base + c);
      Value t = arith::MulFOp::create(b, gv, splat(-kLog2e));
      Value e = mapIntrinsic("llvm.amdgcn.exp2", t);
      Value den = arith::AddFOp::create(b, e, splat(1.0f));
      Value sig = mapIntrinsic("llvm.amdgcn.rcp", den);
      Value r = arith::MulFOp::create(b, arith::MulFOp::create(b, gv, sig), uv);
      ir.storeVector(r, y, base + c);
    });
  }

  /// Ties go to the lower index; NaN ranks below every number (RowOps.h).
  SmallVector<Value> better(ArrayRef<Value> l, ArrayRef<Value> r) {
    // r wins if it is a number and (l is NaN or r > l or (r == l and its
    // index is lower)), or both are NaN and r's index is lower.
    Value rNum = cmpf(arith::CmpFPredicate::ORD, r[0], r[0]);
    Value lNan = cmpf(arith::CmpFPredicate::UNO, l[0], l[0]);
    Value lower = cmpi(arith::CmpIPredicate::slt, r[1], l[1]);
    Value greater = cmpf(arith::CmpFPredicate::OGT, r[0], l[0]);
    Value tie = arith::AndIOp::create(
        b, cmpf(arith::CmpFPredicate::OEQ, r[0], l[0]), lower);
    Value numWins = arith::AndIOp::create(
        b, rNum,
        arith::OrIOp::create(b, lNan, arith::OrIOp::create(b, greater, tie)));
    Value nanTie = arith::AndIOp::create(
        b,
        arith::AndIOp::create(
            b, lNan,
            arith::XOrIOp::create(b, rNum,
                                  arith::ConstantIntOp::create(b, 1, 1))),
        lower);
    Value takeR = arith::OrIOp::create(b, numWins, nanTie);
    return {select(takeR, r[0], l[0]), select(takeR, r[1], l[1])};
  }

  void argmax(Value x, Value y, Value scratchV, Value scratchI) {
    IrIndex row = ir.blockId(gpu::Dimension::x);
    IrIndex base = row * cols;
    IrIndex tid = ir.threadId();
    Value nan = ir.f32(std::nanf(""));
    Value none = ir.i32(INT32_MAX);
    SmallVector<Value> best =
        ir.forLoop(tid, ir.idx(cols), kRowBlock, {nan, none},
                   [&](IrIndex c, ValueRange acc) {
                     Value v = ir.load(x, base + c);
                     Value ci = toI32(c);
                     return better({acc[0], acc[1]}, {v, ci});
                   });
    auto combine = [&](ArrayRef<Value> l, ArrayRef<Value> r) {
      return better(l, r);
    };
    SmallVector<Value> total =
        ir.blockReduce(best, combine, {scratchV, scratchI});
    Value first =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, ir.idx(0));
    ir.ifThen(first, [&] { ir.store(total[1], y, row); });
  }

  /// Pair i of a head turns by pos * theta^(-2i / rotaryDim) radians; the
  /// table holds that rate in revolutions (f64) so the angle reduces
  /// exactly enough in f64 before the f32 sin/cos.
  void rope(Value x, Value pos, Value y) {
    const RopeParams p = params<RopeParams>(spec);
    int64_t half = p.r / 2;
    SmallVector<double> rate;
    for (int64_t i = 0; i < half; ++i)
      rate.push_back(std::pow(double(p.theta), -2.0 * double(i) / double(p.r)) /
                     (2.0 * M_PI));
    MemRefType tableType = ir.global(b.getF64Type(), half);
    std::string tableName = spec.symbol() + "_rate";
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(&module.getBody()->front());
      auto data = DenseElementsAttr::get(
          RankedTensorType::get({half}, b.getF64Type()), ArrayRef(rate));
      memref::GlobalOp::create(b, b.getStringAttr(tableName),
                               b.getStringAttr("private"),
                               TypeAttr::get(tableType), data, b.getUnitAttr(),
                               /*alignment=*/IntegerAttr());
    }
    Value table = memref::GetGlobalOp::create(b, tableType, tableName);

    int64_t rowElems = cols;
    IrIndex token = ir.blockId(gpu::Dimension::x);
    IrIndex base = token * rowElems;
    Value position =
        arith::SIToFPOp::create(b, b.getF64Type(), ir.load(pos, token));
    IrIndex tid = ir.threadId();
    ir.forLoop(
        tid, ir.idx(rowElems), kRowBlock, {}, [&](IrIndex j, ValueRange) {
          IrIndex d = j % p.d;
          // Lanes outside [offset, offset + rotaryDim) copy; the others compute
          // with clamped (valid) indices and select.
          Value inSpan = arith::AndIOp::create(
              b,
              arith::CmpIOp::create(b, arith::CmpIPredicate::uge, d,
                                    ir.idx(p.o)),
              ir.ult(d, ir.idx(p.o + p.r)));
          IrIndex r = ir.min(d - ir.min(d, ir.idx(p.o)), ir.idx(p.r - 1));
          IrIndex pair = p.neox ? r % half : r / 2;
          Value isFirst =
              p.neox ? ir.ult(r, ir.idx(half))
                     : arith::CmpIOp::create(b, arith::CmpIPredicate::eq, r % 2,
                                             ir.idx(0))
                           .getResult();
          int64_t stride = p.neox ? half : 1;
          // Partner: j + stride for a first element, j - stride for a second.
          IrIndex up = ir.min(j + stride, ir.idx(rowElems - 1));
          IrIndex down = j - ir.min(j, ir.idx(stride));
          Value partnerIdx = select(isFirst, up, down);
          Value v = ir.load(x, base + j);
          Value partner = ir.load(x, base + ir.idx(partnerIdx));
          Value rev = arith::MulFOp::create(b, position, ir.load(table, pair));
          Value fl = ir.intrinsic("llvm.floor.f64", b.getF64Type(), {rev});
          Value frac = arith::TruncFOp::create(
              b, f32(), arith::SubFOp::create(b, rev, fl));
          Value cs = ir.intrinsic("llvm.amdgcn.cos", f32(), {frac});
          Value sn = ir.intrinsic("llvm.amdgcn.sin", f32(), {frac});
          // first: v*c - partner*s; second: v*c + partner*s.
          Value ps = arith::MulFOp::create(b, partner, sn);
          Value signed_ = select(isFirst, arith::NegFOp::create(b, ps), ps);
          Value rot = math::FmaOp::create(b, v, cs, signed_);
          ir.store(select(inSpan, rot, v), y, base + j);
          return SmallVector<Value>();
        });
  }

  void build() {
    int64_t waves = kRowBlock / kWaveSize;
    switch (spec.kind) {
    case KernelKind::RmsNorm: {
      auto fn = createKernelFunc(
          b, module, spec,
          {rowsOf(f32()), ir.global(f32(), cols), rowsOf(f32())},
          {ir.workgroup(f32(), waves)});
      rmsNorm(fn.getArgument(0), fn.getArgument(1), fn.getArgument(2),
              fn.getWorkgroupAttributions()[0]);
      break;
    }
    case KernelKind::SwiGlu: {
      auto fn = createKernelFunc(b, module, spec,
                                 {rowsOf(f32()), rowsOf(f32()), rowsOf(f32())});
      swiglu(fn.getArgument(0), fn.getArgument(1), fn.getArgument(2));
      break;
    }
    case KernelKind::Argmax: {
      auto fn = createKernelFunc(
          b, module, spec, {rowsOf(f32()), ir.activations(i32(), 1)},
          {ir.workgroup(f32(), waves), ir.workgroup(i32(), waves)});
      argmax(fn.getArgument(0), fn.getArgument(1),
             fn.getWorkgroupAttributions()[0],
             fn.getWorkgroupAttributions()[1]);
      break;
    }
    case KernelKind::Rope: {
      auto fn = createKernelFunc(
          b, module, spec,
          {rowsOf(f32()), ir.activations(i32(), 1), rowsOf(f32())});
      rope(fn.getArgument(0), fn.getArgument(1), fn.getArgument(2));
      break;
    }
    default:
      llvm_unreachable("not a row kernel");
    }
    gpu::ReturnOp::create(b);
  }
};

} // namespace

void kiln::rocdl::buildRowKernel(gpu::GPUModuleOp module,
                                 const KernelSpec &spec) {
  ImplicitLocOpBuilder b(module.getLoc(), module.getContext());
  RowKernel(b, spec, module).build();
}
