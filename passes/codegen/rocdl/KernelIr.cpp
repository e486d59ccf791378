//===- KernelIr.cpp -------------------------------------------------------===//

#include "passes/codegen/rocdl/KernelIr.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln::rocdl;

IrIndex KernelIr::idx(int64_t v) {
  return IrIndex(b, arith::ConstantIndexOp::create(b, v));
}

Value KernelIr::i32(int64_t v) {
  return arith::ConstantIntOp::create(b, b.getI32Type(), v);
}

Value KernelIr::f32(float v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(), llvm::APFloat(v));
}

MemRefType KernelIr::global(Type elem, int64_t size) {
  auto space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Global);
  return MemRefType::get({size}, elem, MemRefLayoutAttrInterface(), space);
}

MemRefType KernelIr::activations(Type elem, int64_t rowElems) {
  const int64_t maxElems = (int64_t(1) << 31) - 1;
  return global(elem, maxElems / rowElems * rowElems);
}

MemRefType KernelIr::workgroup(Type elem, int64_t size) {
  auto space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  return MemRefType::get({size}, elem, MemRefLayoutAttrInterface(), space);
}

IrIndex KernelIr::threadId() {
  return idx(gpu::ThreadIdOp::create(b, gpu::Dimension::x).getResult());
}

IrIndex KernelIr::blockId(gpu::Dimension dim) {
  return idx(gpu::BlockIdOp::create(b, dim).getResult());
}

IrIndex KernelIr::min(IrIndex a, IrIndex c) {
  return idx(arith::MinUIOp::create(b, a, c).getResult());
}

Value KernelIr::toIndex(Value i32Value) {
  return arith::IndexCastUIOp::create(b, b.getIndexType(), i32Value);
}

Value KernelIr::ult(IrIndex a, IrIndex c) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, a, c);
}

Value KernelIr::load(Value mem, IrIndex i) {
  return memref::LoadOp::create(b, mem, ValueRange{i.value()});
}

Value KernelIr::loadVector(VectorType type, Value mem, IrIndex i) {
  return vector::LoadOp::create(b, type, mem, ValueRange{i.value()});
}

void KernelIr::store(Value v, Value mem, IrIndex i) {
  memref::StoreOp::create(b, v, mem, ValueRange{i.value()});
}

void KernelIr::storeVector(Value v, Value mem, IrIndex i) {
  vector::StoreOp::create(b, v, mem, ValueRange{i.value()});
}

Value KernelIr::intrinsic(llvm::StringRef name, Type result, ValueRange args) {
  return LLVM::CallIntrinsicOp::create(b, result, b.getStringAttr(name), args)
      .getResult(0);
}

SmallVector<Value> KernelIr::waveReduce(ArrayRef<Value> values,
                                        const Combine &combine) {
  SmallVector<Value> acc(values);
  for (int32_t offset = kWaveSize / 2; offset >= 1; offset /= 2) {
    SmallVector<Value> other;
    for (Value v : acc)
      other.push_back(gpu::ShuffleOp::create(b, v, offset, int32_t(kWaveSize),
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult());
    acc = combine(acc, other);
  }
  return acc;
}

SmallVector<Value> KernelIr::blockReduce(ArrayRef<Value> values,
                                         const Combine &combine,
                                         ArrayRef<Value> scratch) {
  SmallVector<Value> wave = waveReduce(values, combine);
  IrIndex tid = threadId();
  IrIndex waveId = tid / kWaveSize;
  Value first = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                      tid % kWaveSize, idx(0));
  ifThen(first, [&] {
    for (auto [v, mem] : llvm::zip(wave, scratch))
      store(v, mem, waveId);
  });
  gpu::BarrierOp::create(b);
  SmallVector<Value> acc;
  for (Value mem : scratch)
    acc.push_back(load(mem, idx(0)));
  for (int64_t w = 1; w < kRowBlock / kWaveSize; ++w) {
    SmallVector<Value> other;
    for (Value mem : scratch)
      other.push_back(load(mem, idx(w)));
    acc = combine(acc, other);
  }
  return acc;
}

SmallVector<Value> KernelIr::forLoop(
    IrIndex start, IrIndex end, int64_t step, ValueRange init,
    const std::function<SmallVector<Value>(IrIndex, ValueRange)> &body) {
  auto loop = scf::ForOp::create(b, start, end, idx(step), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  // Without loop-carried values the builder already added the yield.
  if (init.empty())
    b.setInsertionPoint(loop.getBody()->getTerminator());
  SmallVector<Value> next =
      body(idx(loop.getInductionVar()), loop.getRegionIterArgs());
  if (!init.empty())
    scf::YieldOp::create(b, next);
  return SmallVector<Value>(loop.getResults());
}

void KernelIr::ifThen(Value cond, const std::function<void()> &then) {
  auto op = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&op.getThenRegion().front());
  then();
}

gpu::GPUFuncOp kiln::rocdl::createKernelFunc(ImplicitLocOpBuilder &b,
                                             gpu::GPUModuleOp module,
                                             const KernelSpec &spec,
                                             TypeRange args,
                                             TypeRange workgroupBuffers) {
  b.setInsertionPointToEnd(module.getBody());
  auto fn = gpu::GPUFuncOp::create(
      b, spec.symbol(), b.getFunctionType(args, {}), workgroupBuffers);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t block = int32_t(spec.blockSize());
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({block, 1, 1}));
  b.setInsertionPointToStart(&fn.getBody().front());
  return fn;
}
