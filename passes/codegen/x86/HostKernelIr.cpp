//===- HostKernelIr.cpp - The x86-64 host kernels, built as IR -----------===//
//
// Each kernel is a func.func over bare pointers (the C ABI of X86Codegen.h):
// every pointer becomes a memref<?xf32> through a memref descriptor built
// in the LLVM dialect, and the elementwise loop runs kLanes f32 at a time
// with one masked tail step.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/x86/X86Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

using namespace mlir;

namespace {

/// f32 lanes per vector step: two ymm registers on x86-64-v3.
constexpr int64_t kLanes = 16;

class HostKernelIr {
public:
  explicit HostKernelIr(ModuleOp module)
      : b_(module.getLoc(), module.getContext()), module_(module) {
    MLIRContext *ctx = module.getContext();
    f32_ = b_.getF32Type();
    i64_ = b_.getI64Type();
    vec_ = VectorType::get({kLanes}, f32_);
    mask_ = VectorType::get({kLanes}, b_.getI1Type());
    ptr_ = LLVM::LLVMPointerType::get(ctx);
    auto arr = LLVM::LLVMArrayType::get(i64_, 1);
    desc_ = LLVM::LLVMStructType::getLiteral(ctx, {ptr_, ptr_, i64_, arr, arr});
    mem_ = MemRefType::get({ShapedType::kDynamic}, f32_);
  }

  void build(const std::string &kernel) {
    auto sigmoidDenominator = [&](Value x) {
      Value nx = arith::NegFOp::create(b_, x);
      Value e = math::ExpOp::create(b_, nx);
      return Value(arith::AddFOp::create(b_, one_, e));
    };
    if (kernel == "silu")
      return unary(kernel, [&](ValueRange in) -> Value {
        return arith::DivFOp::create(b_, in[0], sigmoidDenominator(in[0]));
      });
    if (kernel == "sigmoid")
      return unary(kernel, [&](ValueRange in) -> Value {
        return arith::DivFOp::create(b_, one_, sigmoidDenominator(in[0]));
      });
    if (kernel == "relu")
      // std::max(x, 0): x unless x < 0 (NaN and -0 pass through).
      return unary(kernel, [&](ValueRange in) -> Value {
        Value lt =
            arith::CmpFOp::create(b_, arith::CmpFPredicate::OLT, in[0], zero_);
        return arith::SelectOp::create(b_, lt, zero_, in[0]);
      });
    if (kernel == "scale")
      return unary(kernel, [&](ValueRange in) -> Value {
        return arith::MulFOp::create(b_, in[0], factor_);
      });
    if (kernel == "add")
      return binary(kernel, [&](Value x, Value y) -> Value {
        return arith::AddFOp::create(b_, x, y);
      });
    if (kernel == "mul")
      return binary(kernel, [&](Value x, Value y) -> Value {
        return arith::MulFOp::create(b_, x, y);
      });
    if (kernel == "rms_norm")
      return rmsNorm();
  }

private:
  using Body = std::function<Value(ValueRange)>;

  /// func.func @kiln_<name>(args) and the constants every kernel uses.
  Block *begin(const std::string &name, TypeRange args) {
    b_.setInsertionPointToEnd(module_.getBody());
    auto fn =
        func::FuncOp::create(b_, "kiln_" + name, b_.getFunctionType(args, {}));
    Block *entry = fn.addEntryBlock();
    b_.setInsertionPointToStart(entry);
    c0i64_ = LLVM::ConstantOp::create(b_, i64_, b_.getI64IntegerAttr(0));
    c1i64_ = LLVM::ConstantOp::create(b_, i64_, b_.getI64IntegerAttr(1));
    c0_ = arith::ConstantIndexOp::create(b_, 0);
    c1_ = arith::ConstantIndexOp::create(b_, 1);
    cW_ = arith::ConstantIndexOp::create(b_, kLanes);
    zero_ = splat(vec_, 0.0);
    one_ = splat(vec_, 1.0);
    return entry;
  }
  void end() { func::ReturnOp::create(b_); }

  Value splat(VectorType type, double v) {
    return arith::ConstantOp::create(
        b_, DenseElementsAttr::get(
                type, b_.getFloatAttr(type.getElementType(), v).getValue()));
  }
  Value index(Value i64Value) {
    return arith::IndexCastOp::create(b_, b_.getIndexType(), i64Value);
  }

  /// memref<?xf32> over the bare pointer `p` with `len` (i64) elements.
  Value view(Value p, Value len) {
    Value d = LLVM::PoisonOp::create(b_, desc_);
    d = LLVM::InsertValueOp::create(b_, d, p, ArrayRef<int64_t>{0});
    d = LLVM::InsertValueOp::create(b_, d, p, ArrayRef<int64_t>{1});
    d = LLVM::InsertValueOp::create(b_, d, c0i64_, ArrayRef<int64_t>{2});
    d = LLVM::InsertValueOp::create(b_, d, len, ArrayRef<int64_t>{3, 0});
    d = LLVM::InsertValueOp::create(b_, d, c1i64_, ArrayRef<int64_t>{4, 0});
    return UnrealizedConversionCastOp::create(b_, mem_, d).getResult(0);
  }

  /// scf.for lb..ub step `step` with `iters`; `body(iv, iters)` returns the
  /// values to yield (none without iters).
  scf::ForOp
  forLoop(Value lb, Value ub, Value step, ValueRange iters,
          const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
    auto loop = scf::ForOp::create(b_, lb, ub, step, iters);
    OpBuilder::InsertionGuard guard(b_);
    Block *block = loop.getBody();
    if (iters.empty())
      b_.setInsertionPoint(block->getTerminator());
    else
      b_.setInsertionPointToEnd(block);
    SmallVector<Value> yields =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    if (!iters.empty())
      scf::YieldOp::create(b_, yields);
    return loop;
  }

  /// Elements [0, len) (index) of the inputs (memref, offset) into `out` at
  /// `outOff`, kLanes at a time, then one masked step for the tail.
  void vecLoop(Value len, ArrayRef<std::pair<Value, Value>> ins, Value out,
               Value outOff, const Body &body) {
    Value rem = arith::RemUIOp::create(b_, len, cW_);
    Value main = arith::SubIOp::create(b_, len, rem);
    auto step = [&](Value at, Value mask) {
      SmallVector<Value> in;
      for (auto [memref, offset] : ins) {
        Value ix = arith::AddIOp::create(b_, offset, at);
        if (mask)
          in.push_back(vector::MaskedLoadOp::create(
              b_, vec_, memref, ValueRange{ix}, mask, zero_));
        else
          in.push_back(
              vector::LoadOp::create(b_, vec_, memref, ValueRange{ix}));
      }
      Value r = body(in);
      Value ox = arith::AddIOp::create(b_, outOff, at);
      if (mask)
        vector::MaskedStoreOp::create(b_, out, ValueRange{ox}, mask, r);
      else
        vector::StoreOp::create(b_, r, out, ValueRange{ox});
    };
    forLoop(c0_, main, cW_, {}, [&](Value j, ValueRange) {
      step(j, Value());
      return SmallVector<Value>();
    });
    Value has = arith::CmpIOp::create(b_, arith::CmpIPredicate::ugt, rem, c0_);
    auto tail = scf::IfOp::create(b_, has, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(tail.thenBlock()->getTerminator());
    Value mask = vector::CreateMaskOp::create(b_, mask_, ValueRange{rem});
    step(main, mask);
  }

  /// y = f(x) over n elements; scale also takes the factor.
  void unary(const std::string &name, const Body &body) {
    bool scale = name == "scale";
    SmallVector<Type> args = {ptr_, ptr_, i64_};
    if (scale)
      args.push_back(f32_);
    Block *entry = begin(name, args);
    Value x = view(entry->getArgument(0), entry->getArgument(2));
    Value y = view(entry->getArgument(1), entry->getArgument(2));
    Value n = index(entry->getArgument(2));
    if (scale)
      factor_ = vector::BroadcastOp::create(b_, vec_, entry->getArgument(3));
    vecLoop(n, {{x, c0_}}, y, c0_, body);
    end();
  }

  /// y = a (op) b, b the same shape or one row broadcast over the rows.
  void binary(const std::string &name,
              const std::function<Value(Value, Value)> &op) {
    Block *entry = begin(name, {ptr_, ptr_, ptr_, i64_, i64_, i64_});
    Value rows = entry->getArgument(3), cols = entry->getArgument(4);
    Value isRow = arith::CmpIOp::create(b_, arith::CmpIPredicate::ne,
                                        entry->getArgument(5), c0i64_);
    Value total = arith::MulIOp::create(b_, rows, cols);
    Value r = arith::SelectOp::create(b_, isRow, rows, c1i64_);
    Value c = arith::SelectOp::create(b_, isRow, cols, total);
    Value bStride = arith::SelectOp::create(b_, isRow, c0i64_, c);
    Value a = view(entry->getArgument(0), total);
    Value bv = view(entry->getArgument(1), c);
    Value y = view(entry->getArgument(2), total);
    Value ri = index(r), ci = index(c), bi = index(bStride);
    forLoop(c0_, ri, c1_, {}, [&](Value row, ValueRange) {
      Value ao = arith::MulIOp::create(b_, row, ci);
      Value bo = arith::MulIOp::create(b_, row, bi);
      vecLoop(ci, {{a, ao}, {bv, bo}}, y, ao,
              [&](ValueRange in) { return op(in[0], in[1]); });
      return SmallVector<Value>();
    });
    end();
  }

  /// y = x / sqrt(mean(x^2) + eps) * w per row, the sum of squares in f64.
  void rmsNorm() {
    Block *entry = begin("rms_norm", {ptr_, ptr_, ptr_, i64_, i64_, f32_});
    Value rows = entry->getArgument(3), dim = entry->getArgument(4);
    Value total = arith::MulIOp::create(b_, rows, dim);
    Value x = view(entry->getArgument(0), total);
    Value w = view(entry->getArgument(1), dim);
    Value y = view(entry->getArgument(2), total);
    Value ri = index(rows), di = index(dim);
    Value c8 = arith::ConstantIndexOp::create(b_, 8);
    auto vec8 = VectorType::get({8}, f32_);
    auto vec8d = VectorType::get({8}, b_.getF64Type());
    Value z8 = splat(vec8, 0.0), zd = splat(vec8d, 0.0);
    Value oned = arith::ConstantOp::create(b_, b_.getF64FloatAttr(1.0));
    Value dimf = arith::SIToFPOp::create(b_, b_.getF64Type(), dim);
    Value epsd =
        arith::ExtFOp::create(b_, b_.getF64Type(), entry->getArgument(5));
    Value srem = arith::RemUIOp::create(b_, di, c8);
    Value smain = arith::SubIOp::create(b_, di, srem);
    forLoop(c0_, ri, c1_, {}, [&](Value row, ValueRange) {
      Value xo = arith::MulIOp::create(b_, row, di);
      // Σ x² in f64, eight lanes at a time, then the masked tail.
      scf::ForOp sum =
          forLoop(c0_, smain, c8, ValueRange{zd}, [&](Value k, ValueRange acc) {
            Value kx = arith::AddIOp::create(b_, xo, k);
            Value sv = vector::LoadOp::create(b_, vec8, x, ValueRange{kx});
            Value sd = arith::ExtFOp::create(b_, vec8d, sv);
            return SmallVector<Value>{
                math::FmaOp::create(b_, sd, sd, acc[0]).getResult()};
          });
      Value tk = arith::AddIOp::create(b_, xo, smain);
      Value tm = vector::CreateMaskOp::create(
          b_, VectorType::get({8}, b_.getI1Type()), ValueRange{srem});
      Value tv =
          vector::MaskedLoadOp::create(b_, vec8, x, ValueRange{tk}, tm, z8);
      Value td = arith::ExtFOp::create(b_, vec8d, tv);
      Value acc2 = math::FmaOp::create(b_, td, td, sum.getResult(0));
      Value ss =
          vector::ReductionOp::create(b_, vector::CombiningKind::ADD, acc2);
      Value mean = arith::DivFOp::create(b_, ss, dimf);
      Value me = arith::AddFOp::create(b_, mean, epsd);
      Value rt = math::SqrtOp::create(b_, me);
      Value invd = arith::DivFOp::create(b_, oned, rt);
      Value inv = arith::TruncFOp::create(b_, f32_, invd);
      Value invv = vector::BroadcastOp::create(b_, vec_, inv);
      vecLoop(di, {{x, xo}, {w, c0_}}, y, xo, [&](ValueRange in) -> Value {
        Value xs = arith::MulFOp::create(b_, in[0], invv);
        return arith::MulFOp::create(b_, xs, in[1]);
      });
      return SmallVector<Value>();
    });
    end();
  }

  ImplicitLocOpBuilder b_;
  ModuleOp module_;
  Type f32_, i64_, ptr_, desc_;
  VectorType vec_, mask_;
  MemRefType mem_;
  Value c0i64_, c1i64_, c0_, c1_, cW_, zero_, one_, factor_;
};

} // namespace

OwningOpRef<ModuleOp>
kiln::x86::buildHostKernelModule(MLIRContext &context,
                                 const std::vector<std::string> &kernels) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  HostKernelIr ir(*module);
  for (const std::string &k : kernels)
    ir.build(k);
  return module;
}
