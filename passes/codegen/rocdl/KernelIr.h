//===- KernelIr.h - Small IR-building vocabulary for the GPU kernels ------===//
//
// IrIndex lets the templates of MfmaLayout.h run on IR: every operator emits
// the arith op on `index` values. KernelIr wraps the few patterns every
// kernel needs (global memrefs, intrinsics, wave and workgroup reductions)
// so the kernel files read like the algorithm. KernelBody is the base of
// the kernel structs: the builder, the spec and the helpers they all use.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_CODEGEN_ROCDL_KERNELIR_H
#define KILN_PASSES_CODEGEN_ROCDL_KERNELIR_H

#include "passes/codegen/rocdl/KernelSpec.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace kiln::rocdl {

/// An `index` SSA value with arithmetic operators that build arith ops.
/// Indices are never negative, so / and % are the unsigned forms.
class IrIndex {
public:
  IrIndex(mlir::ImplicitLocOpBuilder &b, mlir::Value v) : b_(&b), v_(v) {}
  mlir::Value value() const { return v_; }
  operator mlir::Value() const { return v_; }

  friend IrIndex operator+(IrIndex a, IrIndex c) {
    return a.make(mlir::arith::AddIOp::create(*a.b_, a.v_, c.v_));
  }
  friend IrIndex operator-(IrIndex a, IrIndex c) {
    return a.make(mlir::arith::SubIOp::create(*a.b_, a.v_, c.v_));
  }
  friend IrIndex operator*(IrIndex a, IrIndex c) {
    return a.make(mlir::arith::MulIOp::create(*a.b_, a.v_, c.v_));
  }
  friend IrIndex operator+(IrIndex a, int64_t c) { return a + a.cst(c); }
  friend IrIndex operator-(IrIndex a, int64_t c) { return a - a.cst(c); }
  friend IrIndex operator*(IrIndex a, int64_t c) { return a * a.cst(c); }
  friend IrIndex operator/(IrIndex a, int64_t c) {
    return a.make(mlir::arith::DivUIOp::create(*a.b_, a.v_, a.cst(c)));
  }
  friend IrIndex operator%(IrIndex a, int64_t c) {
    return a.make(mlir::arith::RemUIOp::create(*a.b_, a.v_, a.cst(c)));
  }
  friend IrIndex operator/(IrIndex a, IrIndex c) {
    return a.make(mlir::arith::DivUIOp::create(*a.b_, a.v_, c.v_));
  }
  friend IrIndex operator%(IrIndex a, IrIndex c) {
    return a.make(mlir::arith::RemUIOp::create(*a.b_, a.v_, c.v_));
  }

private:
  IrIndex make(mlir::Value v) const { return IrIndex(*b_, v); }
  IrIndex cst(int64_t c) const {
    return make(mlir::arith::ConstantIndexOp::create(*b_, c));
  }
  mlir::ImplicitLocOpBuilder *b_;
  mlir::Value v_;
};

/// Builder helpers for one kernel body.
class KernelIr {
public:
  explicit KernelIr(mlir::ImplicitLocOpBuilder &b) : b(b) {}
  mlir::ImplicitLocOpBuilder &b;

  // Constants.
  IrIndex idx(int64_t v);
  IrIndex idx(mlir::Value v) { return IrIndex(b, v); }
  mlir::Value i32(int64_t v);
  mlir::Value f32(float v);

  // Types. Global memrefs are 1-D, static and identity-laid-out so the
  // bare-pointer calling convention applies (AMDGPU.md gotcha 4).
  mlir::MemRefType global(mlir::Type elem, int64_t size);
  /// An activation buffer of rows of `rowElems`: its static size is the
  /// largest whole number of rows below 2^31 elements (32-bit indexing);
  /// the real row count comes from the grid or an argument.
  mlir::MemRefType activations(mlir::Type elem, int64_t rowElems);
  mlir::MemRefType workgroup(mlir::Type elem, int64_t size);

  // Work-item ids as index values.
  IrIndex threadId();
  IrIndex blockId(mlir::gpu::Dimension dim);

  IrIndex min(IrIndex a, IrIndex c);
  mlir::Value toIndex(mlir::Value i32Value);
  mlir::Value ult(IrIndex a, IrIndex c);

  mlir::Value load(mlir::Value mem, IrIndex i);
  mlir::Value loadVector(mlir::VectorType type, mlir::Value mem, IrIndex i);
  void store(mlir::Value v, mlir::Value mem, IrIndex i);
  void storeVector(mlir::Value v, mlir::Value mem, IrIndex i);

  /// `llvm.call_intrinsic`: LLVM AMDGPU intrinsics instead of the ROCm
  /// device libraries (AMDGPU.md gotcha 2).
  mlir::Value intrinsic(llvm::StringRef name, mlir::Type result,
                        mlir::ValueRange args);

  /// Combines `values` across the 64 lanes of the wave (xor butterfly); every
  /// lane ends with the result. `combine(a, b)` returns the combined values.
  using Combine = std::function<llvm::SmallVector<mlir::Value>(
      llvm::ArrayRef<mlir::Value>, llvm::ArrayRef<mlir::Value>)>;
  llvm::SmallVector<mlir::Value> waveReduce(llvm::ArrayRef<mlir::Value> values,
                                            const Combine &combine);
  /// The same over the whole workgroup of kRowBlock threads: one value per
  /// wave goes through `scratch` (workgroup memrefs, one per value, of
  /// kRowBlock / 64 entries), then every thread combines them in wave order.
  llvm::SmallVector<mlir::Value>
  blockReduce(llvm::ArrayRef<mlir::Value> values, const Combine &combine,
              llvm::ArrayRef<mlir::Value> scratch);

  /// for (i = start; i < end; i += step) with loop-carried values.
  llvm::SmallVector<mlir::Value>
  forLoop(IrIndex start, IrIndex end, int64_t step, mlir::ValueRange init,
          const std::function<
              llvm::SmallVector<mlir::Value>(IrIndex, mlir::ValueRange)> &body);
  /// if (cond) then(); no results.
  void ifThen(mlir::Value cond, const std::function<void()> &then);
};

/// log2(e): exp(x) is exp2(x * kLog2e).
constexpr float kLog2e = 1.4426950408889634f;

/// The state and the small helpers every kernel body shares: the builder,
/// the KernelIr vocabulary on it, the spec and, for the kernels that create
/// their gpu.func, the module. The kernel structs derive from it.
struct KernelBody {
  KernelBody(mlir::ImplicitLocOpBuilder &b, const KernelSpec &spec,
             mlir::gpu::GPUModuleOp module = {})
      : ir(b), b(b), module(module), spec(spec) {}
  KernelIr ir;
  mlir::ImplicitLocOpBuilder &b;
  mlir::gpu::GPUModuleOp module;
  const KernelSpec &spec;

  int64_t wg() const { return spec.blockSize(); }

  mlir::Type f32() { return b.getF32Type(); }
  mlir::Type i32() { return b.getI32Type(); }
  mlir::Type i16() { return b.getIntegerType(16); }
  mlir::Type i8() { return b.getIntegerType(8); }
  mlir::VectorType vec(int64_t n, mlir::Type elem) {
    return mlir::VectorType::get({n}, elem);
  }

  /// An index value as i32.
  mlir::Value toI32(mlir::Value indexValue) {
    return mlir::arith::IndexCastUIOp::create(b, i32(), indexValue);
  }
  mlir::Value cmpi(mlir::arith::CmpIPredicate pred, mlir::Value l,
                   mlir::Value r) {
    return mlir::arith::CmpIOp::create(b, pred, l, r);
  }
  mlir::Value cmpf(mlir::arith::CmpFPredicate pred, mlir::Value l,
                   mlir::Value r) {
    return mlir::arith::CmpFOp::create(b, pred, l, r);
  }
  mlir::Value select(mlir::Value cond, mlir::Value l, mlir::Value r) {
    return mlir::arith::SelectOp::create(b, cond, l, r);
  }
  void barrier() { mlir::gpu::BarrierOp::create(b); }
};

/// Creates `gpu.func @symbol(args) kernel` in `module` with the spec's
/// constant workgroup size, and points `b` at its entry block.
mlir::gpu::GPUFuncOp createKernelFunc(mlir::ImplicitLocOpBuilder &b,
                                      mlir::gpu::GPUModuleOp module,
                                      const KernelSpec &spec,
                                      mlir::TypeRange args,
                                      mlir::TypeRange workgroupBuffers = {});

// Kernel bodies (GemmKernels.cpp, RowKernels.cpp). Each creates its
// gpu.func in `module`.
void buildMxGemm(mlir::gpu::GPUModuleOp module, const KernelSpec &spec);
void buildBf16Gemm(mlir::gpu::GPUModuleOp module, const KernelSpec &spec);
void buildRowKernel(mlir::gpu::GPUModuleOp module, const KernelSpec &spec);
// Generic kinds (KernelParams.def), per family.
void buildDataKernel(mlir::gpu::GPUModuleOp module, const KernelSpec &spec);
void buildMoeKernel(mlir::gpu::GPUModuleOp module, const KernelSpec &spec);
void buildAttentionKernel(mlir::gpu::GPUModuleOp module,
                          const KernelSpec &spec);

} // namespace kiln::rocdl

#endif // KILN_PASSES_CODEGEN_ROCDL_KERNELIR_H
